"""Adapters onto the layer's contract (multi_head_attention's weights as nn.Linear stores them,
[out, in], and SDPA's mask polarity, true = may attend), from the layouts ported code meets:

  - from_conv1d: GPT-2's Conv1D and ONNX Runtime's contrib Attention store weights [in, out];
  - from_packed: torch's in_proj_weight [3E, D] and nanoGPT's c_attn hold q | k | v by rows;
  - torch_mha_mask: nn.MultiheadAttention's masks, whose boolean true means "ignore" (the
    opposite of SDPA's), key_padding_mask [N, S], a 3-D attn_mask [N·H, L, S], floats added.
"""

from __future__ import annotations

import numpy as np


def from_conv1d(weight, bias=None):
    """A weight stored [in, out] (y = x · W + b) as [out, in] (y = x · Wᵀ + b); the bias as it is."""
    return np.asarray(weight, dtype=np.float64).T.copy(), None if bias is None else np.asarray(
        bias, np.float64
    )


def from_packed(weight, bias=None, sizes=None) -> dict:
    """w_q, w_k, w_v (and b_q, b_k, b_v) from one packed weight whose rows are q | k | v, in
    thirds or in the row counts `sizes` (q, k, v) for GQA or Ev != E."""
    weight = np.asarray(weight, dtype=np.float64)
    rows = weight.shape[0]
    sizes = (rows // 3,) * 3 if sizes is None else tuple(sizes)
    cuts = np.cumsum(sizes)[:-1]
    w_q, w_k, w_v = np.split(weight, cuts)
    packed = {"w_q": w_q, "w_k": w_k, "w_v": w_v}
    if bias is not None:
        b_q, b_k, b_v = np.split(np.asarray(bias, dtype=np.float64), cuts)
        packed.update(b_q=b_q, b_k=b_k, b_v=b_v)
    return packed


def torch_mha_mask(attn_mask=None, key_padding_mask=None, *, num_heads: int):
    """nn.MultiheadAttention's attn_mask ([L, S] or [N·H, L, S]) and key_padding_mask ([N, S]) as
    one mask of this contract, broadcasting to [N, H, L, S] (or [L, S]): a boolean true there
    (ignore) becomes false here; float masks are added, as nn.MultiheadAttention adds them, and a
    boolean one meeting a float one becomes 0 / -inf first."""
    parts = []
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.ndim == 3:  # [N·H, L, S], batch-major then head
            mask = mask.reshape(-1, num_heads, *mask.shape[1:])  # [N, H, L, S]
        parts.append(mask)
    if key_padding_mask is not None:
        padding = np.asarray(key_padding_mask)
        parts.append(padding[:, None, None, :])  # [N, 1, 1, S]
    if not parts:
        return None
    if all(p.dtype == bool for p in parts):
        allowed = ~parts[0]
        for p in parts[1:]:
            allowed = allowed & ~p
        return allowed
    total = 0.0
    for p in parts:
        total = total + (np.where(p, -np.inf, 0.0) if p.dtype == bool else p.astype(np.float64))
    return total
