"""The case table: every fixture declared once, one row each.

A valid case names its inputs and options; the oracle computes what they should give. An invalid
case names its inputs and options and the error every port must raise: its `kind` and its exact
message (the TypeScript port spells argument names its own way: attnMask, enableGqa, isCausal).

Inputs are written three ways:
  - a shape tuple such as (2, 4, 8): numbers drawn from the case's own generator, standard normal;
  - a function of the generator (`normal(shape, spread, at)`, `bool_mask(...)`, ...), for other draws;
  - a literal nested list, used as written (the tutorial's examples, and most invalid inputs).
Each case draws from `numpy.random.Generator(PCG64(seed))` with its own seed, in the order query,
key, value, attn_mask, so adding or editing one case never changes another. Drawn numbers keep
three significant digits, so the files stay short and readable; the oracle takes them exactly as
the float64 values they are.

Every row names its fields (id, seed, tags, description, inputs, options, error). Its tags say what
it exercises, from the list in TAGS below (a test keeps the two in step); `verify --tag` picks cases
by them. An invalid case is tagged `error` and its error kind.

Three tables: VALID_CASES and INVALID_CASES are written as fixtures (CASES), and every port is held
to them; ARRAY_CASES hold inputs JSON cannot carry (a numpy dtype, a zero dim before others), and
only the Python ports are held to them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Generator = np.random.Generator
Spec = tuple | list | np.ndarray | Callable[[Generator], object]


def _three_digits(x: np.ndarray) -> np.ndarray:
    """Round every number to three significant digits (exact float64 values from then on)."""
    flat = [float(f"{v:.3g}") for v in x.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(x.shape)


def normal(shape: tuple, spread: float = 1.0, at: dict | None = None) -> Callable[[Generator], np.ndarray]:
    """Standard normal numbers times `spread`, with the values of `at` ({index: number}) written over
    them."""

    def draw(rng: Generator) -> np.ndarray:
        x = _three_digits(rng.standard_normal(shape) * spread)
        for index, number in (at or {}).items():
            x[index] = number
        return x

    return draw


def bool_mask(shape: tuple, allowed: float = 0.7, *, blocked_rows=()) -> Callable[[Generator], np.ndarray]:
    """True (may attend) with probability `allowed`; rows listed in blocked_rows all False."""

    def draw(rng: Generator) -> np.ndarray:
        mask = rng.random(shape) < allowed
        for row in blocked_rows:
            mask[..., row, :] = False
        return mask

    return draw


def float_mask(
    shape: tuple, neg_inf: float = 0.2, spread: float = 1.0, *, blocked_rows=()
) -> Callable[[Generator], np.ndarray]:
    """Additive biases with -inf at probability `neg_inf`; rows in blocked_rows all -inf."""

    def draw(rng: Generator) -> np.ndarray:
        bias = _three_digits(rng.standard_normal(shape) * spread)
        bias[rng.random(shape) < neg_inf] = -np.inf
        for row in blocked_rows:
            bias[..., row, :] = -np.inf
        return bias

    return draw


def padding_mask(key_lengths: list[int], key_length: int) -> np.ndarray:
    """[B, 1, 1, Lk] boolean mask letting batch b attend to its first key_lengths[b] keys only."""
    mask = np.arange(key_length)[None, :] < np.array(key_lengths)[:, None]  # [B, Lk]
    return mask[:, None, None, :]  # [B, 1, 1, Lk]


def distance_bias(query_length: int, key_length: int, slope: float) -> np.ndarray:
    """ALiBi-style float mask: -slope * |i - j|."""
    i = np.arange(query_length)[:, None]
    j = np.arange(key_length)[None, :]
    return -slope * np.abs(i - j).astype(np.float64)  # [Lq, Lk]


def large_negative_bias(rng: Generator) -> np.ndarray:
    """Large finite biases are numbers, not masks. Row 0: -1e4 on every key, so its weights are
    still softmax(scores); a port that took it for a mask would give a zero row. Row 1: -1e30 on
    every other key (weight 0 there, the rest a distribution). Row 2: one -inf."""
    bias = np.zeros((4, 5))
    bias[0, :] = -1e4
    bias[1, ::2] = -1e30
    bias[2, 1] = -np.inf
    return bias


def large_logit_keys(rng: Generator) -> np.ndarray:
    """Six keys close to one shared direction, so that the scaled scores are all near +-1e3 (exp
    overflows float64 past 709) yet differ by about one: without the max subtraction softmax gives
    NaN, and the weights are not one-hot."""
    shared = _three_digits(rng.standard_normal(16) * 30)  # [E]
    offsets = np.round(rng.standard_normal((6, 16)) * 0.03, 3)  # [Lk, E]
    return np.round(shared + offsets, 3)  # [Lk, E]


def offset_from(center: float, shape: tuple, spread: float) -> Callable[[Generator], np.ndarray]:
    """`center` plus standard normal offsets times `spread`, for inputs whose logits are huge and yet
    differ by about one (offsets keep three significant digits; the sum is rounded to 7 decimals)."""

    def draw(rng: Generator) -> np.ndarray:
        return np.round(center + _three_digits(rng.standard_normal(shape) * spread), 7)

    return draw


@dataclass(frozen=True, kw_only=True)
class Case:
    id: str
    description: str
    tags: tuple[str, ...]
    seed: int
    query: Spec
    key: Spec
    value: Spec
    attn_mask: Spec | None = None
    is_causal: object = False
    scale: object = None
    enable_gqa: object = False
    softcap: object = 0.0
    error: tuple[str, str] | None = None  # (kind, message) for an invalid case

    @property
    def expects_error(self) -> bool:
        return self.error is not None

    def draw_inputs(self) -> dict[str, object]:
        """query, key, value and attn_mask, drawn in that order from this case's generator."""
        rng = np.random.Generator(np.random.PCG64(self.seed))
        drawn = {}
        for name in ("query", "key", "value", "attn_mask"):
            spec = getattr(self, name)
            if isinstance(spec, tuple):
                spec = normal(spec)
            drawn[name] = spec(rng) if callable(spec) else spec
        return drawn

    @property
    def params(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in ("is_causal", "scale", "enable_gqa", "softcap")}


TAGS = {
    # the shape of the problem
    "tutorial": "the tutorial's own examples, and its four steps on a square key",
    "rank2": "[L, E] inputs: no batch, no heads",
    "rank3": "[H, L, E] inputs",
    "rank4": "[B, H, L, E] inputs",
    "rank5": "two batch dims",
    "batch": "leading batch dims that matter to the case",
    "heads": "several heads; on an invalid case, the error kind `heads`",
    "cross": "Lq != Lk (cross-attention)",
    "ev": "a value feature size Ev != E",
    "gqa": "enable_gqa: query heads share key/value heads",
    "mqa": "one key/value head for every query head",
    "long": "lengths past flash.ts's tiles",
    "empty": "a zero-size dim (no batch, head, query or key)",
    "edge": "lengths of one",
    # options and masks
    "scale": "a scale other than 1/sqrt(E)",
    "softcap": "softcap > 0",
    "causal": "is_causal",
    "mask": "an attn_mask; on an invalid case, the error kind `mask`",
    "bool_mask": "a boolean mask (true = may attend)",
    "float_mask": "a float mask added to the logits",
    "broadcast": "a mask of fewer dims or size-1 dims, broadcast to the scores",
    "fully_masked": "a row with every key masked: weights and output +0.0",
    # numbers
    "stability": "logits whose exp() overflows or that are tiny: softmax must subtract the max",
    "nan": "NaN in an input, and where it must reach",
    "inf": "+inf or -inf in an input, and where it must reach",
    "subnormal": "numbers below float64's normal range, in the inputs, the weights or the output",
    "extreme": "sizes at float64's edges (softcap ratios, values near 1.8e308, overflowing scores)",
    "outside_contract": "inputs the contract leaves undefined: verify reports the case as such",
    # invalid inputs: `error` and the error kind
    "error": "an invalid case: every port must raise this kind and message",
    "ragged": "the error kind `ragged`",
    "type": "the error kind `type`",
    "rank": "the error kind `rank`",
    "shape": "the error kind `shape`",
    "value": "the error kind `value`",
    "order": "two faults at once: which one is reported first",
    "arrays": "inputs only numpy can hold (ARRAY_CASES, never a fixture)",
}

TUTORIAL_QUERY = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
TUTORIAL_VALUE = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]

# fmt: off
VALID_CASES = [
    Case(id="tutorial_seq3_dk4", seed=1, tags=("tutorial", "rank2"),
         description="The tutorial's first example: 3 tokens, d_k = 4, V = [[1,2],[3,4],[5,6]]",
         query=TUTORIAL_QUERY, key=TUTORIAL_QUERY, value=TUTORIAL_VALUE),
    Case(id="tutorial_seq4_dk8", seed=2, tags=("tutorial", "rank2"),
         description="The tutorial's second example: 4 tokens, d_k = 8, random Q, K, V",
         query=(4, 8), key=(4, 8), value=(4, 8)),
    Case(id="tutorial_square_key", seed=59, tags=("tutorial", "rank2"),
         description="The four steps with a square key (4 tokens, d_k = 4): Q·K has the shape of Q·Kᵀ here,"
                     " so a missing transpose shows only in the numbers",
         query=(4, 4), key=(4, 4), value=(4, 2)),
    Case(id="rank2_square", seed=3, tags=("rank2",),
         description="Rank 2 self-attention shape, 6 tokens, E = 8",
         query=(6, 8), key=(6, 8), value=(6, 8)),
    Case(id="rank3_heads", seed=4, tags=("rank3", "heads"),
         description="Rank 3 [H, L, E]: three heads, no batch",
         query=(3, 5, 8), key=(3, 5, 8), value=(3, 5, 8)),
    Case(id="rank4_batch_heads", seed=5, tags=("rank4", "cross"),
         description="Rank 4 [B, H, L, E] with Lq != Lk",
         query=(2, 3, 5, 8), key=(2, 3, 7, 8), value=(2, 3, 7, 8)),
    Case(id="rank5_two_batch_dims", seed=6, tags=("rank5", "batch"),
         description="Two leading batch dims [B1, B2, H, L, E]",
         query=(2, 2, 2, 3, 4), key=(2, 2, 2, 4, 4), value=(2, 2, 2, 4, 4)),
    Case(id="cross_attention", seed=7, tags=("rank2", "cross"),
         description="Cross-attention, 3 queries over 7 keys",
         query=(3, 8), key=(7, 8), value=(7, 8)),
    Case(id="cross_attention_more_queries", seed=8, tags=("rank2", "cross"),
         description="Cross-attention, 9 queries over 4 keys",
         query=(9, 8), key=(4, 8), value=(4, 8)),
    Case(id="value_features_smaller", seed=9, tags=("rank4", "ev"),
         description="Ev = 3 < E = 8",
         query=(2, 2, 4, 8), key=(2, 2, 6, 8), value=(2, 2, 6, 3)),
    Case(id="value_features_larger", seed=10, tags=("rank2", "ev"),
         description="Ev = 16 > E = 4",
         query=(4, 4), key=(5, 4), value=(5, 16)),
    Case(id="scale_custom", seed=11, tags=("rank3", "scale"),
         description="Custom scale 0.3 instead of 1/sqrt(E)",
         query=(2, 4, 8), key=(2, 4, 8), value=(2, 4, 8),
         scale=0.3),
    Case(id="scale_zero", seed=12, tags=("rank2", "scale"),
         description="scale = 0: every weight equal, output = mean of the value rows",
         query=(3, 8), key=(5, 8), value=(5, 4),
         scale=0.0),
    Case(id="scale_negative", seed=13, tags=("rank2", "scale"),
         description="Negative scale -0.5 (allowed, as in torch)",
         query=(4, 8), key=(4, 8), value=(4, 8),
         scale=-0.5),
    Case(id="bool_padding_mask", seed=14, tags=("rank4", "mask", "bool_mask", "broadcast"),
         description="Boolean padding mask [B, 1, 1, Lk]: batch 0 sees 4 keys, batch 1 sees 5",
         query=(2, 2, 4, 8), key=(2, 2, 6, 8), value=(2, 2, 6, 8),
         attn_mask=padding_mask([4, 5], 6)),
    Case(id="float_mask_with_neg_inf", seed=15, tags=("rank2", "mask", "float_mask"),
         description="Float mask of biases with -inf cells",
         query=(4, 8), key=(6, 8), value=(6, 8),
         attn_mask=float_mask((4, 6), neg_inf=0.3)),
    Case(id="float_mask_large_finite", seed=16, tags=("rank2", "mask", "float_mask"),
         description="Large finite biases (-1e4 on a whole row, -1e30) are numbers, not masks",
         query=(4, 8), key=(5, 8), value=(5, 8),
         attn_mask=large_negative_bias),
    Case(id="causal_square", seed=17, tags=("rank4", "causal"),
         description="Causal, Lq = Lk = 5",
         query=(2, 2, 5, 8), key=(2, 2, 5, 8), value=(2, 2, 5, 8),
         is_causal=True),
    Case(id="causal_wide", seed=18, tags=("rank2", "causal", "cross"),
         description="Causal with Lq = 3 < Lk = 6 (top-left: query i sees keys 0..i)",
         query=(3, 8), key=(6, 8), value=(6, 8),
         is_causal=True),
    Case(id="causal_tall", seed=19, tags=("rank2", "causal", "cross"),
         description="Causal with Lq = 6 > Lk = 3 (top-left: rows 2.. see every key)",
         query=(6, 8), key=(3, 8), value=(3, 8),
         is_causal=True),
    Case(id="causal_with_bool_mask", seed=20, tags=("rank3", "causal", "mask", "bool_mask", "fully_masked"),
         description="Causal combined with a boolean mask; row 0 ends fully masked",
         query=(2, 5, 8), key=(2, 5, 8), value=(2, 5, 8),
         attn_mask=np.array([[False, True, True, True, True]] + [[True] * 5] * 4), is_causal=True),
    Case(id="causal_with_float_mask", seed=21, tags=("rank2", "causal", "mask", "float_mask"),
         description="Causal combined with an ALiBi-style float mask",
         query=(5, 8), key=(5, 8), value=(5, 8),
         attn_mask=distance_bias(5, 5, 0.5), is_causal=True),
    Case(id="gqa_4q_2kv", seed=22, tags=("rank4", "gqa"),
         description="Grouped-query attention: 4 query heads share 2 key/value heads",
         query=(2, 4, 3, 8), key=(2, 2, 5, 8), value=(2, 2, 5, 8),
         enable_gqa=True),
    Case(id="mqa_4q_1kv", seed=23, tags=("rank3", "gqa", "mqa"),
         description="Multi-query attention: 4 query heads share 1 key/value head",
         query=(4, 3, 8), key=(1, 5, 8), value=(1, 5, 8),
         enable_gqa=True),
    Case(id="gqa_causal_masked", seed=24, tags=("rank4", "gqa", "causal", "mask", "bool_mask"),
         description="GQA (6 query heads, 2 kv heads) with causal and a padding mask",
         query=(1, 6, 4, 8), key=(1, 2, 4, 8), value=(1, 2, 4, 8),
         attn_mask=np.array([True, True, True, False]), is_causal=True, enable_gqa=True),
    Case(id="gqa_equal_heads", seed=25, tags=("rank3", "gqa"),
         description="enable_gqa with Hq == Hkv changes nothing",
         query=(2, 3, 8), key=(2, 4, 8), value=(2, 4, 8),
         enable_gqa=True),
    Case(id="softcap", seed=26, tags=("rank2", "softcap"),
         description="Softcap 5 on logits of spread about 10",
         query=normal((5, 8), 3.0), key=normal((5, 8), 3.0), value=(5, 8),
         softcap=5.0),
    Case(id="softcap_with_mask", seed=27, tags=("rank3", "softcap", "mask", "float_mask"),
         description="Softcap 2 with a float mask added after it",
         query=(2, 4, 8), key=(2, 4, 8), value=(2, 4, 8),
         attn_mask=float_mask((4, 4), neg_inf=0.2), softcap=2.0),
    Case(id="fully_masked_row_bool", seed=28, tags=("rank2", "mask", "bool_mask", "fully_masked"),
         description="A boolean mask row that is all False gives output +0.0",
         query=(4, 8), key=(5, 8), value=(5, 8),
         attn_mask=bool_mask((4, 5), 0.7, blocked_rows=(2,))),
    Case(id="fully_masked_row_float", seed=29, tags=("rank4", "mask", "float_mask", "fully_masked"),
         description="A float mask row that is all -inf gives output +0.0",
         query=(1, 2, 3, 4), key=(1, 2, 5, 4), value=(1, 2, 5, 4),
         attn_mask=float_mask((3, 5), 0.1, blocked_rows=(0,))),
    Case(id="empty_queries", seed=30, tags=("rank3", "empty"),
         description="Lq = 0: an empty output [B, 0, Ev]",
         query=(2, 0, 8), key=(2, 5, 8), value=(2, 5, 4)),
    Case(id="empty_keys", seed=31, tags=("rank3", "empty", "fully_masked"),
         description="Lk = 0: no key to attend to, so every row is fully masked and zero",
         query=(2, 3, 8), key=(2, 0, 8), value=(2, 0, 4)),
    Case(id="large_logits", seed=32, tags=("rank2", "stability"),
         description="Scaled scores near 1e3: exp() without the max subtraction overflows",
         query=normal((4, 16), 30.0), key=large_logit_keys, value=(6, 8)),
    Case(id="tiny_logits", seed=33, tags=("rank2", "stability"),
         description="Scores around 1e-6: weights almost uniform",
         query=normal((4, 8), 1e-3), key=normal((6, 8), 1e-3), value=(6, 8)),
    Case(id="nan_in_query", seed=34, tags=("rank2", "nan"),
         description="NaN in query row 1 makes output row 1 NaN and no other",
         query=normal((4, 8), at={(1, 2): np.nan}), key=(5, 8), value=(5, 8)),
    Case(id="nan_in_value", seed=35, tags=("rank2", "nan"),
         description="NaN in value row 2, column 1: output column 1 is NaN in every row",
         query=(3, 8), key=(4, 8), value=normal((4, 3), at={(2, 1): np.nan})),
    Case(id="single_key", seed=36, tags=("rank3", "edge"),
         description="Lk = 1: every weight is 1 and the output copies the value row",
         query=(2, 4, 8), key=(2, 1, 8), value=(2, 1, 8)),
    Case(id="single_query", seed=37, tags=("rank2", "edge"),
         description="Lq = 1: one query row",
         query=(1, 8), key=(6, 8), value=(6, 8)),
    Case(id="mask_broadcast_rank1", seed=38, tags=("rank4", "mask", "bool_mask", "broadcast"),
         description="Boolean mask [Lk] broadcast to [B, H, Lq, Lk]",
         query=(2, 3, 4, 8), key=(2, 3, 5, 8), value=(2, 3, 5, 8),
         attn_mask=np.array([True, False, True, True, False])),
    Case(id="mask_broadcast_rank2", seed=39, tags=("rank4", "mask", "float_mask", "broadcast"),
         description="Float mask [Lq, Lk] broadcast to [B, H, Lq, Lk]",
         query=(2, 3, 4, 8), key=(2, 3, 5, 8), value=(2, 3, 5, 8),
         attn_mask=float_mask((4, 5), 0.2)),
    Case(id="mask_broadcast_rank3", seed=40, tags=("rank4", "mask", "bool_mask", "broadcast"),
         description="Boolean mask [H, Lq, Lk] broadcast over the batch",
         query=(2, 3, 4, 8), key=(2, 3, 5, 8), value=(2, 3, 5, 8),
         attn_mask=bool_mask((3, 4, 5), 0.6)),
    Case(id="mask_broadcast_rank4", seed=41, tags=("rank4", "mask", "float_mask", "broadcast", "fully_masked"),
         description="Float mask [B, 1, Lq, 1]: per-row biases, -inf rows fully masked",
         query=(2, 3, 4, 8), key=(2, 3, 5, 8), value=(2, 3, 5, 8),
         attn_mask=float_mask((2, 1, 4, 1), 0.25)),
    Case(id="everything_at_once", seed=42, tags=("rank4", "gqa", "causal", "mask", "float_mask", "softcap", "scale", "cross"),
         description="Rank 4, GQA, causal, float mask, softcap and a custom scale together",
         query=(2, 4, 6, 8), key=(2, 2, 7, 8), value=(2, 2, 7, 5),
         attn_mask=float_mask((6, 7), 0.15), is_causal=True, scale=0.4, enable_gqa=True, softcap=3.0),
    Case(id="long_sequence", seed=43, tags=("rank2", "long"),
         description="67 tokens, E = 24, Ev = 16: long enough to cross tile boundaries",
         query=(67, 24), key=(67, 24), value=(67, 16)),
    Case(id="long_sequence_causal_masked", seed=44, tags=("rank3", "long", "causal", "mask", "bool_mask", "cross"),
         description="70 queries over 75 keys, causal with a padding mask",
         query=(1, 70, 16), key=(1, 75, 16), value=(1, 75, 8),
         attn_mask=np.arange(75) < 71, is_causal=True),
    Case(id="rank2_wide_features", seed=45, tags=("rank2",),
         description="Rank 2, 5 tokens, E = 32: the scale 1/sqrt(32) shrinks scores of spread about 6",
         query=(5, 32), key=(5, 32), value=(5, 32)),
    Case(id="large_logits_both_signs", seed=46, tags=("rank2", "stability"),
         description="Scaled scores near -1e3 (exp underflows to 0, and 0 / 0 is NaN) and near +1e3 (exp overflows)",
         query=[[20.0, 0.0, 0.0, 0.0], [-20.0, 0.0, 0.0, 0.0], [20.0, 3.0, 0.0, 0.0]],
         key=[[-100.0, 1.0, 0.0, 0.0], [-100.2, 0.0, 1.0, 0.0], [-99.9, 0.0, 0.0, 1.0], [-100.5, 0.0, 0.0, 0.0]],
         value=(4, 3)),
    Case(id="large_logits_far_apart", seed=47, tags=("rank2", "stability"),
         description="d_k = 1 and scores 1000, 500, 0, -40 apart: almost all weight on one key, no NaN",
         query=[[40.0], [30.0], [-35.0]], key=[[25.0], [12.5], [0.0], [-1.0]], value=(4, 3)),
    Case(id="bool_mask_rank2", seed=48, tags=("rank2", "mask", "bool_mask"),
         description="Boolean mask [Lq, Lk] on rank-2 inputs: true = may attend",
         query=(5, 8), key=(5, 8), value=(5, 4),
         attn_mask=np.array([[True, False, True, True, False], [False, True, True, False, True],
                             [True, True, False, False, False], [False, False, True, True, True],
                             [True, False, False, True, True]])),
    Case(id="bool_mask_one_key_each", seed=49, tags=("rank2", "mask", "bool_mask"),
         description="Each query may attend to exactly one key, so its output is that key's value row",
         query=(4, 8), key=(4, 8), value=(4, 3),
         attn_mask=np.array([[False, False, True, False], [True, False, False, False],
                             [False, False, False, True], [False, True, False, False]])),
    Case(id="bool_mask_logits_below_sentinel", seed=60, tags=("rank2", "mask", "bool_mask", "stability"),
         description="Logits near -1.8e9, below -1e9: a masked cell set to -1e9 instead of -inf would take"
                     " all the weight",
         query=offset_from(3e4, (3, 4), 1e-4), key=offset_from(-3e4, (5, 4), 1e-4), value=(5, 3),
         attn_mask=np.array([[True, False, True, False, True],
                             [False, True, False, True, True],
                             [True, True, False, False, True]])),
    Case(id="bool_mask_mostly_open", seed=50, tags=("rank2", "mask", "bool_mask"),
         description="Boolean mask blocking one key per query",
         query=(4, 8), key=(4, 8), value=(4, 8),
         attn_mask=~np.eye(4, dtype=bool)),
    Case(id="float_mask_biases", seed=51, tags=("rank2", "mask", "float_mask"),
         description="Float mask of finite biases (no -inf): added to the logits, not a yes/no",
         query=(5, 8), key=(5, 8), value=(5, 8),
         attn_mask=float_mask((5, 5), neg_inf=0.0, spread=2.0)),
    Case(id="fully_masked_rows_float", seed=52, tags=("rank2", "mask", "float_mask", "fully_masked"),
         description="Rows 1 and 3 of a float mask are all -inf: those output rows are +0.0",
         query=(4, 8), key=(5, 8), value=(5, 8),
         attn_mask=float_mask((4, 5), 0.0, blocked_rows=(1, 3))),
    Case(id="fully_masked_first_row_bool", seed=53, tags=("rank2", "mask", "bool_mask", "fully_masked"),
         description="Row 0 of a boolean mask is all false: output row 0 is +0.0",
         query=(3, 8), key=(4, 8), value=(4, 8),
         attn_mask=np.array([[False, False, False, False], [True, False, True, True], [True, True, False, True]])),
    Case(id="causal_rank2", seed=54, tags=("rank2", "causal"),
         description="Causal self-attention on rank-2 inputs: query i sees keys 0..i",
         query=(6, 8), key=(6, 8), value=(6, 8),
         is_causal=True),
    Case(id="causal_rank2_with_bool_mask", seed=55, tags=("rank2", "causal", "mask", "bool_mask"),
         description="Causal and a boolean mask together: a key must be allowed by both",
         query=(5, 8), key=(5, 8), value=(5, 8),
         attn_mask=np.array([[True, True, False, True, True], [True, False, True, True, False],
                             [True, True, True, False, True], [True, True, False, True, True],
                             [True, False, True, True, True]]), is_causal=True),
    Case(id="gqa_6q_3kv", seed=56, tags=("rank3", "gqa"),
         description="Grouped-query attention: 6 query heads share 3 key/value heads, two each",
         query=(6, 3, 8), key=(3, 4, 8), value=(3, 4, 8),
         enable_gqa=True),
    Case(id="empty_queries_rank2", seed=57, tags=("rank2", "empty"),
         description="Lq = 0 on rank-2 inputs: the output is empty, [0, Ev]",
         query=(0, 4), key=(3, 4), value=(3, 2)),
    Case(id="inf_in_value", seed=58, tags=("rank2", "inf"),
         description="+inf in value column 2 and -inf in column 0: those output columns are +inf and -inf",
         query=(3, 4), key=(4, 4), value=normal((4, 3), at={(1, 2): np.inf, (3, 0): -np.inf})),
    Case(id="softcap_tiny_ratio", seed=501, tags=("rank2", "softcap", "extreme"),
         description="Softcap 1e60: logit / softcap near 1e-60, where tanh(x) = x must keep every digit",
         query=(3, 4), key=(4, 4), value=(4, 2),
         softcap=1e60),
    Case(id="softcap_huge_ratio", seed=502, tags=("rank2", "softcap", "extreme"),
         description="Scaled scores near 1e300 under softcap 2: tanh is exactly ±1 and the logits ±2",
         query=normal((3, 4), 1e150), key=normal((4, 4), 1e150), value=(4, 2),
         softcap=2.0),
    Case(id="inf_in_value_masked", seed=503, tags=("rank2", "inf", "mask", "bool_mask", "extreme"),
         description="+inf and -inf in value: ±inf where the row weighs the key, NaN where its weight is 0",
         query=(3, 4), key=(4, 4), value=normal((4, 3), at={(2, 1): np.inf, (3, 2): -np.inf, (0, 2): np.inf}),
         attn_mask=np.array([[True, True, False, True], [True] * 4, [True, True, True, False]])),
    Case(id="infinite_logits", seed=504, tags=("rank2", "inf", "mask", "float_mask", "fully_masked", "extreme"),
         description="±inf logits: +inf makes its row NaN (inf - inf), all -inf makes a fully-masked +0.0 row",
         query=[[np.inf, 0.5], [-np.inf, 0.25], [0.5, -1.0], [1.0, 2.0]],
         key=[[1.0, 0.5], [2.0, -1.0], [0.5, 0.25]], value=(3, 2),
         attn_mask=[[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, np.inf, 0.0], [0.0, -np.inf, 0.5]]),
    Case(id="infinite_scores_softcap", seed=505, tags=("rank2", "inf", "softcap", "extreme"),
         description="Infinite scores under softcap 3: their logits are exactly ±3, the row stays finite",
         query=[[np.inf, 0.5], [0.75, -0.5]], key=[[1.0, 0.5], [-2.0, 1.0], [0.5, 0.25]], value=(3, 2),
         softcap=3.0),
    Case(id="subnormal_outputs", seed=506, tags=("rank2", "subnormal", "extreme"),
         description="Values near 1e-310 (subnormal): the outputs are subnormal too",
         query=(3, 4), key=(5, 4), value=normal((5, 3), 1e-310)),
    Case(id="subnormal_weights", seed=507, tags=("rank2", "subnormal", "extreme"),
         description="Logit gaps of 720 and 745: subnormal weights times values of 1e10 and 1e20",
         query=[[1.0], [2.0]], key=[[0.0], [-1440.0], [-1490.0]], value=[[0.0, 1.0], [1e10, 2.0], [1e20, 3.0]],
         scale=0.5),
    Case(id="value_near_largest", seed=508, tags=("rank3", "extreme"),
         description="|value| up to 1.79e308: the exact outputs are representable, sums of p * v are not",
         query=(2, 3, 4), key=(2, 5, 4),
         value=normal((2, 5, 3), 3e307, {(0, 0, 0): 1.79e308, (0, 1, 0): 1.5e308, (0, 2, 0): 1.5e308,
                                          (0, 3, 0): 1.5e308, (0, 4, 0): 1.5e308, (1, 2, 1): -1.79e308})),
    Case(id="score_overflow", seed=509, tags=("rank2", "extreme", "outside_contract"),
         description="Dot products beyond the largest double: outside the contract (score overflow)",
         query=[[1e300, 1e300]], key=[[-1e300, 1e300], [0.0, 0.0]], value=[[1.0], [2.0]]),
    Case(id="logits_tie_in_float64", seed=510, tags=("rank2", "softcap", "scale", "extreme"),
         description="Logits 1e300·tanh(40) and 1e300·tanh(41) round alike in float64, split the weight"
                     " the exact ones give to key 1, and reach -1.7e308 in value: undetermined weights",
         query=[[1.0]], key=[[40.0], [41.0]], value=[[-1.7e308], [1.0]],
         scale=1e300, softcap=1e300),
    Case(id="fully_masked_bool_nan_inf_value", seed=511,
         tags=("rank2", "mask", "bool_mask", "fully_masked", "nan", "inf"),
         description="Row 1 of a boolean mask is all false while value holds NaN, +inf and -inf:"
                     " that row is +0.0 (no 0 · NaN), the others are NaN or ±inf where they weigh them",
         query=(3, 4), key=(4, 4), value=normal((4, 3), at={(0, 1): np.nan, (2, 0): np.inf, (3, 2): -np.inf}),
         attn_mask=np.array([[True, True, False, False], [False] * 4, [False, False, True, True]])),
    Case(id="fully_masked_float_nan_inf_value", seed=512,
         tags=("rank3", "mask", "float_mask", "fully_masked", "nan", "inf"),
         description="Float mask rows of -inf while every value row holds NaN or ±inf: those rows are +0.0",
         query=(2, 3, 4), key=(2, 4, 4), value=normal((2, 4, 2), at={(0, 0, 0): np.nan, (0, 1, 1): np.inf,
                                                                      (0, 2, 0): -np.inf, (0, 3, 1): np.nan,
                                                                      (1, 0, 1): -np.inf, (1, 1, 0): np.nan,
                                                                      (1, 2, 1): np.inf, (1, 3, 0): np.inf}),
         attn_mask=float_mask((3, 4), neg_inf=0.0, blocked_rows=(0, 2))),
    Case(id="fully_masked_causal_nan_inf_value", seed=513,
         tags=("rank2", "causal", "mask", "bool_mask", "fully_masked", "nan", "inf"),
         description="Causal and a mask blocking key 0 leave row 0 nothing: +0.0, though key 0's value"
                     " is NaN and +inf, which every later row averages",
         query=(4, 4), key=(4, 4), value=normal((4, 2), at={(0, 0): np.nan, (0, 1): np.inf}),
         attn_mask=np.array([False, True, True, True]), is_causal=True),
    Case(id="inf_times_zero_in_scores", seed=514, tags=("rank2", "inf", "nan"),
         description="inf · 0 in a dot product is NaN: query row 0 holds +inf where key 1 holds 0, so"
                     " that score and its whole row are NaN; row 1 is finite",
         query=[[np.inf, 0.5], [0.25, -1.0]], key=[[1.0, 0.5], [0.0, 2.0], [-0.5, 1.0]], value=(3, 2)),
    Case(id="inf_times_zero_scale", seed=515, tags=("rank2", "inf", "nan", "scale"),
         description="scale = 0 times an infinite score is NaN: row 0 (scores ±inf) is NaN, row 1 the"
                     " mean of the value rows",
         query=[[np.inf, 0.5], [0.25, -1.0]], key=[[1.0, 0.5], [-2.0, 1.0], [0.5, 0.25]], value=(3, 2),
         scale=0.0),
    Case(id="nan_score_bool_masked", seed=516, tags=("rank2", "nan", "mask", "bool_mask"),
         description="NaN in key row 1 makes score column 1 NaN; a boolean mask excluding key 1 makes"
                     " that cell -inf, so rows 0 and 2 stay finite and row 1, which keeps it, is NaN",
         query=(3, 4), key=normal((3, 4), at={(1, 2): np.nan}), value=(3, 2),
         attn_mask=np.array([[True, False, True], [True, True, True], [False, False, True]])),
    Case(id="nan_score_causal", seed=517, tags=("rank2", "nan", "causal"),
         description="NaN in key row 2: causality excludes it from rows 0 and 1 (finite), rows 2 and 3"
                     " see it (NaN)",
         query=(4, 4), key=normal((4, 4), at={(2, 0): np.nan}), value=(4, 3),
         is_causal=True),
    Case(id="nan_score_float_neg_inf", seed=518, tags=("rank2", "nan", "mask", "float_mask"),
         description="NaN in key row 1 under a float mask of -inf there: NaN + -inf is NaN, so every"
                     " row is NaN (a float mask adds, it does not exclude)",
         query=(2, 4), key=normal((3, 4), at={(1, 0): np.nan}), value=(3, 2),
         attn_mask=np.array([[0.0, -np.inf, 0.5], [-np.inf, -np.inf, 0.0]])),
    Case(id="empty_heads", seed=201, tags=("rank4", "heads", "empty"),
         description="H = 0: no head at all, an empty output [B, 0, Lq, Ev]",
         query=(1, 0, 3, 4), key=(1, 0, 5, 4), value=(1, 0, 5, 3)),
    Case(id="empty_batch_causal", seed=202, tags=("rank4", "batch", "causal", "empty"),
         description="B = 0 with causal: an empty output [0, H, Lq, Ev]",
         query=(0, 2, 3, 4), key=(0, 2, 5, 4), value=(0, 2, 5, 3),
         is_causal=True),
    Case(id="gqa_empty_query_heads", seed=203, tags=("rank3", "gqa", "empty"),
         description="enable_gqa with 0 query heads over 2 key/value heads (0 is a multiple of 2)",
         query=(0, 3, 4), key=(2, 5, 4), value=(2, 5, 3),
         enable_gqa=True),
    Case(id="length_one", seed=204, tags=("rank2", "edge"),
         description="Lq = Lk = E = Ev = 1: the output copies the single value",
         query=(1, 1), key=(1, 1), value=(1, 1)),
    Case(id="bool_mask_full_shape", seed=205, tags=("rank4", "mask", "bool_mask"),
         description="Boolean mask with the scores' full shape [B, H, Lq, Lk]",
         query=(2, 2, 4, 4), key=(2, 2, 5, 4), value=(2, 2, 5, 3),
         attn_mask=bool_mask((2, 2, 4, 5))),
    Case(id="bool_mask_rows", seed=206, tags=("rank4", "mask", "bool_mask", "broadcast", "fully_masked"),
         description="Boolean mask [Lq, 1] broadcast over the keys: row 2 blocked, the others open",
         query=(2, 2, 4, 4), key=(2, 2, 5, 4), value=(2, 2, 5, 3),
         attn_mask=bool_mask((4, 1), 1.0, blocked_rows=(2,))),
    Case(id="bool_mask_per_batch", seed=207, tags=("rank4", "mask", "bool_mask", "broadcast"),
         description="Boolean mask [B, 1, Lq, Lk]: one mask per batch, shared by the heads",
         query=(3, 2, 4, 4), key=(3, 2, 5, 4), value=(3, 2, 5, 3),
         attn_mask=bool_mask((3, 1, 4, 5))),
    Case(id="float_mask_per_head", seed=208, tags=("rank4", "mask", "float_mask", "broadcast"),
         description="Float mask [H, 1, Lk]: key biases per head, shared by the batch and the queries",
         query=(2, 3, 4, 4), key=(2, 3, 5, 4), value=(2, 3, 5, 3),
         attn_mask=float_mask((3, 1, 5), neg_inf=0.0)),
    Case(id="causal_float_mask_rows", seed=209, tags=("rank2", "causal", "mask", "float_mask", "broadcast", "cross"),
         description="Causal with a float mask [Lq, 1], one bias per query row, over more keys than queries",
         query=(5, 4), key=(7, 4), value=(7, 3),
         attn_mask=float_mask((5, 1), neg_inf=0.0), is_causal=True),
    Case(id="softcap_scale", seed=210, tags=("rank3", "softcap", "scale"),
         description="Softcap 1.5 after a scale of 2",
         query=(2, 4, 8), key=(2, 5, 8), value=(2, 5, 3),
         scale=2.0, softcap=1.5),
    Case(id="large_scale", seed=211, tags=("rank2", "scale", "stability"),
         description="scale = 300: logits in the hundreds, weights nearly one-hot",
         query=(3, 4), key=(5, 4), value=(5, 2),
         scale=300.0),
]

INVALID_CASES = [
    Case(id="error_query_rank1", seed=101, tags=("error", "rank"),
         description="A rank-1 query",
         query=[1.0, 2.0, 3.0], key=(4, 3), value=(4, 3),
         error=("rank", "query must have at least 2 dimensions ([L, E]), got shape [3]")),
    Case(id="error_rank_mismatch", seed=102, tags=("error", "rank"),
         description="query rank 3, key and value rank 2",
         query=(2, 3, 4), key=(3, 4), value=(3, 4),
         error=("rank", "query, key and value must have the same rank, got query [2, 3, 4], key [3, 4], value [3, 4]")),
    Case(id="error_feature_mismatch", seed=103, tags=("error", "shape"),
         description="key feature size 6, query 8",
         query=(2, 4, 8), key=(2, 5, 6), value=(2, 5, 6),
         error=("shape", "key has feature size 6 but query has 8 (query [2, 4, 8], key [2, 5, 6])")),
    Case(id="error_key_value_length_mismatch", seed=104, tags=("error", "shape"),
         description="5 keys but 4 values",
         query=(3, 4), key=(5, 4), value=(4, 4),
         error=("shape", "value has length 4 but key has 5 (key [5, 4], value [4, 4])")),
    Case(id="error_key_batch_mismatch", seed=105, tags=("error", "shape"),
         description="key batch 3, query batch 2",
         query=(2, 2, 3, 4), key=(3, 2, 5, 4), value=(3, 2, 5, 4),
         error=("shape", "key has batch dims [3] but query has [2] (query [2, 2, 3, 4], key [3, 2, 5, 4])")),
    Case(id="error_value_batch_mismatch", seed=106, tags=("error", "shape"),
         description="value batch 1, query batch 2 (no batch broadcasting)",
         query=(2, 2, 3, 4), key=(2, 2, 5, 4), value=(1, 2, 5, 4),
         error=("shape", "value has batch dims [1] but query has [2] (query [2, 2, 3, 4], value [1, 2, 5, 4])")),
    Case(id="error_heads_without_gqa", seed=107, tags=("error", "heads"),
         description="4 query heads, 2 key/value heads, enable_gqa off",
         query=(4, 3, 8), key=(2, 5, 8), value=(2, 5, 8),
         error=("heads", "query has head count 4 but key and value have 2; set enable_gqa to share key/value"
                         " heads across query heads (query [4, 3, 8], key [2, 5, 8])")),
    Case(id="error_gqa_not_multiple", seed=108, tags=("error", "heads"),
         description="enable_gqa with 3 query heads over 2 key/value heads",
         query=(3, 2, 4), key=(2, 5, 4), value=(2, 5, 4),
         enable_gqa=True,
         error=("heads", "with enable_gqa, query heads (3) must be a multiple of key/value heads (2)"
                         " (query [3, 2, 4], key [2, 5, 4])")),
    Case(id="error_key_value_heads_differ", seed=109, tags=("error", "heads"),
         description="key has 2 heads, value 1",
         query=(2, 3, 4), key=(2, 5, 4), value=(1, 5, 4),
         error=("heads", "value has head count 1 but key has 2 (key [2, 5, 4], value [1, 5, 4])")),
    Case(id="error_zero_features", seed=110, tags=("error", "shape"),
         description="E = 0: nothing to compare queries and keys with",
         query=[[], [], []], key=[[], [], []], value=[[1.0], [2.0], [3.0]],
         error=("shape", "query has feature size 0; attention needs at least one feature (query [3, 0])")),
    Case(id="error_mask_not_broadcastable", seed=111, tags=("error", "mask"),
         description="Mask [3, 4] against scores [2, 3, 5]",
         query=(2, 3, 4), key=(2, 5, 4), value=(2, 5, 4),
         attn_mask=bool_mask((3, 4)),
         error=("mask", "attn_mask [3, 4] does not broadcast to the scores [2, 3, 5]: mask dimension 1 is 4,"
                        " expected 1 or 5")),
    Case(id="error_mask_rank_too_high", seed=112, tags=("error", "mask"),
         description="Mask of rank 4 for rank-2 scores",
         query=(3, 4), key=(5, 4), value=(5, 4),
         attn_mask=bool_mask((1, 1, 3, 5)),
         error=("mask", "attn_mask has rank 4 but the scores [3, 5] have rank 2 (attn_mask [1, 1, 3, 5])")),
    Case(id="error_mask_scalar", seed=113, tags=("error", "mask"),
         description="A mask that is a single boolean",
         query=(3, 4), key=(5, 4), value=(5, 4),
         attn_mask=True,
         error=("mask", "attn_mask must have at least 1 dimension, got shape []")),
    Case(id="error_ragged_query", seed=114, tags=("error", "ragged"),
         description="query rows of lengths 3 and 2",
         query=[[1.0, 2.0, 3.0], [4.0, 5.0]], key=(4, 3), value=(4, 3),
         error=("ragged", "query is ragged: query[1] has length 2, expected 3 (shape from the first elements: [2, 3])")),
    Case(id="error_ragged_key_depth", seed=115, tags=("error", "ragged"),
         description="key with an array where a number belongs",
         query=(2, 2), key=[[1.0, 2.0], [3.0, [4.0]]], value=(2, 2),
         error=("ragged", "key is ragged: key[1][1] is an array, expected a scalar (shape from the first elements: [2, 2])")),
    Case(id="error_ragged_mask", seed=116, tags=("error", "ragged"),
         description="Mask rows of lengths 3 and 2",
         query=(2, 4), key=(3, 4), value=(3, 4),
         attn_mask=[[True, False, True], [True, True]],
         error=("ragged", "attn_mask is ragged: attn_mask[1] has length 2, expected 3"
                          " (shape from the first elements: [2, 3])")),
    Case(id="error_ragged_value_scalar_row", seed=117, tags=("error", "ragged"),
         description="value with a number where a row belongs",
         query=(2, 2), key=(3, 2), value=[[1.0, 2.0], 3.0, [4.0, 5.0]],
         error=("ragged", "value is ragged: value[1] is not an array, expected length 2"
                          " (shape from the first elements: [3, 2])")),
    Case(id="error_query_string", seed=118, tags=("error", "type"),
         description="A string inside query",
         query=[[1.0, "two"], [3.0, 4.0]], key=(3, 2), value=(3, 2),
         error=("type", "query[0][1] is a string, expected a number")),
    Case(id="error_value_null", seed=119, tags=("error", "type"),
         description="null inside value",
         query=(2, 2), key=(2, 2), value=[[1.0, 2.0], [None, 4.0]],
         error=("type", "value[1][0] is null, expected a number")),
    Case(id="error_key_boolean", seed=120, tags=("error", "type"),
         description="A boolean inside key",
         query=(2, 2), key=[[True, 1.0], [0.0, 1.0]], value=(2, 2),
         error=("type", "key[0][0] is a boolean, expected a number")),
    Case(id="error_mask_mixed", seed=121, tags=("error", "type"),
         description="A mask mixing booleans and numbers",
         query=(2, 4), key=(3, 4), value=(3, 4),
         attn_mask=[[True, 0.0, True], [True, True, False]],
         error=("type", "attn_mask mixes booleans and numbers: attn_mask[0][0] is a boolean but attn_mask[0][1]"
                        " is a number")),
    Case(id="error_mask_string", seed=122, tags=("error", "type"),
         description="A string inside the mask",
         query=(2, 4), key=(3, 4), value=(3, 4),
         attn_mask=[["yes", True, True], [True, True, False]],
         error=("type", "attn_mask[0][0] is a string, expected a boolean or a number")),
    Case(id="error_scale_nan", seed=123, tags=("error", "value"),
         description="scale = NaN",
         query=(2, 4), key=(3, 4), value=(3, 4),
         scale=float("nan"),
         error=("value", "scale must be a finite number, got NaN")),
    Case(id="error_scale_infinite", seed=124, tags=("error", "value"),
         description="scale = Infinity",
         query=(2, 4), key=(3, 4), value=(3, 4),
         scale=float("inf"),
         error=("value", "scale must be a finite number, got Infinity")),
    Case(id="error_softcap_negative", seed=125, tags=("error", "value"),
         description="softcap = -1",
         query=(2, 4), key=(3, 4), value=(3, 4),
         softcap=-1.0,
         error=("value", "softcap must be a finite number >= 0, got -1")),
    Case(id="error_is_causal_string", seed=126, tags=("error", "value"),
         description="is_causal given as a string",
         query=(2, 4), key=(3, 4), value=(3, 4),
         is_causal="yes",
         error=("value", "is_causal must be a boolean, got a string")),
    Case(id="error_enable_gqa_number", seed=127, tags=("error", "value"),
         description="enable_gqa given as the number 1",
         query=(2, 4), key=(3, 4), value=(3, 4),
         enable_gqa=1,
         error=("value", "enable_gqa must be a boolean, got 1")),
    Case(id="error_options_before_shapes", seed=301, tags=("error", "value", "order"),
         description="A bad option and mismatched shapes: the option is reported first",
         query=(2, 4, 8), key=(2, 5, 6), value=(2, 5, 6),
         is_causal=1,
         error=("value", "is_causal must be a boolean, got 1")),
    Case(id="error_enable_gqa_string", seed=302, tags=("error", "value"),
         description="enable_gqa given as a string",
         query=(4, 8), key=(5, 8), value=(5, 8),
         enable_gqa="yes",
         error=("value", "enable_gqa must be a boolean, got a string")),
    Case(id="error_scale_string", seed=303, tags=("error", "value"),
         description="scale given as the string \"1\"",
         query=(4, 8), key=(5, 8), value=(5, 8),
         scale="1",
         error=("value", "scale must be a finite number, got a string")),
    Case(id="error_softcap_infinite", seed=304, tags=("error", "value"),
         description="softcap = Infinity",
         query=(4, 8), key=(5, 8), value=(5, 8),
         softcap=float("inf"),
         error=("value", "softcap must be a finite number >= 0, got Infinity")),
    Case(id="error_query_before_key", seed=305, tags=("error", "ragged", "order"),
         description="A ragged query and a key holding a string: query is reported first",
         query=[[1.0, 2.0], [3.0]], key=[["x", 1.0]], value=(5, 2),
         error=("ragged", "query is ragged: query[1] has length 1, expected 2 (shape from the first elements: [2, 2])")),
    Case(id="error_query_boolean", seed=306, tags=("error", "type"),
         description="A boolean inside query",
         query=[[True, 1.0]], key=(2, 2), value=(2, 2),
         error=("type", "query[0][0] is a boolean, expected a number")),
    Case(id="error_mask_before_shapes", seed=307, tags=("error", "type", "order"),
         description="A rank-1 key and a mask holding a string: the mask's type is reported first",
         query=(2, 2), key=[1.0, 2.0, 3.0], value=(2, 2),
         attn_mask=[["x"]],
         error=("type", "attn_mask[0][0] is a string, expected a boolean or a number")),
    Case(id="error_query_scalar", seed=308, tags=("error", "rank"),
         description="A query that is a single number",
         query=1.0, key=(5, 4), value=(5, 4),
         error=("rank", "query must have at least 2 dimensions ([L, E]), got shape []")),
]

# Inputs that nested JSON lists cannot carry (a numpy dtype; a zero dim before others, which
# [] loses): the Python ports are held to these, and they are never written as fixtures.
ARRAY_CASES = [
    Case(id="error_gqa_zero_kv_heads", seed=404, tags=("error", "heads", "arrays"),
         description="enable_gqa with 3 query heads over 0 key/value heads, arrays of shape [0, 5, 8]",
         query=(3, 3, 8), key=(0, 5, 8), value=(0, 5, 8),
         enable_gqa=True,
         error=("heads", "with enable_gqa, query heads (3) must be a multiple of key/value heads (0)"
                         " (query [3, 3, 8], key [0, 5, 8])")),
    Case(id="error_key_bool_array", seed=401, tags=("error", "type", "arrays"),
         description="key as a numpy array of booleans",
         query=(2, 2), key=np.ones((2, 2), dtype=bool), value=(2, 2),
         error=("type", "key has dtype bool, expected real numbers")),
    Case(id="error_query_complex_array", seed=402, tags=("error", "type", "arrays"),
         description="query as a numpy array of complex numbers",
         query=np.ones((2, 2), dtype=complex), key=(2, 2), value=(2, 2),
         error=("type", "query has dtype complex128, expected real numbers")),
    Case(id="error_mask_string_array", seed=403, tags=("error", "type", "arrays"),
         description="attn_mask as a numpy array of strings",
         query=(2, 2), key=(2, 2), value=(2, 2),
         attn_mask=np.array(["a", "b"]),
         error=("type", "attn_mask has dtype <U1, expected booleans or real numbers")),
]
# fmt: on

CASES = VALID_CASES + INVALID_CASES


@dataclass(frozen=True)
class Level:
    """One level of `attention-port check`: the feature a learner adds, and the tags that need it."""

    name: str
    tags: tuple[str, ...]


# The levels of `attention-port check`, easiest first. A case belongs to the last level that any of
# its tags names (it needs every feature its tags name, so it waits until the learner has them all);
# a case whose tags name no level (only "rank2", say) is plain rank-2 attention, level 2.
LEVELS = (
    Level("the tutorial example", ("tutorial",)),
    Level("plain rank-2", ()),
    Level("numerical stability (large logits)", ("stability",)),
    Level("boolean masks", ("bool_mask",)),
    Level("float masks and -inf", ("float_mask",)),
    Level("fully-masked rows", ("fully_masked",)),
    Level("causal", ("causal",)),
    Level("batch and heads", ("rank3", "rank4", "rank5", "heads", "batch", "broadcast")),
    Level("cross-attention (Lq != Lk, Ev != E)", ("cross", "ev")),
    Level("grouped-query heads", ("gqa", "mqa")),
    Level("scale and softcap", ("scale", "softcap")),
    Level("invalid input", ("error",)),
    Level(
        "edge cases (empty dims, NaN and +-inf, float64's extremes)",
        ("empty", "nan", "inf", "subnormal", "extreme"),
    ),
)
PLAIN_LEVEL = 2  # the level of a case whose tags name no level


def level_of(tags) -> int:
    """The level (1-based) a case with these tags belongs to."""
    named = [n for n, level in enumerate(LEVELS, start=1) if set(level.tags) & set(tags)]
    return max(named, default=PLAIN_LEVEL)


@dataclass(frozen=True)
class Rule:
    """One rule of the contract (docs/design.md, sections 3 and 4, says each in prose), and the
    tags a case carries when it exercises the rule: a case with every one of `tags`."""

    id: str
    text: str
    tags: tuple[str, ...]


# Every sentence of the contract as a rule with the tags of the cases that hold the ports to it.
# docs/design.md lists the same rules in the same order (a test keeps the two equal, and fails when
# no fixture case carries a rule's tags). Dropout is not a rule: it cannot be golden. Nor is the
# size limit: a fixture refused for its size would have to be that large, so the tests of
# inputs.py and inputs.ts hold both languages to it instead.
CONTRACT = (
    Rule("scores", "Step 1: scores = query · keyᵀ, [..., Hq, Lq, Lk]", ("rank2",)),
    Rule("scale-default", "Step 2: logits = scores · scale, scale 1/sqrt(E) by default", ("rank2",)),
    Rule("scale-given", "a scale given is used as it is, 0 and negative ones too", ("scale",)),
    Rule("softcap", "softcap > 0: logits = softcap · tanh(logits / softcap)", ("softcap",)),
    Rule("bool-mask", "Step 3: a boolean attn_mask (true = may attend) makes disallowed cells -inf", ("bool_mask",)),
    Rule("float-mask", "a float attn_mask is added to the logits", ("float_mask",)),
    Rule("mask-broadcast", "the mask broadcasts numpy-style to [..., Hq, Lq, Lk]", ("broadcast",)),
    Rule("causal", "is_causal allows key j for query i only when j <= i, top-left aligned (Lq != Lk too)",
         ("causal", "cross")),
    Rule("mask-and-causal", "a mask and is_causal combine: a cell must be allowed by both", ("causal", "mask")),
    Rule("softmax-stable", "Step 4: weights = softmax over the keys, with the row max subtracted", ("stability",)),
    Rule("fully-masked-zero", "a row whose logits are all -inf has weights and output exactly +0.0",
         ("fully_masked",)),
    Rule("no-keys-zero", "a row with no key (Lk = 0) has an output of +0.0", ("empty", "fully_masked")),
    Rule("fully-masked-special-value", "a fully-masked row is +0.0 even where value holds NaN or ±inf",
         ("fully_masked", "nan", "inf")),
    Rule("output", "Step 5: output = weights · value", ("rank2",)),
    Rule("batch", "leading batch dims, any number, equal across query, key and value", ("batch",)),
    Rule("gqa", "enable_gqa: query head h reads key/value head h // (Hq / Hkv)", ("gqa",)),
    Rule("heads", "Hq % Hkv == 0 with enable_gqa, and key and value have the same head count", ("error", "heads")),
    Rule("nan-logit", "a NaN logit makes its row NaN", ("nan",)),
    Rule("nan-value", "NaN in value reaches every row that averages it (0 · NaN is NaN)", ("nan",)),
    Rule("inf-times-zero", "inf · 0 is NaN in a dot product", ("inf", "nan")),
    Rule("inf-times-zero-scale", "inf · 0 is NaN with scale 0", ("inf", "nan", "scale")),
    Rule("inf-logit", "a +inf logit makes its row NaN (inf - inf in softmax)", ("inf",)),
    Rule("softcap-inf", "softcap maps ±inf to ±softcap", ("inf", "softcap")),
    Rule("inf-value", "inf in value gives ±inf where the row's weight on it is positive, NaN where it is 0",
         ("inf", "bool_mask")),
    Rule("bool-mask-over-nan", "a boolean mask overwrites a NaN score with -inf", ("nan", "bool_mask")),
    Rule("causal-over-nan", "causality overwrites a NaN score with -inf", ("nan", "causal")),
    Rule("float-mask-keeps-nan", "a float -inf mask does not (NaN + -inf is NaN)", ("nan", "float_mask")),
    Rule("large-finite-mask", "a large finite negative mask value such as -1e30 is a number, not a mask",
         ("float_mask",)),
    Rule("score-overflow", "score overflow is outside the contract: verify reports it apart",
         ("outside_contract",)),
    Rule("intermediate-overflow", "where the exact output is representable every port gives it,"
         " whatever its intermediate sums do", ("extreme",)),
    Rule("error-ragged", "nested arrays whose rows differ in length or depth: kind ragged", ("error", "ragged")),
    Rule("error-type", "a leaf that is not a number (or boolean, in a mask): kind type", ("error", "type")),
    Rule("error-rank", "a rank below 2, or ranks that differ: kind rank", ("error", "rank")),
    Rule("error-shape", "feature sizes, lengths or batch dims that do not match: kind shape", ("error", "shape")),
    Rule("error-mask", "a mask that does not broadcast to the scores: kind mask", ("error", "mask")),
    Rule("error-value", "an option of the wrong type or out of range: kind value", ("error", "value")),
    Rule("error-order", "two faults at once: the first in inputs.py's order is reported", ("error", "order")),
)  # fmt: skip
