"""The case table: every fixture declared once, one row each.

A valid case names its inputs and options; the oracle computes what they should give. An invalid
case names its inputs and options and the error every port must raise: its `kind` and its exact
message (the TypeScript port spells argument names its own way: attnMask, enableGqa, isCausal).

Inputs are written three ways:
  - a shape tuple such as (2, 4, 8): numbers drawn from the case's own generator, standard normal;
  - a function of the generator (`normal(shape, spread)`, `bool_mask(...)`, ...), for other draws;
  - a literal nested list, used as written (the tutorial's examples, and most invalid inputs).
Each case draws from `numpy.random.Generator(PCG64(seed))` with its own seed, in the order query,
key, value, attn_mask, so adding or editing one case never changes another. Drawn numbers keep
three significant digits, so the files stay short and readable; the oracle takes them exactly as
the float64 values they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import numpy as np

Generator = np.random.Generator
Spec = Union[tuple, list, np.ndarray, Callable[[Generator], object]]  # noqa: UP007


def _three_digits(x: np.ndarray) -> np.ndarray:
    """Round every number to three significant digits (exact float64 values from then on)."""
    flat = [float(f"{v:.3g}") for v in x.ravel().tolist()]
    return np.array(flat, dtype=np.float64).reshape(x.shape)


def normal(shape: tuple, spread: float = 1.0) -> Callable[[Generator], np.ndarray]:
    """Standard normal numbers times `spread`."""
    return lambda rng: _three_digits(rng.standard_normal(shape) * spread)


def with_nan(shape: tuple, *nan_at: tuple) -> Callable[[Generator], np.ndarray]:
    """Standard normal numbers with NaN at the given indices."""

    def draw(rng: Generator) -> np.ndarray:
        x = _three_digits(rng.standard_normal(shape))
        for index in nan_at:
            x[index] = np.nan
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


@dataclass(frozen=True)
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
        return {
            "is_causal": self.is_causal,
            "scale": self.scale,
            "enable_gqa": self.enable_gqa,
            "softcap": self.softcap,
        }


TUTORIAL_QUERY = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
TUTORIAL_VALUE = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]

# fmt: off
VALID_CASES = [
    Case("tutorial_seq3_dk4", "The tutorial's first example: 3 tokens, d_k = 4, V = [[1,2],[3,4],[5,6]]",
         ("tutorial", "rank2"), 1, TUTORIAL_QUERY, TUTORIAL_QUERY, TUTORIAL_VALUE),
    Case("tutorial_seq4_dk8", "The tutorial's second example: 4 tokens, d_k = 8, random Q, K, V",
         ("tutorial", "rank2"), 2, (4, 8), (4, 8), (4, 8)),
    Case("rank2_square", "Rank 2 self-attention shape, 6 tokens, E = 8", ("rank2",), 3, (6, 8), (6, 8), (6, 8)),
    Case("rank3_heads", "Rank 3 [H, L, E]: three heads, no batch", ("rank3", "heads"), 4, (3, 5, 8), (3, 5, 8), (3, 5, 8)),
    Case("rank4_batch_heads", "Rank 4 [B, H, L, E] with Lq != Lk", ("rank4", "cross"), 5,
         (2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)),
    Case("rank5_two_batch_dims", "Two leading batch dims [B1, B2, H, L, E]", ("rank5", "batch"), 6,
         (2, 2, 2, 3, 4), (2, 2, 2, 4, 4), (2, 2, 2, 4, 4)),
    Case("cross_attention", "Cross-attention, 3 queries over 7 keys", ("rank2", "cross"), 7, (3, 8), (7, 8), (7, 8)),
    Case("cross_attention_more_queries", "Cross-attention, 9 queries over 4 keys", ("rank2", "cross"), 8,
         (9, 8), (4, 8), (4, 8)),
    Case("value_features_smaller", "Ev = 3 < E = 8", ("rank4", "ev"), 9, (2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 3)),
    Case("value_features_larger", "Ev = 16 > E = 4", ("rank2", "ev"), 10, (4, 4), (5, 4), (5, 16)),
    Case("scale_custom", "Custom scale 0.3 instead of 1/sqrt(E)", ("rank3", "scale"), 11,
         (2, 4, 8), (2, 4, 8), (2, 4, 8), scale=0.3),
    Case("scale_zero", "scale = 0: every weight equal, output = mean of the value rows", ("rank2", "scale"), 12,
         (3, 8), (5, 8), (5, 4), scale=0.0),
    Case("scale_negative", "Negative scale -0.5 (allowed, as in torch)", ("rank2", "scale"), 13,
         (4, 8), (4, 8), (4, 8), scale=-0.5),
    Case("bool_padding_mask", "Boolean padding mask [B, 1, 1, Lk]: batch 0 sees 4 keys, batch 1 sees 5",
         ("rank4", "mask", "bool_mask", "broadcast"), 14,
         (2, 2, 4, 8), (2, 2, 6, 8), (2, 2, 6, 8), attn_mask=padding_mask([4, 5], 6)),
    Case("float_mask_with_neg_inf", "Float mask of biases with -inf cells", ("rank2", "mask", "float_mask"), 15,
         (4, 8), (6, 8), (6, 8), attn_mask=float_mask((4, 6), neg_inf=0.3)),
    Case("float_mask_large_finite", "Large finite biases (-1e4 on a whole row, -1e30) are numbers, not masks",
         ("rank2", "mask", "float_mask"), 16,
         (4, 8), (5, 8), (5, 8), attn_mask=large_negative_bias),
    Case("causal_square", "Causal, Lq = Lk = 5", ("rank4", "causal"), 17,
         (2, 2, 5, 8), (2, 2, 5, 8), (2, 2, 5, 8), is_causal=True),
    Case("causal_wide", "Causal with Lq = 3 < Lk = 6 (top-left: query i sees keys 0..i)", ("rank2", "causal", "cross"), 18,
         (3, 8), (6, 8), (6, 8), is_causal=True),
    Case("causal_tall", "Causal with Lq = 6 > Lk = 3 (top-left: rows 2.. see every key)", ("rank2", "causal", "cross"), 19,
         (6, 8), (3, 8), (3, 8), is_causal=True),
    Case("causal_with_bool_mask", "Causal combined with a boolean mask; row 0 ends fully masked",
         ("rank3", "causal", "mask", "bool_mask", "fully_masked"), 20,
         (2, 5, 8), (2, 5, 8), (2, 5, 8), attn_mask=np.array([[False, True, True, True, True]] + [[True] * 5] * 4),
         is_causal=True),
    Case("causal_with_float_mask", "Causal combined with an ALiBi-style float mask", ("rank2", "causal", "mask", "float_mask"), 21,
         (5, 8), (5, 8), (5, 8), attn_mask=distance_bias(5, 5, 0.5), is_causal=True),
    Case("gqa_4q_2kv", "Grouped-query attention: 4 query heads share 2 key/value heads", ("rank4", "gqa"), 22,
         (2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), enable_gqa=True),
    Case("mqa_4q_1kv", "Multi-query attention: 4 query heads share 1 key/value head", ("rank3", "gqa", "mqa"), 23,
         (4, 3, 8), (1, 5, 8), (1, 5, 8), enable_gqa=True),
    Case("gqa_causal_masked", "GQA (6 query heads, 2 kv heads) with causal and a padding mask",
         ("rank4", "gqa", "causal", "mask", "bool_mask"), 24,
         (1, 6, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), attn_mask=np.array([True, True, True, False]),
         is_causal=True, enable_gqa=True),
    Case("gqa_equal_heads", "enable_gqa with Hq == Hkv changes nothing", ("rank3", "gqa"), 25,
         (2, 3, 8), (2, 4, 8), (2, 4, 8), enable_gqa=True),
    Case("softcap", "Softcap 5 on logits of spread about 10", ("rank2", "softcap"), 26,
         normal((5, 8), 3.0), normal((5, 8), 3.0), (5, 8), softcap=5.0),
    Case("softcap_with_mask", "Softcap 2 with a float mask added after it", ("rank3", "softcap", "mask", "float_mask"), 27,
         (2, 4, 8), (2, 4, 8), (2, 4, 8), attn_mask=float_mask((4, 4), neg_inf=0.2), softcap=2.0),
    Case("fully_masked_row_bool", "A boolean mask row that is all False gives output +0.0",
         ("rank2", "mask", "bool_mask", "fully_masked"), 28,
         (4, 8), (5, 8), (5, 8), attn_mask=bool_mask((4, 5), 0.7, blocked_rows=(2,))),
    Case("fully_masked_row_float", "A float mask row that is all -inf gives output +0.0",
         ("rank4", "mask", "float_mask", "fully_masked"), 29,
         (1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), attn_mask=float_mask((3, 5), 0.1, blocked_rows=(0,))),
    Case("empty_queries", "Lq = 0: an empty output [B, 0, Ev]", ("rank3", "empty"), 30,
         (2, 0, 8), (2, 5, 8), (2, 5, 4)),
    Case("empty_keys", "Lk = 0: no key to attend to, so every row is fully masked and zero", ("rank3", "empty", "fully_masked"), 31,
         (2, 3, 8), (2, 0, 8), (2, 0, 4)),
    Case("large_logits", "Scaled scores near 1e3: exp() without the max subtraction overflows", ("rank2", "stability"), 32,
         normal((4, 16), 30.0), large_logit_keys, (6, 8)),
    Case("tiny_logits", "Scores around 1e-6: weights almost uniform", ("rank2", "stability"), 33,
         normal((4, 8), 1e-3), normal((6, 8), 1e-3), (6, 8)),
    Case("nan_in_query", "NaN in query row 1 makes output row 1 NaN and no other", ("rank2", "nan"), 34,
         with_nan((4, 8), (1, 2)), (5, 8), (5, 8)),
    Case("nan_in_value", "NaN in value row 2, column 1: output column 1 is NaN in every row", ("rank2", "nan"), 35,
         (3, 8), (4, 8), with_nan((4, 3), (2, 1))),
    Case("single_key", "Lk = 1: every weight is 1 and the output copies the value row", ("rank3", "edge"), 36,
         (2, 4, 8), (2, 1, 8), (2, 1, 8)),
    Case("single_query", "Lq = 1: one query row", ("rank2", "edge"), 37, (1, 8), (6, 8), (6, 8)),
    Case("mask_broadcast_rank1", "Boolean mask [Lk] broadcast to [B, H, Lq, Lk]", ("rank4", "mask", "bool_mask", "broadcast"), 38,
         (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=np.array([True, False, True, True, False])),
    Case("mask_broadcast_rank2", "Float mask [Lq, Lk] broadcast to [B, H, Lq, Lk]", ("rank4", "mask", "float_mask", "broadcast"), 39,
         (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=float_mask((4, 5), 0.2)),
    Case("mask_broadcast_rank3", "Boolean mask [H, Lq, Lk] broadcast over the batch", ("rank4", "mask", "bool_mask", "broadcast"), 40,
         (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=bool_mask((3, 4, 5), 0.6)),
    Case("mask_broadcast_rank4", "Float mask [B, 1, Lq, 1]: per-row biases, -inf rows fully masked",
         ("rank4", "mask", "float_mask", "broadcast", "fully_masked"), 41,
         (2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), attn_mask=float_mask((2, 1, 4, 1), 0.25)),
    Case("everything_at_once", "Rank 4, GQA, causal, float mask, softcap and a custom scale together",
         ("rank4", "gqa", "causal", "mask", "float_mask", "softcap", "scale", "cross"), 42,
         (2, 4, 6, 8), (2, 2, 7, 8), (2, 2, 7, 5), attn_mask=float_mask((6, 7), 0.15),
         is_causal=True, scale=0.4, enable_gqa=True, softcap=3.0),
    Case("long_sequence", "67 tokens, E = 24, Ev = 16: long enough to cross tile boundaries", ("rank2", "long"), 43,
         (67, 24), (67, 24), (67, 16)),
    Case("long_sequence_causal_masked", "70 queries over 75 keys, causal with a padding mask",
         ("rank3", "long", "causal", "mask", "bool_mask", "cross"), 44,
         (1, 70, 16), (1, 75, 16), (1, 75, 8), attn_mask=np.arange(75) < 71, is_causal=True),
]

INVALID_CASES = [
    Case("error_query_rank1", "A rank-1 query", ("error", "rank"), 101,
         [1.0, 2.0, 3.0], (4, 3), (4, 3),
         error=("rank", "query must have at least 2 dimensions ([L, E]), got shape [3]")),
    Case("error_rank_mismatch", "query rank 3, key and value rank 2", ("error", "rank"), 102,
         (2, 3, 4), (3, 4), (3, 4),
         error=("rank", "query, key and value must have the same rank, got query [2, 3, 4], key [3, 4], value [3, 4]")),
    Case("error_feature_mismatch", "key feature size 6, query 8", ("error", "shape"), 103,
         (2, 4, 8), (2, 5, 6), (2, 5, 6),
         error=("shape", "key has feature size 6 but query has 8 (query [2, 4, 8], key [2, 5, 6])")),
    Case("error_key_value_length_mismatch", "5 keys but 4 values", ("error", "shape"), 104,
         (3, 4), (5, 4), (4, 4),
         error=("shape", "value has length 4 but key has 5 (key [5, 4], value [4, 4])")),
    Case("error_key_batch_mismatch", "key batch 3, query batch 2", ("error", "shape"), 105,
         (2, 2, 3, 4), (3, 2, 5, 4), (3, 2, 5, 4),
         error=("shape", "key has batch dims [3] but query has [2] (query [2, 2, 3, 4], key [3, 2, 5, 4])")),
    Case("error_value_batch_mismatch", "value batch 1, query batch 2 (no batch broadcasting)", ("error", "shape"), 106,
         (2, 2, 3, 4), (2, 2, 5, 4), (1, 2, 5, 4),
         error=("shape", "value has batch dims [1] but query has [2] (query [2, 2, 3, 4], value [1, 2, 5, 4])")),
    Case("error_heads_without_gqa", "4 query heads, 2 key/value heads, enable_gqa off", ("error", "heads"), 107,
         (4, 3, 8), (2, 5, 8), (2, 5, 8),
         error=("heads", "query has head count 4 but key and value have 2; set enable_gqa to share key/value"
                         " heads across query heads (query [4, 3, 8], key [2, 5, 8])")),
    Case("error_gqa_not_multiple", "enable_gqa with 3 query heads over 2 key/value heads", ("error", "heads"), 108,
         (3, 2, 4), (2, 5, 4), (2, 5, 4), enable_gqa=True,
         error=("heads", "with enable_gqa, query heads (3) must be a multiple of key/value heads (2)"
                         " (query [3, 2, 4], key [2, 5, 4])")),
    Case("error_key_value_heads_differ", "key has 2 heads, value 1", ("error", "heads"), 109,
         (2, 3, 4), (2, 5, 4), (1, 5, 4),
         error=("heads", "value has head count 1 but key has 2 (key [2, 5, 4], value [1, 5, 4])")),
    Case("error_zero_features", "E = 0: nothing to compare queries and keys with", ("error", "shape"), 110,
         [[], [], []], [[], [], []], [[1.0], [2.0], [3.0]],
         error=("shape", "query has feature size 0; attention needs at least one feature (query [3, 0])")),
    Case("error_mask_not_broadcastable", "Mask [3, 4] against scores [2, 3, 5]", ("error", "mask"), 111,
         (2, 3, 4), (2, 5, 4), (2, 5, 4), attn_mask=bool_mask((3, 4)),
         error=("mask", "attn_mask [3, 4] does not broadcast to the scores [2, 3, 5]: mask dimension 1 is 4,"
                        " expected 1 or 5")),
    Case("error_mask_rank_too_high", "Mask of rank 4 for rank-2 scores", ("error", "mask"), 112,
         (3, 4), (5, 4), (5, 4), attn_mask=bool_mask((1, 1, 3, 5)),
         error=("mask", "attn_mask has rank 4 but the scores [3, 5] have rank 2 (attn_mask [1, 1, 3, 5])")),
    Case("error_mask_scalar", "A mask that is a single boolean", ("error", "mask"), 113,
         (3, 4), (5, 4), (5, 4), attn_mask=True,
         error=("mask", "attn_mask must have at least 1 dimension, got shape []")),
    Case("error_ragged_query", "query rows of lengths 3 and 2", ("error", "ragged"), 114,
         [[1.0, 2.0, 3.0], [4.0, 5.0]], (4, 3), (4, 3),
         error=("ragged", "query is ragged: query[1] has length 2, expected 3 (shape from the first elements: [2, 3])")),
    Case("error_ragged_key_depth", "key with an array where a number belongs", ("error", "ragged"), 115,
         (2, 2), [[1.0, 2.0], [3.0, [4.0]]], (2, 2),
         error=("ragged", "key is ragged: key[1][1] is an array, expected a scalar (shape from the first elements: [2, 2])")),
    Case("error_ragged_mask", "Mask rows of lengths 3 and 2", ("error", "ragged"), 116,
         (2, 4), (3, 4), (3, 4), attn_mask=[[True, False, True], [True, True]],
         error=("ragged", "attn_mask is ragged: attn_mask[1] has length 2, expected 3"
                          " (shape from the first elements: [2, 3])")),
    Case("error_ragged_value_scalar_row", "value with a number where a row belongs", ("error", "ragged"), 117,
         (2, 2), (3, 2), [[1.0, 2.0], 3.0, [4.0, 5.0]],
         error=("ragged", "value is ragged: value[1] is not an array, expected length 2"
                          " (shape from the first elements: [3, 2])")),
    Case("error_query_string", "A string inside query", ("error", "type"), 118,
         [[1.0, "two"], [3.0, 4.0]], (3, 2), (3, 2),
         error=("type", "query[0][1] is a string, expected a number")),
    Case("error_value_null", "null inside value", ("error", "type"), 119,
         (2, 2), (2, 2), [[1.0, 2.0], [None, 4.0]],
         error=("type", "value[1][0] is null, expected a number")),
    Case("error_key_boolean", "A boolean inside key", ("error", "type"), 120,
         (2, 2), [[True, 1.0], [0.0, 1.0]], (2, 2),
         error=("type", "key[0][0] is a boolean, expected a number")),
    Case("error_mask_mixed", "A mask mixing booleans and numbers", ("error", "type"), 121,
         (2, 4), (3, 4), (3, 4), attn_mask=[[True, 0.0, True], [True, True, False]],
         error=("type", "attn_mask mixes booleans and numbers: attn_mask[0][0] is a boolean but attn_mask[0][1]"
                        " is a number")),
    Case("error_mask_string", "A string inside the mask", ("error", "type"), 122,
         (2, 4), (3, 4), (3, 4), attn_mask=[["yes", True, True], [True, True, False]],
         error=("type", "attn_mask[0][0] is a string, expected a boolean or a number")),
    Case("error_scale_nan", "scale = NaN", ("error", "value"), 123, (2, 4), (3, 4), (3, 4), scale=float("nan"),
         error=("value", "scale must be a finite number, got NaN")),
    Case("error_scale_infinite", "scale = Infinity", ("error", "value"), 124, (2, 4), (3, 4), (3, 4), scale=float("inf"),
         error=("value", "scale must be a finite number, got Infinity")),
    Case("error_softcap_negative", "softcap = -1", ("error", "value"), 125, (2, 4), (3, 4), (3, 4), softcap=-1.0,
         error=("value", "softcap must be a finite number >= 0, got -1")),
    Case("error_is_causal_string", "is_causal given as a string", ("error", "value"), 126,
         (2, 4), (3, 4), (3, 4), is_causal="yes",
         error=("value", "is_causal must be a boolean, got a string")),
    Case("error_enable_gqa_number", "enable_gqa given as the number 1", ("error", "value"), 127,
         (2, 4), (3, 4), (3, 4), enable_gqa=1,
         error=("value", "enable_gqa must be a boolean, got 1")),
]
# fmt: on

CASES = VALID_CASES + INVALID_CASES
