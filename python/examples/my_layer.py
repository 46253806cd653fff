"""My layer: multi-head attention as a layer, around my own attention core, the six steps of

    output = concat_h attention(x_q W_qₕᵀ, x_kv W_kₕᵀ, x_kv W_vₕᵀ) W_oᵀ + b_o

(project, split heads, rotate, attend, merge heads, out-project), with the KV cache's way in and
out. Step 4 is your own core, my_attention.scaled_dot_product_attention (python/examples/
my_attention.py, grown through check's core levels; import your copy instead if you renamed
it); the other steps are stubs, each raising NotImplementedError until you write it. Check it:

    attention-port check python/examples/my_layer.py

Its first report says where to start: the layer's first level, with every case failing on the
first stub. Write the steps in order, running check after each (docs/learn.md walks them); the
project's own layer, python/attention_port/layer.py, does each step under the same label.

Shapes: x_q [B..., Lq, D], x_kv [B..., Lk, Dkv], w_q [Hq·E, D], w_k [Hkv·E, Dkv],
w_v [Hkv·Ev, Dkv], w_o [Dout, Hq·Ev] (stored [out, in], as nn.Linear stores them) ->
output [B..., Lq, Dout].
"""

import my_attention  # your attention core: step 4 calls it once for every head
import numpy as np


def project(x, weight, bias):
    """nn.Linear: x [..., in], weight [out, in], bias [out] or None -> x · weightᵀ + bias [..., out]."""
    raise NotImplementedError("step 1, project, is not written yet: x · weightᵀ + bias")


def split_heads(x, heads):
    """[B..., L, H·F] -> [B..., H, L, F]: feature h·F + f is head h's feature f (head-major)."""
    raise NotImplementedError("step 2, split heads, is not written yet: reshape, then swap L and H")


def apply_rotary(x, positions, theta=10000.0, rotary_dim=None, interleaved=False):
    """RoPE: x [B..., H, L, E], positions [L] or [B..., L] -> x with pair i of its first
    rotary_dim features (E when None) turned by position · theta^(-2i/rotary_dim); the pairs are
    (i, i + rotary_dim/2), or (2i, 2i+1) when interleaved. The rest pass through unchanged."""
    raise NotImplementedError("step 3, rotate, is not written yet: turn each feature pair by its angle")


def append_rows(past, x):
    """The cache in: past [B..., H, P, F] (P earlier positions), then x [B..., H, L, F]: [B..., H, P+L, F]."""
    raise NotImplementedError("the cache in is not written yet: the past's rows, then the new ones")


def merge_heads(x):
    """[B..., H, L, F] -> [B..., L, H·F]: the split undone, head h's feature f at h·F + f again."""
    raise NotImplementedError("step 5, merge heads, is not written yet: swap H and L back, then reshape")


def multi_head_attention(
    x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None, num_heads,
    num_kv_heads=None, attn_mask=None, is_causal=False, scale=None, softcap=0.0, window=None,
    sink_tokens=0, sink_logits=None, kv_seqlen=None, rope=None, need_weights=False, past_key=None,
    past_value=None, return_cache=False,
):  # fmt: skip
    """x_kv None is self-attention. past_key [B..., Hkv, P, E] and past_value [B..., Hkv, P, Ev]
    are the keys (after RoPE) and values of P earlier positions. Returns the output, or with
    need_weights or return_cache a dict: output, weights, present_key, present_value."""
    kv_heads = num_kv_heads or num_heads
    x_q = np.asarray(x_q, dtype=np.float64)  # [B..., Lq, D]
    x_kv = x_q if x_kv is None else np.asarray(x_kv, dtype=np.float64)  # [B..., Lk, Dkv]
    cached = 0 if past_key is None else np.shape(past_key)[-2]  # P

    # Step 1: project. Three learned linear maps read queries, keys and values out of the inputs.
    q = project(x_q, w_q, b_q)  # [B..., Lq, Hq·E]
    k = project(x_kv, w_k, b_k)  # [B..., Lk, Hkv·E]
    v = project(x_kv, w_v, b_v)  # [B..., Lk, Hkv·Ev]

    # Step 2: split heads. Each head's rows together, as the core wants them.
    q = split_heads(q, num_heads)  # [B..., Hq, Lq, E]
    k = split_heads(k, kv_heads)  # [B..., Hkv, Lk, E]
    v = split_heads(v, kv_heads)  # [B..., Hkv, Lk, Ev]

    # Step 3: rotate. RoPE turns queries and keys (never values) at their positions P, P+1, ...
    if rope is not None:
        positions = np.arange(cached, cached + x_q.shape[-2], dtype=np.float64)  # [Lq]
        q = apply_rotary(q, positions, **rope)  # [B..., Hq, Lq, E]
        k = apply_rotary(k, positions, **rope)  # [B..., Hkv, Lk, E]

    # The cache in: the earlier keys (already rotated) and values, then the new ones.
    if past_key is not None:
        k = append_rows(past_key, k)  # [B..., Hkv, P+Lk, E]
        v = append_rows(past_value, v)  # [B..., Hkv, P+Lk, Ev]

    # Step 4: attend. Your core, over every head at once (query head h reads key/value head
    # h // (Hq / Hkv)); row i is at position i + P. Only the options a call sets are passed, so a
    # core written before an option still runs the calls without it; the mask goes 4th, as check
    # gives it to your core. The window, the sinks and the key counts are the core's, handed on.
    options = {"is_causal": is_causal, "scale": scale, "softcap": softcap}
    options |= {
        "window": window,
        "sink_tokens": sink_tokens,
        "sink_logits": sink_logits,
        "kv_seqlen": kv_seqlen,
    }
    options |= {"enable_gqa": kv_heads != num_heads, "query_offset": cached}
    # (`is`, not `in`: a list or array of sink logits is set whatever its values.)
    unset = [x is None or x is False or (np.ndim(x) == 0 and x == 0) for x in options.values()]
    options = {name: value for (name, value), skip in zip(options.items(), unset, strict=True) if not skip}
    mask = () if attn_mask is None else (attn_mask,)
    heads = my_attention.scaled_dot_product_attention(q, k, v, *mask, **options)  # [B..., Hq, Lq, Ev]

    # Step 5: merge heads. The split undone: one row of Hq·Ev features for each position.
    merged = merge_heads(np.asarray(heads))  # [B..., Lq, Hq·Ev]

    # Step 6: out-project. One more linear map mixes the heads.
    output = project(merged, w_o, b_o)  # [B..., Lq, Dout]

    if not need_weights and not return_cache:
        return output
    # The cache out: what the next call takes as its past.
    result = {"output": output}
    if need_weights:
        raise NotImplementedError("need_weights is not written yet: each head's weights, from your core")
    if return_cache:
        result["present_key"], result["present_value"] = k, v  # [B..., Hkv, P+Lk, E], [B..., Hkv, P+Lk, Ev]
    return result
