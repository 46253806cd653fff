"""The multi-head attention layer and RoPE in torch: layer.py's six steps over a torch core, with
F.linear for the projections and the torch port's attention core (torch_port.attention_steps) for
every head.

The same contract (docs/design.md), the same checks and messages (layer_inputs.py), in any torch
dtype and device. `from_torch_mha` reads an nn.MultiheadAttention's weights into it; with
adapters.torch_mha_mask for its masks, the two agree wherever nn.MultiheadAttention itself is
defined (its need_weights path gives NaN for a fully-masked row, where this layer gives b_o).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attention_port import torch_port
from attention_port.inputs import DEFAULT_MEMORY_LIMIT, to_array
from attention_port.layer import apply_rotary_with, layer_with

__all__ = ["TorchCore", "apply_rotary", "from_torch_mha", "multi_head_attention"]


class TorchCore:
    """torch in `dtype` on `device` (float64 on the CPU unless told otherwise), with torch_port's
    attention core."""

    def __init__(self, device=None, dtype=None):
        self.device = torch.device(device or "cpu")
        self.dtype = dtype or torch.float64

    def array(self, name: str, x, memory_limit: float = DEFAULT_MEMORY_LIMIT) -> torch.Tensor:
        if isinstance(x, torch.Tensor):
            return x.to(self.device, self.dtype)
        return torch.as_tensor(to_array(name, x, memory_limit), device=self.device).to(self.dtype)

    def positions(self, name: str, x) -> torch.Tensor:
        return torch.as_tensor(to_array(name, x), device=self.device)  # float64

    def arange(self, start: int, stop: int) -> torch.Tensor:
        return torch.arange(start, stop, dtype=torch.float64, device=self.device)

    def linear(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return F.linear(x, weight, bias)

    def cos_sin(self, angle: torch.Tensor, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # The angles stay in float64 whatever x's dtype (a float16 phase is wrong past a few
        # hundred positions); only cos and sin are rounded to x's dtype.
        return torch.cos(angle).to(like.dtype), torch.sin(angle).to(like.dtype)

    def copy(self, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    def concatenate(self, past: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([past, x], dim=-2)

    def attention_steps(self, query, key, value, attn_mask, **options) -> torch_port.AttentionSteps:
        return torch_port.attention_steps(
            query, key, value, attn_mask, **options, device=self.device, dtype=self.dtype
        )


def apply_rotary(x, positions, *, theta=10000.0, rotary_dim=None, interleaved=False, device=None, dtype=None):
    """layer.apply_rotary in torch (float64 on the CPU unless told otherwise)."""
    core = TorchCore(device, dtype)
    return apply_rotary_with(core, x, positions, theta=theta, rotary_dim=rotary_dim, interleaved=interleaved)


def multi_head_attention(
    x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None, num_heads,
    num_kv_heads=None, attn_mask=None, is_causal=False, scale=None, softcap=0.0, window=None, sink_tokens=0,
    sink_logits=None, kv_seqlen=None, rope=None, need_weights=False, past_key=None, past_value=None,
    return_cache=False, memory_limit=DEFAULT_MEMORY_LIMIT, device=None, dtype=None,
):  # fmt: skip
    """layer.multi_head_attention in torch: the same six steps, in `dtype` on `device`; the cache
    (past_key, past_value, present_key, present_value) in that dtype too, copied bit for bit."""
    return layer_with(TorchCore(device, dtype))(
        x_q, x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, b_q=b_q, b_k=b_k, b_v=b_v, b_o=b_o,
        num_heads=num_heads, num_kv_heads=num_kv_heads, attn_mask=attn_mask, is_causal=is_causal,
        scale=scale, softcap=softcap, window=window, sink_tokens=sink_tokens, sink_logits=sink_logits,
        kv_seqlen=kv_seqlen, rope=rope, need_weights=need_weights, past_key=past_key,
        past_value=past_value, return_cache=return_cache, memory_limit=memory_limit,
    )  # fmt: skip


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
