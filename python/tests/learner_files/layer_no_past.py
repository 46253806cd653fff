"""A learner's layer and RoPE written before the KV cache: its layer has no past_key, past_value or
return_cache parameter, so check leaves the cache's level not attempted and passes the rest."""

from layer_base import make_layer, make_rotary

_layer = make_layer()
apply_rotary = make_rotary()


def multi_head_attention(
    x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None, b_o=None, num_heads,
    num_kv_heads=None, attn_mask=None, is_causal=False, scale=None, softcap=0.0, rope=None,
    need_weights=False, window=None, sink_tokens=0, sink_logits=None, kv_seqlen=None,
):  # fmt: skip
    return _layer(
        x_q, x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, b_q=b_q, b_k=b_k, b_v=b_v, b_o=b_o,
        num_heads=num_heads, num_kv_heads=num_kv_heads, attn_mask=attn_mask, is_causal=is_causal,
        scale=scale, softcap=softcap, rope=rope, need_weights=need_weights, window=window,
        sink_tokens=sink_tokens, sink_logits=sink_logits, kv_seqlen=kv_seqlen,
    )  # fmt: skip
