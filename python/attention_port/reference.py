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


def softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, stable, with fully-masked rows giving +0.0.

    Why subtract the row max: exp(1000) overflows float64 to inf and inf/inf is NaN, but softmax
    is unchanged by shifting a row by a constant, so exp(x - max) (every exponent <= 0, the largest
    exactly 0) gives the same weights without overflow.

    Why a fully-masked row needs care: its max is -inf, and -inf - (-inf) is NaN, so the tutorial's
    softmax returns a row of NaN there. Such a row has no key to attend to; torch and ONNX define
    its weights (and its output) as zero, and so do we.
    """
    row_max = np.max(logits, axis=-1, keepdims=True, initial=-np.inf)  # [..., Lq, 1]
    fully_masked = row_max == -np.inf  # [..., Lq, 1]  (also true when Lk == 0)
    shifted = logits - np.where(fully_masked, 0.0, row_max)  # [..., Lq, Lk]  every cell <= 0
    exps = np.exp(shifted)  # [..., Lq, Lk]  masked cells: exp(-inf) = 0
    sums = exps.sum(axis=-1, keepdims=True)  # [..., Lq, 1]  >= 1 in every row that has a key
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
    query_offset: int = 0,
    memory_limit: float = DEFAULT_MEMORY_LIMIT,
) -> AttentionSteps:
    """Scaled dot-product attention, returning every step. Arguments as in torch, plus
    query_offset: the position of query row 0 among the keys for is_causal (0: torch's top-left
    rule; Lk - Lq: its causal_lower_right, a decode step after Lk - Lq cached tokens), and
    memory_limit: the most bytes the steps may need (kind "size" above it; see inputs.py)."""
    query_offset = check_options(
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
        softcap=softcap,
        query_offset=query_offset,
        memory_limit=memory_limit,
    )["query_offset"]  # an int
    query = to_array("query", query, memory_limit)  # [B..., Hq, Lq, E]
    key = to_array("key", key, memory_limit)  # [B..., Hkv, Lk, E]
    value = to_array("value", value, memory_limit)  # [B..., Hkv, Lk, Ev]
    mask = None if attn_mask is None else to_mask_array(attn_mask, memory_limit)  # broadcasts to the scores
    shapes = check_shapes(
        query.shape, key.shape, value.shape, None if mask is None else mask.shape, enable_gqa
    )
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
    # top-left rule; a decode step after P cached keys has offset P).
    keys = key_range(shapes, is_causal=is_causal, query_offset=query_offset)
    allowed &= visible_keys(keys)  # [B..., 1, Lq, Lk]
    if mask is not None and mask.dtype == bool:
        allowed &= mask  # True = may attend; broadcasts numpy-style
    elif mask is not None:
        logits = logits + mask  # a float mask is added; -inf in it masks, a finite value is a bias
    logits = np.where(allowed, logits, -np.inf)  # [B..., Hq, Lq, Lk]

    # Step 4: weights. Softmax over the keys turns each row of logits into a distribution.
    weights = softmax(logits)  # [B..., Hq, Lq, Lk]

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
    query_offset: int = 0,
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
        memory_limit=memory_limit,
    ).output
