"""A learner file that doubles the key in place to fold a factor into it, and halves it back before
it returns (exact in binary, so the caller's key ends as it was). With separate arrays that is
right; given one array as query and key, as scaled_dot_product_attention(Q, Q, V), the query is
doubled too, and the scores come out twice as large."""

from learner_base import make_attention

attention = make_attention()


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    factor = 1 / len(query[0]) ** 0.5 if scale is None else scale
    for row in key:
        row[:] = [x * 2 for x in row]
    output = attention(query, key, value, attn_mask, is_causal, scale=factor / 2)
    for row in key:
        row[:] = [x / 2 for x in row]
    return output
