"""A learner's multi-head attention layer and RoPE in numpy, with one mistake switched on by name,
for the tests of `attention-port check`'s layer, RoPE and cache levels: each layer mistake file calls
make_layer("<mistake>") and make_rotary("<mistake>"). The attention inside is learner_base.py's, a
learner's own; nothing here is the project's layer."""

import numpy as np
from learner_base import make_attention

attend = make_attention()
attend_weights = make_attention("weights_returned")  # the same core, its weights instead


def make_rotary(mistake=None):
    def apply_rotary(x, positions, theta=10000.0, rotary_dim=None, interleaved=False):
        x, positions = np.asarray(x, dtype=np.float64), np.asarray(positions, dtype=np.float64)
        features = x.shape[-1]
        dim = features if rotary_dim is None or mistake == "rope_rotary_dim_ignored" else rotary_dim
        theta = 10000.0 if mistake == "rope_theta_ignored" else theta
        if dim % 2 or not 2 <= dim <= features:
            raise ValueError(f"rotary_dim must be even, from 2 to {features}, got {dim}")
        if positions.shape[-1] != x.shape[-2]:
            raise ValueError(f"{positions.shape[-1]} positions for {x.shape[-2]} rows")
        half = dim // 2
        denominator = features if mistake == "rope_denominator_e" else dim
        two = 1.0 if mistake == "rope_exponent_halved" else 2.0  # the exponent -2i/d
        angle = positions[..., :, None] * theta ** (-two * np.arange(half) / denominator)
        if positions.ndim > 1:
            angle = angle[..., None, :, :]  # every head of a batch row alike
        if interleaved != (mistake == "rope_conventions_swapped"):
            first, second = np.arange(0, dim, 2), np.arange(1, dim, 2)
        else:
            first, second = np.arange(half), np.arange(half, dim)
        out = x.copy()
        out[..., first] = x[..., first] * np.cos(angle) - x[..., second] * np.sin(angle)
        out[..., second] = x[..., first] * np.sin(angle) + x[..., second] * np.cos(angle)
        return out

    return apply_rotary


def make_layer(mistake=None):
    rotary = make_rotary(mistake)

    def linear(x, w, b):
        y = x @ (w if mistake == "weights_not_transposed" else w.T)
        return y if b is None else y + b

    def split(x, heads):
        if mistake == "split_without_transpose":
            return x.reshape(*x.shape[:-2], heads, x.shape[-2], -1)
        if mistake == "heads_split_on_wrong_axis":
            return np.moveaxis(x.reshape(*x.shape[:-1], -1, heads), -1, -3)  # [L, E, H], heads first
        return np.swapaxes(x.reshape(*x.shape[:-1], heads, -1), -2, -3)

    def merge(x):
        heads, length, features = x.shape[-3:]
        if mistake == "heads_in_wrong_order":
            x = x[..., ::-1, :, :]
        if mistake != "merge_without_transpose":
            x = np.swapaxes(x, -2, -3)
        return x.reshape(*x.shape[:-3], length, heads * features)

    def multi_head_attention(
        x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None, num_heads,
        num_kv_heads=None, attn_mask=None, is_causal=False, scale=None, softcap=0.0, rope=None,
        need_weights=False, past_key=None, past_value=None, return_cache=False, window=None,
        sink_tokens=0, sink_logits=None, kv_seqlen=None,
    ):  # fmt: skip
        if rope is not None and x_kv is not None:
            raise ValueError("rope needs self-attention")
        if mistake == "rope_ignored":
            rope = None  # taken, never read
        if (past_key is None) != (past_value is None):
            raise ValueError("past_key and past_value come together")
        kv_heads = num_kv_heads or num_heads
        x_q = np.asarray(x_q, dtype=np.float64)
        x_kv = x_q if x_kv is None else np.asarray(x_kv, dtype=np.float64)
        w_q, w_k, w_v, w_o = (np.asarray(w, dtype=np.float64) for w in (w_q, w_k, w_v, w_o))
        b_q, b_k, b_v, b_o = (
            None if b is None else np.asarray(b, dtype=np.float64) for b in (b_q, b_k, b_v, b_o)
        )
        outs = (lambda w: w.shape[1]) if mistake == "weights_not_transposed" else (lambda w: w.shape[0])
        if outs(w_q) % num_heads or outs(w_k) != kv_heads * (outs(w_q) // num_heads):
            raise ValueError("the weights' outputs do not split into the heads")
        q, k, v = linear(x_q, w_q, b_q), linear(x_kv, w_k, b_k), linear(x_kv, w_v, b_v)
        q, k, v = split(q, num_heads), split(k, kv_heads), split(v, kv_heads)
        cached = 0  # P earlier positions in the cache: its shape is the keys' but for the rows
        for name, past, x in (("past_key", past_key, k), ("past_value", past_value, v)):
            if past is not None:
                past = np.asarray(past, dtype=np.float64)
                if past.ndim != x.ndim or past.shape[:-2] != x.shape[:-2] or past.shape[-1] != x.shape[-1]:
                    raise ValueError(f"{name} {past.shape} does not fit the layer's {x.shape}")
                cached = 0 if mistake == "past_ignored" else past.shape[-2]  # taken, never read
        unturned = k  # the new keys as projected
        if rope is not None:
            start = 0 if mistake == "rope_positions_from_zero" else cached
            positions = np.arange(start, start + x_q.shape[-2])
            q, k = rotary(q, positions, **rope), rotary(k, positions, **rope)
            if mistake == "rope_applied_to_value":
                v = rotary(v, positions, **rope)
        past_k, past_v = (
            None if p is None else np.asarray(p, dtype=np.float64) for p in (past_key, past_value)
        )
        cache_key = unturned if mistake == "keys_cached_before_rope" else None  # None: the keys attended
        if past_key is not None and mistake != "past_ignored":
            ahead = mistake == "new_keys_prepended"  # the new rows first
            k = np.concatenate([k, past_k] if ahead else [past_k, k], axis=-2)
            v = np.concatenate([v, past_v] if ahead else [past_v, v], axis=-2)
            if cache_key is not None:
                cache_key = np.concatenate([past_k, cache_key], axis=-2)
        cache_key = k if cache_key is None else cache_key
        offset = 0 if mistake == "cache_offset_ignored" else cached  # the new rows sit after the cache
        if mistake == "scaled_by_model_dim" and scale is None:
            scale = 1 / np.sqrt(x_q.shape[-1])  # the layer's D, not the head's E
        core = dict(is_causal=is_causal, scale=scale, softcap=softcap, enable_gqa=kv_heads != num_heads)
        core["query_offset"] = offset
        # the window, the sinks and the key counts: the core's, passed on as given
        core.update(window=window, sink_tokens=sink_tokens, sink_logits=sink_logits, kv_seqlen=kv_seqlen)
        heads = np.asarray(attend(q, k, v, attn_mask, **core))
        output = merge(heads) if mistake == "out_projection_forgotten" else linear(merge(heads), w_o, b_o)
        if not need_weights and not return_cache:
            return output
        result = {"output": output}
        if need_weights:
            result["weights"] = attend_weights(q, k, v, attn_mask, **core)
        if return_cache:
            result["present_key"], result["present_value"] = cache_key, v
            if mistake == "cache_expanded_to_query_heads":  # each query head's copy kept
                group = num_heads // kv_heads
                result["present_key"] = np.repeat(cache_key, group, axis=-3)
                result["present_value"] = np.repeat(v, group, axis=-3)
        return result

    return multi_head_attention
