"""A learner file that scales the query in place before the scores: right answers, but the caller's
query is changed."""

import numpy as np
from learner_base import make_attention

attention = make_attention()


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    q = np.asarray(query, dtype=np.float64)
    factor = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    for row in query:  # nested lists: each row changed in place
        row[:] = [x * factor for x in row]
    return attention(query, key, value, attn_mask, is_causal, scale=1.0)
