"""Known wrong ways to write the multi-head attention layer and RoPE, computed with numpy, so that
`attention-port check` can name them on the layer and RoPE levels.

As in mistakes.py: when a learner's output fails a case and matches one of these variants there
(and the variant differs from the truth on that case), check says "looks like <the mistake>", and
points at the line of the lesson (layer.ts or layer.py) that does the step right. Each variant is
the layer with exactly one thing done wrong; the attention core inside is reference.py's, right.
None of this is a port: the expected values always come from the fixtures.

One mistake is not a variant: `x·W` where nn.Linear computes `x·Wᵀ`. The fixtures' weights are not
square, so that mistake fails on a shape, not on numbers; check finds it by asking the learner's
code again with every weight transposed (check.py), and names it when that answer is right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_port import reference
from attention_port.learner import lesson
from attention_port.learner.mistakes import same_values

# The lessons a message points at, by the learner's language: the layer's, beside the core's.
LESSONS = lesson.LAYER_LESSONS


def _linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    y = x @ weight.T  # [..., out]
    return y if bias is None else y + bias


def _split(x: np.ndarray, heads: int) -> np.ndarray:
    """The right split: [..., L, H·E] -> [..., H, L, E], head-major, with the transpose."""
    return x.reshape(*x.shape[:-1], heads, -1).swapaxes(-2, -3)


def _split_reshaped(x: np.ndarray, heads: int) -> np.ndarray:
    """The split as a reshape alone: [..., L, H·E] read straight as [..., H, L, E]."""
    return x.reshape(*x.shape[:-2], heads, x.shape[-2], -1)


def _split_last(x: np.ndarray, heads: int) -> np.ndarray:
    """The split on the wrong axis: [..., L, H·E] read as [..., L, E, H], so feature e·H + h is
    head h's feature e (head h takes every H-th feature), then the heads moved to the front."""
    return np.moveaxis(x.reshape(*x.shape[:-1], -1, heads), -1, -3)


def _merge(x: np.ndarray) -> np.ndarray:
    """The right merge: [..., H, L, Ev] -> [..., L, H·Ev], the transpose first."""
    return x.swapaxes(-2, -3).reshape(*x.shape[:-3], x.shape[-2], -1)


def _merge_reshaped(x: np.ndarray) -> np.ndarray:
    """The merge as a reshape alone: [..., H, L, Ev] read straight as [..., L, H·Ev]."""
    return x.reshape(*x.shape[:-3], x.shape[-2], -1)


def _merge_reversed(x: np.ndarray) -> np.ndarray:
    """The merge with the heads concatenated last first."""
    return _merge(x[..., ::-1, :, :])


def rotate(
    x: np.ndarray,
    positions: np.ndarray,
    theta: float,
    rotary_dim: int,
    interleaved: bool,
    denominator: int,
    step: float = 2.0,
) -> np.ndarray | None:
    """RoPE with the frequency denominator given apart from rotary_dim, and pair i's exponent
    -step·i/denominator (step 2 is right); None where the pairs do not fit in x's features (a
    variant that rotates values of fewer features than rotary_dim)."""
    half = rotary_dim // 2
    if 2 * half > x.shape[-1]:
        return None
    angle = positions[..., :, None] * theta ** (-step * np.arange(half) / denominator)  # [..., L, half]
    if positions.ndim > 1:
        angle = angle[..., None, :, :]
    first = np.arange(0, 2 * half, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    a, b = x[..., first], x[..., second]
    turned = x.copy()
    turned[..., first] = a * np.cos(angle) - b * np.sin(angle)
    turned[..., second] = a * np.sin(angle) + b * np.cos(angle)
    return turned


@dataclass(frozen=True)
class Rotation:
    """How a variant rotates: the convention, the denominator, and whether values turn too."""

    swapped: bool = False  # half-split read as interleaved, or the other way round
    denominator_e: bool = False  # theta^(-2i/E) where it is theta^(-2i/rotary_dim)
    values_too: bool = False
    from_zero: bool = False  # after a cache of P, the new rows turned at 0, 1, ... not P, P+1, ...
    theta_ignored: bool = False  # theta 10000 whatever the option says
    rotary_dim_ignored: bool = False  # every feature turned, rotary_dim the feature size E
    exponent_halved: bool = False  # theta^(-i/rotary_dim) where it is theta^(-2i/rotary_dim)


def _rope_options(rope: dict, features: int) -> tuple[float, int, bool]:
    rotary_dim = rope.get("rotary_dim")
    return (
        float(rope.get("theta", 10000.0)),
        features if rotary_dim is None else rotary_dim,
        rope.get("interleaved", False),
    )


def _turn(x: np.ndarray, positions: np.ndarray, rope: tuple, how: Rotation) -> np.ndarray | None:
    theta, rotary_dim, interleaved = rope
    theta = 10000.0 if how.theta_ignored else theta
    rotary_dim = x.shape[-1] if how.rotary_dim_ignored else rotary_dim
    denominator = x.shape[-1] if how.denominator_e else rotary_dim
    step = 1.0 if how.exponent_halved else 2.0
    return rotate(x, positions, theta, rotary_dim, interleaved != how.swapped, denominator, step)


@np.errstate(all="ignore")
def _layer(
    inputs: dict,
    params: dict,
    *,
    split: Callable[[np.ndarray, int], np.ndarray] = _split,
    merge: Callable[[np.ndarray], np.ndarray] = _merge,
    how: Rotation = Rotation(),
    offset_ignored: bool = False,
    scale_model_dim: bool = False,
    out_projected: bool = True,
    cache: str | None = None,
):
    """The six steps of layer.py with each swappable, so that a variant changes exactly one; with
    a past (past_key, past_value: P cached positions) the new rows sit at P, P+1, ... unless
    `how.from_zero`, and the causal rule lets row i see keys j <= i + P unless `offset_ignored`;
    `scale_model_dim` scales by 1/√D (x_q's features) where no scale is given, and without
    `out_projected` the merged heads are the output. With `cache` (a way of keeping it wrong:
    "expanded" to the query heads, "before_rope", "prepended") the output, present_key and
    present_value, else the output alone."""
    heads = params["num_heads"]
    kv_heads = params["num_kv_heads"] or heads
    x_q = inputs["x_q"]
    x_kv = x_q if inputs["x_kv"] is None else inputs["x_kv"]
    q = _linear(x_q, inputs["w_q"], inputs["b_q"])  # [B..., Lq, Hq·E]
    k = _linear(x_kv, inputs["w_k"], inputs["b_k"])  # [B..., Lk, Hkv·E]
    v = _linear(x_kv, inputs["w_v"], inputs["b_v"])  # [B..., Lk, Hkv·Ev]
    q, k, v = split(q, heads), split(k, kv_heads), split(v, kv_heads)
    past_key, past_value = inputs.get("past_key"), inputs.get("past_value")
    cached = 0 if past_key is None else past_key.shape[-2]  # P
    unturned = k  # [B..., Hkv, Lk, E]  the new keys before RoPE
    if params["rope"] is not None:
        rope = _rope_options(params["rope"], q.shape[-1])
        start = 0 if how.from_zero else cached
        positions = np.arange(start, start + x_q.shape[-2], dtype=np.float64)  # [Lq]
        q, k = _turn(q, positions, rope, how), _turn(k, positions, rope, how)
        if how.values_too:
            v = _turn(v, positions, rope, how)
        if v is None:
            return None
    if past_key is not None:
        ahead = cache == "prepended"  # the new rows before the past's
        k = np.concatenate([k, past_key] if ahead else [past_key, k], axis=-2)  # [B..., Hkv, P+Lk, E]
        v = np.concatenate([v, past_value] if ahead else [past_value, v], axis=-2)  # [B..., Hkv, P+Lk, Ev]
    present_key, present_value = k, v
    if cache == "before_rope":
        present_key = unturned if past_key is None else np.concatenate([past_key, unturned], axis=-2)
    if cache == "expanded":
        group = heads // kv_heads  # [B..., Hq, P+Lk, E|Ev]: query head h's copy of head h // group
        present_key, present_value = np.repeat(k, group, axis=-3), np.repeat(v, group, axis=-3)
    scale = params["scale"]
    if scale_model_dim and scale is None:
        scale = 1.0 / np.sqrt(x_q.shape[-1])  # 1/√D, D the model's features, not a head's E
    # The window, the sinks and kv_seqlen go to the core as the case gives them (where it does).
    passed_on = {
        name: params[name] for name in ("window", "sink_tokens", "sink_logits", "kv_seqlen") if name in params
    }
    steps = reference.attention_steps(
        q, k, v, inputs["attn_mask"], is_causal=params["is_causal"], scale=scale,
        enable_gqa=kv_heads != heads, softcap=params["softcap"], query_offset=0 if offset_ignored else cached,
        **passed_on,
    )  # fmt: skip
    merged = merge(steps.output)  # [B..., Lq, Hq·Ev]
    output = _linear(merged, inputs["w_o"], inputs["b_o"]) if out_projected else merged  # [B..., Lq, Dout]
    return output if cache is None else (output, present_key, present_value)


def _rope(inputs: dict, params: dict, how: Rotation) -> np.ndarray | None:
    x, positions = inputs["x"], inputs["positions"]
    rope = _rope_options(params, x.shape[-1])
    return _turn(x, positions, rope, how)


# ---- The variants: one mistake each, on a layer case or a RoPE case (kind), else None. ----


def split_without_transpose(kind, inputs, params):
    """The heads split by a reshape alone: [L, H·E] read straight as [H, L, E] takes the first
    rows' features for head 0, so positions leak into heads."""
    return _layer(inputs, params, split=_split_reshaped) if kind == "layer" else None


def merge_without_transpose(kind, inputs, params):
    """The heads merged by a reshape alone: [H, L, Ev] read straight as [L, H·Ev]."""
    return _layer(inputs, params, merge=_merge_reshaped) if kind == "layer" else None


def heads_in_wrong_order(kind, inputs, params):
    """The merge concatenates the heads last first: head h's features belong at h·Ev."""
    return _layer(inputs, params, merge=_merge_reversed) if kind == "layer" else None


def heads_split_on_wrong_axis(kind, inputs, params):
    """The heads split as [L, E, H]: head h takes features h, h + H, h + 2H, ... where it takes the
    E features from h·E on (head-major, [L, H, E])."""
    return _layer(inputs, params, split=_split_last) if kind == "layer" else None


def out_projection_forgotten(kind, inputs, params):
    """The merged heads returned as they are, [L, H·Ev]: step 6's w_o and b_o never applied."""
    return _layer(inputs, params, out_projected=False) if kind == "layer" else None


def scaled_by_model_dim(kind, inputs, params):
    """The scores scaled by 1/√D, D the model's features (x_q's), where each head's are E."""
    if kind != "layer" or params["scale"] is not None:
        return None
    return _layer(inputs, params, scale_model_dim=True)


def _rotated_wrong(kind, inputs, params, how: Rotation):
    """A rotation mistake on a RoPE case, or on a layer case that turns its queries and keys."""
    if kind == "rope":
        return _rope(inputs, params, how)
    return _layer(inputs, params, how=how) if params["rope"] is not None else None


def rope_theta_ignored(kind, inputs, params):
    """theta read as 10000 whatever the option says."""
    options = params if kind == "rope" else params["rope"] or {}
    if options.get("theta", 10000.0) == 10000.0:
        return None
    return _rotated_wrong(kind, inputs, params, Rotation(theta_ignored=True))


def rope_rotary_dim_ignored(kind, inputs, params):
    """Every feature turned, where only the first rotary_dim are (the rest pass through)."""
    options = params if kind == "rope" else params["rope"] or {}
    if options.get("rotary_dim") is None:
        return None
    return _rotated_wrong(kind, inputs, params, Rotation(rotary_dim_ignored=True))


def rope_exponent_halved(kind, inputs, params):
    """Pair i's frequency theta^(-i/rotary_dim), where it is theta^(-2i/rotary_dim)."""
    return _rotated_wrong(kind, inputs, params, Rotation(exponent_halved=True))


def rope_ignored(kind, inputs, params):
    """The layer's rope option left unread: nothing turned."""
    if kind != "layer" or params["rope"] is None:
        return None
    return _layer(inputs, {**params, "rope": None})


def rope_conventions_swapped(kind, inputs, params):
    """Half-split pairs (i, i + rotary_dim/2) and interleaved pairs (2i, 2i+1) exchanged."""
    return _rotated_wrong(kind, inputs, params, Rotation(swapped=True))


def rope_applied_to_value(kind, inputs, params):
    """RoPE turned the values too; it turns queries and keys only."""
    if kind != "layer" or params["rope"] is None:
        return None
    return _layer(inputs, params, how=Rotation(values_too=True))


def rope_denominator_e(kind, inputs, params):
    """The frequency theta^(-2i/E) with E the feature size; it is theta^(-2i/rotary_dim)."""
    return _rotated_wrong(kind, inputs, params, Rotation(denominator_e=True))


def _with_past(inputs: dict) -> bool:
    return inputs.get("past_key") is not None and inputs["past_key"].shape[-2] > 0


def cache_offset_ignored(kind, inputs, params):
    """With a cache, causal aligned top-left (row i sees keys j <= i) where the new rows sit after
    the P cached ones (j <= i + P): the core called without query_offset = P."""
    if kind != "layer" or not params["is_causal"] or not _with_past(inputs):
        return None
    return _layer(inputs, params, offset_ignored=True)


def rope_positions_from_zero(kind, inputs, params):
    """With a cache of P positions, RoPE turned the new queries and keys at positions 0, 1, ...
    as in a pass of their own; they sit at P, P+1, ..."""
    if kind != "layer" or params["rope"] is None or not _with_past(inputs):
        return None
    return _layer(inputs, params, how=Rotation(from_zero=True))


def _cached_wrong(kind, inputs, params, cache: str):
    """A cache-keeping mistake on a layer case that returns its cache, or None."""
    return _layer(inputs, params, cache=cache) if kind == "layer" and params.get("return_cache") else None


def cache_expanded_to_query_heads(kind, inputs, params):
    """With grouped heads, the cache kept with the Hq query heads' copies of the keys and values,
    where it keeps the Hkv key/value heads (the attention is the same)."""
    if kind != "layer" or (params["num_kv_heads"] or params["num_heads"]) == params["num_heads"]:
        return None
    return _cached_wrong(kind, inputs, params, "expanded")


def keys_cached_before_rope(kind, inputs, params):
    """The new keys cached as projected, before RoPE turned them (the attention used them turned)."""
    if kind != "layer" or params["rope"] is None:
        return None
    return _cached_wrong(kind, inputs, params, "before_rope")


def new_keys_prepended(kind, inputs, params):
    """The new keys and values put before the past's, where they follow it."""
    return _cached_wrong(kind, inputs, params, "prepended") if _with_past(inputs) else None


def past_ignored(kind, inputs, params):
    """The past taken and left unread: the new rows attend to the new keys alone, as in a pass of
    their own (RoPE from 0, causal top-left), where they follow P cached keys and values."""
    if kind != "layer" or not _with_past(inputs):
        return None
    return _layer({**inputs, "past_key": None, "past_value": None}, params)


@dataclass(frozen=True)
class LayerMistake:
    variant: Callable[..., np.ndarray | None] | None  # None: found by asking again (check.py)
    name: str
    says: str  # what check prints after "looks like"
    # Where each lesson does the step right: a text on that line (or on the comment above it).
    lesson_line: dict[str, str]
    # The mistake leaves the past out of the cache too: its present_key holds the new rows alone.
    drops_past: bool = False
    # The variant gives (output, present_key, present_value), all three matched.
    cache: bool = False

    def pointer(self, language: str) -> str:
        """What check prints after the mistake: the lesson's line that does the step right."""
        where = lesson.place_in(LESSONS[language], self.lesson_line[language])
        return "" if where is None else f" (the lesson does it right at {where})"


SPLIT = {"JavaScript": "// Step 2: split heads", "Python": "# Step 2: split heads"}
MERGE = {"JavaScript": "// Step 5: merge heads", "Python": "# Step 5: merge heads"}
ROTATE = {"JavaScript": "// Step 3: rotate", "Python": "# Step 3: rotate"}
PAIRS = {"JavaScript": "interleaved ? 2 * i : i", "Python": "if options.interleaved:"}
DENOMINATOR = {"JavaScript": "is the denominator", "Python": "is the denominator"}
OUT_PROJECT = {"JavaScript": "// Step 6: out-project", "Python": "# Step 6: out-project"}
ATTEND = {"JavaScript": "// Step 4: attend", "Python": "# Step 4: attend"}
PROJECT = {"JavaScript": "weight.data[o * ins + c]", "Python": "y = x @ weight.T"}
OFFSET = {"JavaScript": "queryOffset: cached", "Python": "query_offset=cached"}
FROM_P = {"JavaScript": "(_, l) => cached + l", "Python": "core.arange(cached, cached +"}
CONCATENATE = {"JavaScript": "k = appendRows(pastK, k)", "Python": 'core.concatenate(past["past_key"], k)'}

WEIGHTS_NOT_TRANSPOSED = LayerMistake(
    None,
    "weights_not_transposed",
    "x · W where nn.Linear computes x · Wᵀ: given every weight transposed, your code gives the right"
    " output; the weights are stored [out, in] as nn.Linear stores them (w_q has a row per output)",
    PROJECT,
)
LAYER_MISTAKES = (
    LayerMistake(
        heads_split_on_wrong_axis,
        "heads_split_on_wrong_axis",
        "the heads were split on the wrong axis: [L, H·E] is read as [L, H, E] (head h takes features"
        " h·E to h·E + E - 1), not as [L, E, H] (every H-th feature)",
        SPLIT,
    ),
    LayerMistake(
        out_projection_forgotten,
        "out_projection_forgotten",
        "the output projection was forgotten: the merged heads [L, H·Ev] go through w_o and b_o"
        " (output = merged · w_oᵀ + b_o), step 6",
        OUT_PROJECT,
    ),
    LayerMistake(
        scaled_by_model_dim,
        "scaled_by_model_dim",
        "the scores were scaled by 1/√D with D the layer's input features: each head's core scales by"
        " 1/√E, E the head's own query and key features",
        ATTEND,
    ),
    LayerMistake(
        split_without_transpose,
        "split_without_transpose",
        "the heads were split by a reshape alone: [L, H·E] becomes [L, H, E], then the transpose"
        " to [H, L, E]; without it, head 0 takes the features of the first positions",
        SPLIT,
    ),
    LayerMistake(
        merge_without_transpose,
        "merge_without_transpose",
        "the heads were merged by a reshape alone: [H, L, Ev] is transposed to [L, H, Ev] first,"
        " then reshaped to [L, H·Ev]",
        MERGE,
    ),
    LayerMistake(
        heads_in_wrong_order,
        "heads_in_wrong_order",
        "the heads were concatenated in the wrong order: head h's features are features h·Ev to"
        " h·Ev + Ev - 1 of the merged row, head 0 first",
        MERGE,
    ),
    LayerMistake(
        rope_conventions_swapped,
        "rope_conventions_swapped",
        "the two RoPE conventions were swapped: half-split pairs feature i with i + rotary_dim/2"
        " (interleaved = False), interleaved pairs 2i with 2i+1 (interleaved = True)",
        PAIRS,
    ),
    LayerMistake(
        rope_ignored,
        "rope_ignored",
        "rope was ignored: this case passes rope, and your output matches what ignoring it gives;"
        " the layer turns its queries and keys by RoPE at step 3",
        ROTATE,
    ),
    LayerMistake(
        rope_theta_ignored,
        "rope_theta_ignored",
        "theta was ignored: this case passes a theta other than 10000, and your output matches what"
        " 10000 gives; pair i turns by position · theta^(-2i/rotary_dim)",
        DENOMINATOR,
    ),
    LayerMistake(
        rope_rotary_dim_ignored,
        "rope_rotary_dim_ignored",
        "rotary_dim was ignored: this case passes rotary_dim less than E, and your output matches"
        " turning every feature; only the first rotary_dim turn, the rest pass through unchanged",
        DENOMINATOR,
    ),
    LayerMistake(
        rope_exponent_halved,
        "rope_exponent_halved",
        "the frequency's exponent lost its 2: pair i turns by position · theta^(-2i/rotary_dim),"
        " not theta^(-i/rotary_dim)",
        DENOMINATOR,
    ),
    LayerMistake(
        rope_applied_to_value,
        "rope_applied_to_value",
        "RoPE was applied to the values too: it turns queries and keys only, so that their dot"
        " product depends on the distance between positions; values are averaged as they are",
        ROTATE,
    ),
    LayerMistake(
        rope_denominator_e,
        "rope_denominator_e",
        "the frequency denominator is the feature size E: pair i turns by position ·"
        " theta^(-2i/rotary_dim), and rotary_dim is less than E here",
        DENOMINATOR,
    ),
    LayerMistake(
        cache_offset_ignored,
        "cache_offset_ignored",
        "causal was aligned top-left with a cache: after P cached positions new row i sits at"
        " position i + P and sees keys j <= i + P (query_offset = P), not only j <= i",
        OFFSET,
    ),
    LayerMistake(
        rope_positions_from_zero,
        "rope_positions_from_zero",
        "RoPE positions restart at 0 in decode: after a cache of P positions the new queries and"
        " keys are turned at positions P, P+1, ..., as in one pass over the whole sequence",
        FROM_P,
    ),
    LayerMistake(
        past_ignored,
        "past_ignored",
        "the past was left unread: the new rows attend to past_key's P cached keys and values, then"
        " their own (P + Lk keys in all), and present_key is that concatenation",
        CONCATENATE,
        drops_past=True,
    ),
    LayerMistake(
        cache_expanded_to_query_heads,
        "cache_expanded_to_query_heads",
        "the cache was expanded to the query heads: present_key and present_value keep the Hkv"
        " key/value heads, never the Hq copies that grouped-query attention reads",
        CONCATENATE,
        cache=True,
    ),
    LayerMistake(
        keys_cached_before_rope,
        "keys_cached_before_rope",
        "the keys were cached before RoPE: present_key holds the new keys turned at their positions,"
        " as the past's are, so a later step need not turn them again",
        CONCATENATE,
        cache=True,
    ),
    LayerMistake(
        new_keys_prepended,
        "new_keys_prepended",
        "the new keys were put before the cache: the past's P positions come first, then the new"
        " ones, in present_key and in what the new rows attend to",
        CONCATENATE,
        cache=True,
    ),
)
ALL = (*LAYER_MISTAKES, WEIGHTS_NOT_TRANSPOSED)


def identify(
    kind: str,
    inputs: dict,
    params: dict,
    expected: np.ndarray,
    output: np.ndarray,
    present_rows: int | None = None,
    present: tuple[np.ndarray, np.ndarray] | None = None,
    expected_present: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The known layer or RoPE mistake `output` matches, among those that differ from the truth on
    this case, or None; None too where it matches two (theta^(-i/rotary_dim) is theta^(-2i/E) when
    rotary_dim is E/2): the case cannot tell them apart, and another names the one it is.
    `present_rows`, the rows of the learner's present_key where it returned
    one, tells a layer that left the past out of its cache (the new rows alone) from one that kept
    it: where a mask hides every key, both give every row b_o. `present` (the learner's
    present_key and present_value) and `expected_present` let the cache's mistakes be matched on
    all three answers, where the output alone may be right."""
    if present_rows is not None:
        x_kv = inputs["x_q"] if inputs["x_kv"] is None else inputs["x_kv"]
        past = inputs.get("past_key")
        dropped = present_rows == x_kv.shape[-2] and past is not None and past.shape[-2] > 0
    matched = []
    for mistake in LAYER_MISTAKES:
        if present_rows is not None and mistake.drops_past != dropped:
            continue  # its cache would have the other length
        try:
            wrong = mistake.variant(kind, inputs, params)
        except (ValueError, IndexError, ZeroDivisionError, TypeError):
            continue  # the mistake cannot run on this case's shapes
        if mistake.cache:
            if wrong is None or present is None or expected_present is None:
                continue  # the learner or the case has no cache to compare
            truth, theirs = (expected, *expected_present), (output, *present)
        else:
            wrong, truth, theirs = (wrong,), (expected,), (output,)
        if wrong[0] is None or all(map(same_values, wrong, truth)):
            continue  # the mistake makes no difference here
        if all(map(same_values, theirs, wrong)):
            matched.append(mistake)
    return matched[0] if len(matched) == 1 else None
