"""The multi-head attention layer and RoPE in torch: F.linear for the projections and the torch
port's attention core (torch_port.attention_steps) for every head, step for step as layer.py.

The same contract (docs/design.md), the same checks and messages (layer_inputs.py), in any torch
dtype and device. `from_torch_mha` reads an nn.MultiheadAttention's weights into it; with
adapters.torch_mha_mask for its masks, the two agree wherever nn.MultiheadAttention itself is
defined (its need_weights path gives NaN for a fully-masked row, where this layer gives b_o).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from attention_port import torch_port
from attention_port.inputs import AttentionInputError, to_array, to_mask_array
from attention_port.layer import LayerResult
from attention_port.layer_inputs import (
    check_heads,
    check_layer_shapes,
    check_past,
    check_positions,
    check_return_cache,
    check_rope,
    check_rotary_options,
)

__all__ = ["apply_rotary", "from_torch_mha", "multi_head_attention"]


def _tensor(name: str, x, device, dtype) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(device, dtype)
    return torch.as_tensor(to_array(name, x), device=device).to(dtype)


def _rotate(x: torch.Tensor, positions: torch.Tensor, options) -> torch.Tensor:
    half = options.rotary_dim // 2
    # The angles in float64 whatever x's dtype (a float16 phase is wrong past a few hundred
    # positions), then cos and sin rounded to x's dtype.
    exponent = -2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / options.rotary_dim
    inverse_frequency = options.theta**exponent  # [rotary_dim/2]
    angle = positions.to(torch.float64)[..., :, None] * inverse_frequency  # [..., L, rotary_dim/2]
    if positions.ndim > 1:
        angle = angle[..., None, :, :]  # [B..., 1, L, rotary_dim/2]
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    if options.interleaved:
        first, second = x[..., 0 : 2 * half : 2], x[..., 1 : 2 * half : 2]
    else:
        first, second = x[..., :half], x[..., half : 2 * half]
    turned_first = first * cos - second * sin  # [..., L, rotary_dim/2]
    turned_second = first * sin + second * cos  # [..., L, rotary_dim/2]
    rotated = x.clone()  # features past rotary_dim stay, bit for bit
    if options.interleaved:
        rotated[..., 0 : 2 * half : 2], rotated[..., 1 : 2 * half : 2] = turned_first, turned_second
    else:
        rotated[..., :half], rotated[..., half : 2 * half] = turned_first, turned_second
    return rotated


def apply_rotary(x, positions, *, theta=10000.0, rotary_dim=None, interleaved=False, device=None, dtype=None):
    """layer.apply_rotary in torch (float64 on the CPU unless told otherwise)."""
    device = torch.device(device or "cpu")
    dtype = dtype or torch.float64
    x = _tensor("x", x, device, dtype)  # [B..., H, L, E]
    positions = torch.as_tensor(to_array("positions", positions), device=device)  # [L] or [B..., L]
    if x.ndim < 2:
        raise AttentionInputError(
            "rank", f"x must have at least 2 dimensions ([L, E]), got shape {list(x.shape)}"
        )
    options = check_rotary_options(theta, rotary_dim, interleaved, x.shape[-1])
    check_positions(tuple(x.shape), tuple(positions.shape), positions.reshape(-1).tolist())
    return _rotate(x, positions, options)


def multi_head_attention(
    x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None, num_heads,
    num_kv_heads=None, attn_mask=None, is_causal=False, scale=None, softcap=0.0, rope=None,
    need_weights=False, past_key=None, past_value=None, return_cache=False, device=None, dtype=None,
):  # fmt: skip
    """layer.multi_head_attention in torch: the same six steps, in `dtype` on `device`; the cache
    (past_key, past_value, present_key, present_value) in that dtype too, copied bit for bit."""
    num_heads, num_kv_heads = check_heads(num_heads, num_kv_heads)
    if rope is not None and x_kv is not None:
        raise AttentionInputError(
            "value",
            "rope rotates by the positions of one sequence: give it with self-attention only (no x_kv)",
        )
    device = torch.device(device or "cpu")
    dtype = dtype or torch.float64
    x_q = _tensor("x_q", x_q, device, dtype)  # [B..., Lq, D]
    x_kv = x_q if x_kv is None else _tensor("x_kv", x_kv, device, dtype)  # [B..., Lk, Dkv]
    weights = {
        n: _tensor(n, w, device, dtype) for n, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o))
    }
    biases = {
        n: None if b is None else _tensor(n, b, device, dtype)
        for n, b in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o))
    }
    shapes = check_layer_shapes(
        tuple(x_q.shape), tuple(x_kv.shape), {n: tuple(w.shape) for n, w in weights.items()},
        {n: None if b is None else tuple(b.shape) for n, b in biases.items()}, num_heads, num_kv_heads,
    )  # fmt: skip
    rotary = None if rope is None else check_rope(rope, shapes.features)
    check_return_cache(return_cache)
    past = {
        n: None if p is None else _tensor(n, p, device, dtype)
        for n, p in (("past_key", past_key), ("past_value", past_value))
    }
    cached = check_past(
        *(None if p is None else tuple(p.shape) for p in past.values()), tuple(x_q.shape), shapes
    )  # P
    mask = None if attn_mask is None else to_mask_array(attn_mask)
    if mask is not None and mask.dtype != bool:
        mask = mask.astype(np.float64)
    batch = tuple(x_q.shape[:-2])

    # Step 1: project.
    q = F.linear(x_q, weights["w_q"], biases["b_q"])  # [B..., Lq, Hq·E]
    k = F.linear(x_kv, weights["w_k"], biases["b_k"])  # [B..., Lk, Hkv·E]
    v = F.linear(x_kv, weights["w_v"], biases["b_v"])  # [B..., Lk, Hkv·Ev]

    # Step 2: split heads.
    q = q.unflatten(-1, (num_heads, shapes.features)).transpose(-2, -3)  # [B..., Hq, Lq, E]
    k = k.unflatten(-1, (num_kv_heads, shapes.features)).transpose(-2, -3)  # [B..., Hkv, Lk, E]
    v = v.unflatten(-1, (num_kv_heads, shapes.value_features)).transpose(-2, -3)  # [B..., Hkv, Lk, Ev]

    # Step 3: rotate, at positions P..P+L-1.
    if rotary is not None:
        positions = torch.arange(cached, cached + x_q.shape[-2], device=device)  # [L]
        q = _rotate(q, positions, rotary)  # [B..., Hq, Lq, E]
        k = _rotate(k, positions, rotary)  # [B..., Hkv, Lk, E]
    # The cache: the earlier keys and values, then these.
    if past["past_key"] is not None:
        k = torch.cat([past["past_key"], k], dim=-2)  # [B..., Hkv, P+Lk, E]
        v = torch.cat([past["past_value"], v], dim=-2)  # [B..., Hkv, P+Lk, Ev]

    # Step 4: attend, with the torch port's core.
    steps = torch_port.attention_steps(
        q, k, v, mask, is_causal=is_causal, scale=scale, enable_gqa=num_kv_heads != num_heads,
        softcap=softcap, query_offset=cached, device=device, dtype=dtype,
    )  # fmt: skip
    heads = steps.output  # [B..., Hq, Lq, Ev]

    # Step 5: merge heads.
    merged = heads.transpose(-2, -3).reshape(*batch, x_q.shape[-2], num_heads * shapes.value_features)

    # Step 6: out-project.
    output = F.linear(merged, weights["w_o"], biases["b_o"])  # [B..., Lq, Dout]
    if need_weights or return_cache:
        return LayerResult(
            output=output,
            weights=steps.weights if need_weights else None,
            present_key=k if return_cache else None,
            present_value=v if return_cache else None,
        )
    return output


def from_torch_mha(module: torch.nn.MultiheadAttention) -> dict:
    """An nn.MultiheadAttention's weights as this layer's arguments (w_q ... b_o, num_heads):
    its packed in_proj_weight [3E, E] is q | k | v by rows; kdim/vdim modules keep three."""
    e = module.embed_dim
    if module.in_proj_weight is not None:
        w_q, w_k, w_v = module.in_proj_weight.detach().split(e)
    else:
        w_q, w_k, w_v = (getattr(module, f"{n}_proj_weight").detach() for n in "qkv")
    b_q = b_k = b_v = None
    if module.in_proj_bias is not None:
        b_q, b_k, b_v = module.in_proj_bias.detach().split(e)
    b_o = None if module.out_proj.bias is None else module.out_proj.bias.detach()
    return {
        "w_q": w_q, "w_k": w_k, "w_v": w_v, "w_o": module.out_proj.weight.detach(),
        "b_q": b_q, "b_k": b_k, "b_v": b_v, "b_o": b_o, "num_heads": module.num_heads,
    }  # fmt: skip
