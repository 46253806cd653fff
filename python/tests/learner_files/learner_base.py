"""A learner's attention in numpy, every rank and option, with one mistake switched on by name, for
the tests of `attention-port check`: each mistake file calls make_attention("<mistake>"). Written
independently of the project's ports and of mistakes.py, as a learner would write it."""

import numpy as np


def make_attention(mistake=None):
    def scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=None,
        is_causal=False,
        scale=None,
        enable_gqa=False,
        softcap=0.0,
        query_offset=0,
    ):
        q, k, v = (np.asarray(x, dtype=np.float64) for x in (query, key, value))
        if enable_gqa and q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
            heads = np.arange(q.shape[-3])  # [Hq]
            heads = heads % k.shape[-3] if mistake == "gqa_tiled" else heads // (q.shape[-3] // k.shape[-3])
            k, v = k[..., heads, :, :], v[..., heads, :, :]
        kt = k if mistake == "key_not_transposed" else np.swapaxes(k, -1, -2)
        if mistake == "key_all_axes_transposed":
            kt = k.T  # the rank-2 habit: on a rank-3 key it reverses every axis
        scores = k @ np.swapaxes(q, -1, -2) if mistake == "key_times_query" else q @ kt
        logits = scores * (1 / np.sqrt(q.shape[-1]) if scale is None else scale)  # [..., Lq, Lk]
        if mistake == "softcap_ignored":
            pass
        elif softcap > 0 and mistake == "softcap_without_divide":
            logits = softcap * np.tanh(logits)
        elif softcap > 0 and mistake == "softcap_without_multiply":
            logits = np.tanh(logits / softcap)
        elif softcap > 0:
            logits = softcap * np.tanh(logits / softcap)
        allowed = np.ones(logits.shape, dtype=bool)
        if is_causal and mistake != "causal_ignored":
            diagonal = query_offset - 1 if mistake == "causal_diagonal_hidden" else query_offset
            if mistake == "query_offset_ignored":
                diagonal = 0
            elif mistake == "query_offset_off_by_one" and query_offset > 0:
                diagonal = query_offset + 1
            allowed &= np.tri(logits.shape[-2], logits.shape[-1], diagonal, dtype=bool)
        if attn_mask is not None:
            mask = np.asarray(attn_mask)
            if mask.dtype == bool:
                allowed &= mask
            elif mistake == "float_mask_as_boolean":
                allowed &= mask.astype(bool)
            else:
                logits = logits + mask
        logits = np.where(allowed, logits, -1e9 if mistake == "finite_sentinel" else -np.inf)
        top = logits.max(axis=-1, keepdims=True)
        exps = np.exp(logits - np.where(np.isfinite(top), top, 0.0))  # a fully-masked row: all 0
        total = exps.sum(axis=-1, keepdims=True)
        weights = np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
        if mistake == "weights_returned":
            return weights.tolist()
        return (weights @ (k if mistake == "weights_times_key" else v)).tolist()

    return scaled_dot_product_attention
