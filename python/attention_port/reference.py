"""The numpy float64 reference port of scaled dot-product attention.

    output = softmax(query · keyᵀ · scale [+ mask]) · value

It grew from the tutorial chapter "Attention 机制" of the Chinese-language course "Transformer
工程实战" (its numpy `scaled_dot_product_attention(Q, K, V, mask)`): the same reading order
(scores, scale, mask, softmax, weighted sum) and the same names, extended to the whole contract of
torch.nn.functional.scaled_dot_product_attention (see docs/design.md). Its twin is
typescript/src/attention.ts: the same five steps with the same labels, written there as plain
loops over one head; numpy does every (batch, head) at once, by broadcasting over the leading
dims. docs/side-by-side.md shows the two next to each other.

Dimension letters:
    B...  leading batch dims (any number, equal across query, key and value)
    Hq    query heads             Hkv  key/value heads (Hq == Hkv unless enable_gqa)
    Lq    query length (rows)     Lk   key/value length (the axis softmax runs over)
    E     query/key features      Ev   value features
Shapes: query [B..., Hq, Lq, E], key [B..., Hkv, Lk, E], value [B..., Hkv, Lk, Ev]
        -> output [B..., Hq, Lq, Ev]. Rank-2 inputs [L, E] are the tutorial's form: no batch, no heads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_port.inputs import (
    DEFAULT_MEMORY_LIMIT,
    AttentionInputError,
    check_option_shapes,
    check_options,
    check_shapes,
    check_size,
    resolve_scale,
    to_array,
    to_mask_array,
)
from attention_port.key_range import key_range, visible_keys

__all__ = [
    "AttentionInputError",
    "AttentionSteps",
    "attention_steps",
    "scaled_dot_product_attention",
    "softmax",
]


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate tensor, for teaching and for finding the step where two ports part."""

    scores: np.ndarray  # [B..., Hq, Lq, Lk]  Step 1: query · keyᵀ
    logits: np.ndarray  # [B..., Hq, Lq, Lk]  Steps 2-3: scaled, softcapped, masked (softmax's input)
    weights: np.ndarray  # [B..., Hq, Lq, Lk]  Step 4: softmax over keys; each row sums to 1 or is 0
    output: np.ndarray  # [B..., Hq, Lq, Ev]  Step 5: weights · value


def softmax(logits: np.ndarray, sinks: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis, stable, with fully-masked rows giving +0.0; `sinks` [..., 1, 1]
    (one per head, or None) joins each row's max and denominator without a value.

    Why subtract the row max: exp(1000) overflows float64 to inf and inf/inf is NaN, but softmax
    is unchanged by shifting a row by a constant, so exp(x - max) (every exponent <= 0, the largest
    exactly 0) gives the same weights without overflow.

    Why a fully-masked row needs care: its max is -inf, and -inf - (-inf) is NaN, so the tutorial's
    softmax returns a row of NaN there. Such a row has no key to attend to; torch and ONNX define
    its weights (and its output) as zero, and so do we (whatever its sink).

    A sink logit s is one more logit with no value: the max is max(s, the row's), the denominator
    gains exp(s - max), so the row's weights sum to less than 1. It follows the logits' rules: NaN
    or +inf makes the row NaN (inf - inf), -inf adds exp(-inf) = 0, nothing.
    """
    row_max = np.max(logits, axis=-1, keepdims=True, initial=-np.inf)  # [..., Lq, 1]
    fully_masked = row_max == -np.inf  # [..., Lq, 1]  (also true when Lk == 0)
    top = row_max if sinks is None else np.maximum(row_max, sinks)  # [..., Lq, 1]  NaN meets NaN
    shifted = logits - np.where(fully_masked, 0.0, top)  # [..., Lq, Lk]  every cell <= 0
    exps = np.exp(shifted)  # [..., Lq, Lk]  masked cells: exp(-inf) = 0
    sums = exps.sum(axis=-1, keepdims=True)  # [..., Lq, 1]  >= 1 in every row that has a key and no sink
    if sinks is not None:
        sums = sums + np.exp(sinks - np.where(fully_masked, 0.0, top))  # [..., Lq, 1]  the sink's share
    weights = np.zeros_like(exps)  # [..., Lq, Lk]
    np.divide(exps, sums, out=weights, where=~fully_masked)
    return weights


@np.errstate(invalid="ignore", over="ignore")  # NaN and inf propagate by design: no warnings
def attention_steps(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    memory_limit: float = DEFAULT_MEMORY_LIMIT,
) -> AttentionSteps:
    """Scaled dot-product attention, returning every step. Arguments as in torch, plus
    query_offset: the position of query row 0 among the keys (0: torch's top-left rule; Lk - Lq:
    its causal_lower_right, a decode step after Lk - Lq cached tokens), or one per batch index;
    window (left, right): row i at p = i + query_offset sees keys p - left .. p + right (None: a
    side unbounded); sink_tokens: keys 0.. it stay visible whatever the left side says;
    sink_logits [Hq]: a logit per head joining the softmax without a value; kv_seqlen: the valid
    keys of each batch index; and memory_limit: the most bytes the steps may need (kind "size"
    above it; see inputs.py)."""
    options = check_options(
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
        softcap=softcap,
        query_offset=query_offset,
        window=window,
        sink_tokens=sink_tokens,
        sink_logits=sink_logits,
        kv_seqlen=kv_seqlen,
        memory_limit=memory_limit,
    )  # integers as ints (or nested lists of them), the window a tuple, the sink logits floats
    query = to_array("query", query, memory_limit)  # [B..., Hq, Lq, E]
    key = to_array("key", key, memory_limit)  # [B..., Hkv, Lk, E]
    value = to_array("value", value, memory_limit)  # [B..., Hkv, Lk, Ev]
    mask = None if attn_mask is None else to_mask_array(attn_mask, memory_limit)  # broadcasts to the scores
    shapes = check_shapes(
        query.shape, key.shape, value.shape, None if mask is None else mask.shape, enable_gqa
    )
    check_option_shapes(options, shapes, query.shape, key.shape)  # sink_logits [Hq], kv_seqlen [B...]
    check_size(shapes, memory_limit)  # before the [B..., Hq, Lq, Lk] steps are allocated
    scale = resolve_scale(scale, shapes.features)

    # Grouped-query attention: each key/value head serves group_size consecutive query heads, so
    # query head h reads key/value head h // group_size (torch's repeat_interleave).
    if shapes.group_size != 1:  # only inputs with a heads dim can group
        key = np.repeat(key, shapes.group_size, axis=-3)  # [B..., Hq, Lk, E]
        value = np.repeat(value, shapes.group_size, axis=-3)  # [B..., Hq, Lk, Ev]

    # Step 1: scores. How well each query matches each key: a dot product per (query, key) pair.
    scores = query @ np.swapaxes(key, -1, -2)  # [B..., Hq, Lq, Lk]

    # Step 2: scale. A dot product of E terms of unit variance has variance E, so raw scores grow
    # like sqrt(E) and push softmax into saturation (one weight near 1, tiny gradients elsewhere).
    # Multiplying by 1/sqrt(E) brings the spread back to about 1 whatever E is.
    logits = scores * scale  # [B..., Hq, Lq, Lk]
    if softcap > 0:
        # Softcap squashes the logits smoothly into (-softcap, softcap) before softmax.
        logits = softcap * np.tanh(logits / softcap)  # [B..., Hq, Lq, Lk]

    # Step 3: mask. A disallowed cell becomes -inf, so exp() makes its weight exactly 0.
    allowed = np.ones(logits.shape, dtype=bool)  # [B..., Hq, Lq, Lk]
    # key_range.py decides which keys each row sees. With is_causal, query i sits at position
    # i + query_offset and may look at keys j <= i + query_offset only (offset 0 is torch's
    # top-left rule; a decode step after P cached keys has offset P). A window (left, right) shows
    # it keys p - left .. p + right of its position p, the sink tokens besides; kv_seqlen hides
    # every key from kv_seqlen[b] on.
    keys = key_range(
        shapes,
        is_causal=is_causal,
        query_offset=options["query_offset"],
        window=options["window"],
        sink_tokens=options["sink_tokens"],
        kv_seqlen=options["kv_seqlen"],
    )
    allowed &= visible_keys(keys)  # [B..., 1, Lq, Lk]
    if mask is not None and mask.dtype == bool:
        allowed &= mask  # True = may attend; broadcasts numpy-style
    elif mask is not None:
        logits = logits + mask  # a float mask is added; -inf in it masks, a finite value is a bias
    logits = np.where(allowed, logits, -np.inf)  # [B..., Hq, Lq, Lk]

    # Step 4: weights. Softmax over the keys turns each row of logits into a distribution; a sink
    # logit per head takes a share of it and gives no value back.
    sinks = options["sink_logits"]
    if sinks is not None and shapes.has_heads:
        sinks = np.array(sinks).reshape(shapes.query_heads, 1, 1)  # [Hq, 1, 1]
    elif sinks is not None:
        sinks = np.array(sinks).reshape(1, 1)  # [1, 1]  rank 2: one head
    weights = softmax(logits, sinks)  # [B..., Hq, Lq, Lk]

    # Step 5: output. Each query's output is the weights-average of the value rows.
    output = weights @ value  # [B..., Hq, Lq, Ev]
    # A fully-masked row's output is +0.0 by construction, even where value holds NaN or inf
    # (0 * NaN would be NaN): the row attends to nothing, so there is nothing to average.
    fully_masked = np.all(logits == -np.inf, axis=-1, keepdims=True)  # [B..., Hq, Lq, 1]
    output = np.where(fully_masked, 0.0, output)  # [B..., Hq, Lq, Ev]

    return AttentionSteps(scores=scores, logits=logits, weights=weights, output=output)


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    memory_limit: float = DEFAULT_MEMORY_LIMIT,
) -> np.ndarray:
    """softmax(query · keyᵀ · scale [+ mask]) · value in float64, as
    torch.nn.functional.scaled_dot_product_attention (without dropout)."""
    return attention_steps(
        query,
        key,
        value,
        attn_mask,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
        softcap=softcap,
        query_offset=query_offset,
        window=window,
        sink_tokens=sink_tokens,
        sink_logits=sink_logits,
        kv_seqlen=kv_seqlen,
        memory_limit=memory_limit,
    ).output
