"""The multi-head attention layer and rotary position embeddings, written once over a core: numpy's
here (float64, around reference.py's attention core), torch's in torch_layer.py (around
torch_port.py's, in any dtype).

    output = concat_h attention(x_q W_qₕᵀ, x_kv W_kₕᵀ, x_kv W_vₕᵀ) W_oᵀ + b_o

Q, K and V come from the inputs through three learned projections (nn.Linear's `y = x·Wᵀ + b`),
each split into heads, attended head by head by the core, merged back and projected out. Its twin
is typescript/src/layer.ts: the same six steps with the same labels (project, split heads, rotate,
attend, merge heads, out-project), as loops there. docs/side-by-side.md shows the two next to each
other. As layer.ts's layerWith, `layer_with(core)` is the layer over a core: the core supplies the
few array operations numpy and torch spell differently, and the attention; `multi_head_attention`
is the layer over numpy's (NUMPY, at the end of this file).

Dimension letters, beside reference.py's:
    D     x_q's features        Dkv   x_kv's features      Dout  the output's features
    E     per-head query/key features (Hq·E need not be D)  Ev    per-head value features
Shapes: x_q [B..., Lq, D], x_kv [B..., Lk, Dkv], w_q [Hq·E, D], w_k [Hkv·E, Dkv],
        w_v [Hkv·Ev, Dkv], w_o [Dout, Hq·Ev] -> output [B..., Lq, Dout].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from attention_port import reference
from attention_port.inputs import DEFAULT_MEMORY_LIMIT, AttentionInputError, to_array, to_mask_array
from attention_port.layer_inputs import (
    check_heads,
    check_layer_shapes,
    check_layer_size,
    check_memory_limit,
    check_need_weights,
    check_past,
    check_positions,
    check_return_cache,
    check_rope,
    check_rotary_options,
)

__all__ = ["AttentionInputError", "Core", "LayerResult", "apply_rotary", "layer_with", "multi_head_attention"]


@dataclass(frozen=True)
class LayerResult:
    """What need_weights or return_cache asks for: the output, each head's weights (None unless
    need_weights) and the cache after this call (None unless return_cache)."""

    output: np.ndarray  # [B..., Lq, Dout]
    weights: np.ndarray | None = None  # [B..., Hq, Lq, P+Lk]  rows sum to 1, or +0.0 when fully masked
    present_key: np.ndarray | None = None  # [B..., Hkv, P+Lk, E]  past_key, then the new keys after RoPE
    present_value: np.ndarray | None = None  # [B..., Hkv, P+Lk, Ev]  past_value, then the new values


def apply_rotary(
    x, positions, *, theta: float = 10000.0, rotary_dim: int | None = None, interleaved: bool = False
):
    """Rotate feature pairs of x [B..., H, L, E] by angles that grow with the position.

    Pair i of the first rotary_dim features turns by positions · theta^(-2i/rotary_dim): a query
    and a key rotated so give a dot product that depends on their distance only. Half-split pairs
    are (i, i + rotary_dim/2) (HF Llama's rotate_half); interleaved pairs are (2i, 2i+1) (GPT-J,
    Meta's Llama). Features past rotary_dim pass through unchanged."""
    return apply_rotary_with(NUMPY, x, positions, theta=theta, rotary_dim=rotary_dim, interleaved=interleaved)


def rotate(core: Core, x, positions, options):
    half = options.rotary_dim // 2
    # The frequency of pair i: theta^(-2i/rotary_dim). rotary_dim, not E, is the denominator.
    inverse_frequency = options.theta ** (-2.0 * core.arange(0, half) / options.rotary_dim)  # [rotary_dim/2]
    angle = positions[..., :, None] * inverse_frequency  # [L, rotary_dim/2] or [B..., L, rotary_dim/2]
    if positions.ndim > 1:
        angle = angle[..., None, :, :]  # [B..., 1, L, rotary_dim/2]: every head turns alike
    cos, sin = core.cos_sin(angle, like=x)  # [..., L, rotary_dim/2]  in x's dtype
    if options.interleaved:
        first, second = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]  # [..., L, rotary_dim/2] each
    else:
        first, second = x[..., :half], x[..., half : 2 * half]  # [..., L, rotary_dim/2] each
    # Each pair (first, second) turns by its angle: the textbook rotation.
    turned_first = first * cos - second * sin  # [..., L, rotary_dim/2]
    turned_second = first * sin + second * cos  # [..., L, rotary_dim/2]
    rotated = core.copy(x)  # [B..., H, L, E]  features past rotary_dim stay as they were, bit for bit
    if options.interleaved:
        rotated[..., 0 : 2 * half : 2], rotated[..., 1 : 2 * half : 2] = turned_first, turned_second
    else:
        rotated[..., :half], rotated[..., half : 2 * half] = turned_first, turned_second
    return rotated


def layer_with(core: Core):
    """The layer over one core: the array operations and the attention core of numpy (NUMPY, in
    float64, with reference.py's core) or of torch (torch_layer.py's, with torch_port's core)."""

    @np.errstate(invalid="ignore", over="ignore")  # NaN and inf propagate by design
    def multi_head_attention(
        x_q,
        x_kv=None,
        *,
        w_q,
        w_k,
        w_v,
        w_o,
        b_q=None,
        b_k=None,
        b_v=None,
        b_o=None,
        num_heads,
        num_kv_heads=None,
        attn_mask=None,
        is_causal: bool = False,
        scale: float | None = None,
        softcap: float = 0.0,
        window: tuple[int | None, int | None] | None = None,
        sink_tokens: int = 0,
        sink_logits=None,
        kv_seqlen: int | list | None = None,
        rope: dict | None = None,
        need_weights: bool = False,
        past_key=None,
        past_value=None,
        return_cache: bool = False,
        memory_limit: float = DEFAULT_MEMORY_LIMIT,
    ):
        """Multi-head attention as a layer; x_kv None is self-attention. Returns the output
        [B..., Lq, Dout], or with need_weights or return_cache a LayerResult that also holds each
        head's weights or the cache.

        past_key [B..., Hkv, P, E] and past_value [B..., Hkv, P, Ev] are the keys (after RoPE) and
        values of P earlier positions: the new rows sit at positions P, P+1, ..., so RoPE turns
        them there and the causal rule lets row i see keys j <= i + P (the core's query_offset = P).
        window, sink_tokens, sink_logits and kv_seqlen are the core's, over the P + Lk keys.
        memory_limit bounds the bytes the layer's tensors may need, and the core's (kind "size")."""
        num_heads, num_kv_heads = check_heads(num_heads, num_kv_heads)
        check_memory_limit(memory_limit)  # before any tensor is read: each is read within it
        if rope is not None and x_kv is not None:
            raise AttentionInputError(
                "value",
                "rope rotates by the positions of one sequence: give it with self-attention only (no x_kv)",
            )
        x_q = core.array("x_q", x_q, memory_limit)  # [B..., Lq, D]
        x_kv = x_q if x_kv is None else core.array("x_kv", x_kv, memory_limit)  # [B..., Lk, Dkv]
        weights = {
            n: core.array(n, w, memory_limit)
            for n, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o))
        }
        biases = {
            n: None if b is None else core.array(n, b, memory_limit)
            for n, b in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o))
        }
        shapes = check_layer_shapes(
            tuple(x_q.shape), tuple(x_kv.shape), {n: tuple(w.shape) for n, w in weights.items()},
            {n: None if b is None else tuple(b.shape) for n, b in biases.items()}, num_heads, num_kv_heads,
        )  # fmt: skip
        rotary = None if rope is None else check_rope(rope, shapes.features)
        check_need_weights(need_weights)
        check_return_cache(return_cache)
        past = {
            n: None if p is None else core.array(n, p, memory_limit)
            for n, p in (("past_key", past_key), ("past_value", past_value))
        }
        cached = check_past(
            *(None if p is None else tuple(p.shape) for p in past.values()), tuple(x_q.shape), shapes
        )  # P
        check_layer_size(tuple(x_q.shape), tuple(x_kv.shape), shapes, cached, memory_limit)  # before step 1
        mask = None if attn_mask is None else to_mask_array(attn_mask, memory_limit)
        batch, Lq, Lk = tuple(x_q.shape[:-2]), x_q.shape[-2], x_kv.shape[-2]  # B..., the two lengths

        # Step 1: project. Three learned linear maps read queries, keys and values out of the inputs.
        q = core.linear(x_q, weights["w_q"], biases["b_q"])  # [B..., Lq, Hq·E]
        k = core.linear(x_kv, weights["w_k"], biases["b_k"])  # [B..., Lk, Hkv·E]
        v = core.linear(x_kv, weights["w_v"], biases["b_v"])  # [B..., Lk, Hkv·Ev]

        # Step 2: split heads. Feature h·E + e is head h's feature e (head-major); the transpose puts
        # each head's rows together, as the core wants them. A reshape alone would mix positions.
        q = q.reshape(*batch, Lq, num_heads, shapes.features).swapaxes(-2, -3)  # [B..., Hq, Lq, E]
        k = k.reshape(*batch, Lk, num_kv_heads, shapes.features).swapaxes(-2, -3)  # [B..., Hkv, Lk, E]
        v = v.reshape(*batch, Lk, num_kv_heads, shapes.value_features).swapaxes(-2, -3)  # [B..., Hkv, Lk, Ev]

        # Step 3: rotate. RoPE turns queries and keys (never values) by their positions P..P+L-1:
        # after a cache of P positions the new rows are rows P, P+1, ... of the sequence.
        if rotary is not None:
            positions = core.arange(cached, cached + Lq)  # [L]
            q = rotate(core, q, positions, rotary)  # [B..., Hq, Lq, E]
            k = rotate(core, k, positions, rotary)  # [B..., Hkv, Lk, E]
        # The cache: the earlier keys (already rotated) and values, then these, unchanged.
        if past["past_key"] is not None:
            k = core.concatenate(past["past_key"], k)  # [B..., Hkv, P+Lk, E]
            v = core.concatenate(past["past_value"], v)  # [B..., Hkv, P+Lk, Ev]

        # Step 4: attend. The core, once for every head (query head h reads key/value head
        # h // (Hq / Hkv) when there are fewer key/value heads); row i is at position i + P. The
        # window, the sinks and kv_seqlen are the core's, over the P + Lk keys (the core checks them).
        steps = core.attention_steps(
            q, k, v, mask, is_causal=is_causal, scale=scale, enable_gqa=num_kv_heads != num_heads,
            softcap=softcap, window=window, sink_tokens=sink_tokens, sink_logits=sink_logits,
            kv_seqlen=kv_seqlen, query_offset=cached, memory_limit=memory_limit,
        )  # fmt: skip
        heads = steps.output  # [B..., Hq, Lq, Ev]  a fully-masked row is +0.0

        # Step 5: merge heads. The transpose back, then head h's feature e is feature h·Ev + e again.
        merged = heads.swapaxes(-2, -3).reshape(
            *batch, Lq, num_heads * shapes.value_features
        )  # [B..., Lq, Hq·Ev]

        # Step 6: out-project. One more linear map mixes the heads; a fully-masked row gives b_o.
        output = core.linear(merged, weights["w_o"], biases["b_o"])  # [B..., Lq, Dout]

        if need_weights or return_cache:
            return LayerResult(
                output=output,
                weights=steps.weights if need_weights else None,  # [B..., Hq, Lq, P+Lk]
                present_key=k if return_cache else None,  # [B..., Hkv, P+Lk, E]
                present_value=v if return_cache else None,  # [B..., Hkv, P+Lk, Ev]
            )
        return output

    return multi_head_attention


# ---- The plumbing: RoPE's checks, and what a core supplies. ----


def apply_rotary_with(core: Core, x, positions, *, theta, rotary_dim, interleaved):
    """apply_rotary over one core: the inputs checked, then rotated."""
    x = core.array("x", x, DEFAULT_MEMORY_LIMIT)  # [B..., H, L, E]
    positions = core.positions("positions", positions)  # [L] or [B..., L]
    if x.ndim < 2:
        raise AttentionInputError(
            "rank", f"x must have at least 2 dimensions ([L, E]), got shape {list(x.shape)}"
        )
    options = check_rotary_options(theta, rotary_dim, interleaved, x.shape[-1])
    check_positions(tuple(x.shape), tuple(positions.shape), positions.reshape(-1).tolist())
    return rotate(core, x, positions, options)


class Core(Protocol):
    """What the layer needs that numpy and torch spell differently: reading an input, nn.Linear,
    the float64 positions, cos and sin, a copy, the cache's concatenation and the attention core.
    The rest (slices, reshape, swapaxes, * and +) the layer writes once for both."""

    def array(self, name: str, x, memory_limit: float): ...  # an input, checked, in the core's dtype
    def positions(self, name: str, x): ...  # positions, checked, in float64 whatever the dtype
    def arange(self, start: int, stop: int): ...  # start, start + 1, ..., stop - 1, in float64
    def linear(self, x, weight, bias): ...  # nn.Linear: x [..., in], weight [out, in] -> [..., out]
    def cos_sin(self, angle, like): ...  # cos(angle), sin(angle), rounded to like's dtype
    def copy(self, x): ...
    def concatenate(self, past, x): ...  # past [..., P, w] then x [..., L, w]: [..., P+L, w]
    def attention_steps(self, query, key, value, attn_mask, **options): ...  # the attention core


class NumpyCore:
    """numpy in float64, with reference.py's attention core."""

    def array(self, name: str, x, memory_limit: float = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
        return to_array(name, x, memory_limit)

    positions = array  # float64 already

    def arange(self, start: int, stop: int) -> np.ndarray:
        return np.arange(start, stop, dtype=np.float64)

    def linear(self, x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
        """nn.Linear: y = x · Wᵀ + b, W stored [out, in]."""
        y = x @ weight.T  # [..., out]
        return y if bias is None else y + bias

    def cos_sin(self, angle: np.ndarray, like: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.cos(angle), np.sin(angle)

    def copy(self, x: np.ndarray) -> np.ndarray:
        return x.copy()

    def concatenate(self, past: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.concatenate([past, x], axis=-2)

    def attention_steps(self, query, key, value, attn_mask, **options) -> reference.AttentionSteps:
        return reference.attention_steps(query, key, value, attn_mask, **options)


NUMPY = NumpyCore()
multi_head_attention = layer_with(NUMPY)
