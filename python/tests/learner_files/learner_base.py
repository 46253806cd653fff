"""A learner's attention in numpy, every rank and option, with one mistake switched on by name, for
the tests of `attention-port check`: each mistake file calls make_attention("<mistake>"). Written
independently of the project's ports and of mistakes.py, as a learner would write it."""

import numpy as np


def make_attention(mistake=None):
    def with_sink(logits, sink_logits, rank):
        """The softmax with one sink logit per query head beside each row: the keys' weights, and
        the sink's own (it has no value)."""
        sink = np.asarray(sink_logits, dtype=np.float64).reshape((-1, 1, 1) if rank >= 3 else (1, 1))
        top = logits.max(axis=-1, keepdims=True, initial=-np.inf)  # [..., Lq, 1]
        # No key to see: weights and output 0, whatever the sink (unless it is taken for a key).
        empty = (top == -np.inf) & (mistake != "sink_given_a_value")
        if mistake != "sink_left_out_of_max":
            top = np.maximum(top, sink)
        shift = np.where(empty, 0.0, top)
        with np.errstate(all="ignore"):
            exps, sink_exp = np.exp(logits - shift), np.exp(sink - shift)
            if mistake == "sink_after_softmax":  # the keys' softmax first, then the sink beside it
                total = exps.sum(axis=-1, keepdims=True)
                exps, total = exps / np.where(total > 0, total, 1.0), 1 + np.exp(sink)
                sink_exp = np.where(np.any(logits > -np.inf, axis=-1, keepdims=True), np.exp(sink), 0.0)
            else:
                total = exps.sum(axis=-1, keepdims=True) + sink_exp
            return np.where(empty, 0.0, exps / total), np.where(empty, 0.0, sink_exp / total)

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
        window=None,
        sink_tokens=0,
        sink_logits=None,
        kv_seqlen=None,
    ):
        q, k, v = (np.asarray(x, dtype=np.float64) for x in (query, key, value))

        def per_sequence(x):  # [B...] (the leading dims) as [B..., 1, ..., 1]; a number stays one
            x = np.asarray(x)
            return x.reshape(x.shape + (1,) * (max(q.ndim, k.ndim) - x.ndim)) if x.ndim else x

        query_offset = per_sequence(query_offset)
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
            allowed &= np.arange(logits.shape[-1]) <= np.arange(logits.shape[-2])[:, None] + diagonal
        rows, keys = np.arange(logits.shape[-2])[:, None], np.arange(logits.shape[-1])  # [Lq, 1], [Lk]
        if window is not None:
            left, right = window
            at = rows if mistake == "window_top_left" else rows + query_offset  # the rows' positions
            after_left = np.ones(np.broadcast_shapes(at.shape, keys.shape), dtype=bool)
            if left is not None:
                shift = {"window_one_key_too_wide": 1, "window_one_key_too_narrow": -1}.get(mistake, 0)
                after_left = keys >= at - (left + shift)
            allowed &= after_left | (keys < sink_tokens)  # sink keys: whatever the left side says
            if right is not None:
                allowed &= keys <= at + right
        if kv_seqlen is not None and mistake != "kv_seqlen_ignored":
            counts = per_sequence(kv_seqlen)
            counts = counts - 1 if mistake == "kv_seqlen_one_short" else counts
            allowed &= keys <= counts if mistake == "kv_seqlen_one_past" else keys < counts
        if attn_mask is not None:
            mask = np.asarray(attn_mask)
            if mask.dtype == bool:
                allowed &= mask
            elif mistake == "float_mask_as_boolean":
                allowed &= mask.astype(bool)
            else:
                logits = logits + mask
        logits = np.where(allowed, logits, -1e9 if mistake == "finite_sentinel" else -np.inf)
        if sink_logits is None:
            top = logits.max(axis=-1, keepdims=True)
            exps = np.exp(logits - np.where(np.isfinite(top), top, 0.0))  # a fully-masked row: all 0
            total = exps.sum(axis=-1, keepdims=True)
            weights = np.divide(exps, total, out=np.zeros_like(exps), where=total > 0)
        else:
            weights, sink_weight = with_sink(logits, sink_logits, q.ndim)
        if mistake == "weights_returned":
            return weights.tolist()
        output = weights @ (k if mistake == "weights_times_key" else v)
        if mistake == "sink_given_a_value" and sink_logits is not None:
            # the sink as one more key, with the first key's value
            output = output + sink_weight * v[..., :1, :]
        return output.tolist()

    return scaled_dot_product_attention
