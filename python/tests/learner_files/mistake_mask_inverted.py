"""A learner file with one mistake: a boolean mask read as true = blocked (rank 2, attn_mask only)."""

import math


def scaled_dot_product_attention(query, key, value, attn_mask=None):
    scale = 1 / math.sqrt(len(query[0]))
    output = []
    for i, q in enumerate(query):
        logits = []
        for j, k in enumerate(key):
            s = sum(a * b for a, b in zip(q, k, strict=True)) * scale
            if attn_mask is not None and attn_mask[i][j] is True:
                s = -math.inf
            elif attn_mask is not None and not isinstance(attn_mask[i][j], bool):
                s += attn_mask[i][j]
            logits.append(s)
        top = max(logits)
        exps = [0.0 if top == -math.inf else math.exp(x - top) for x in logits]
        total = sum(exps) or 1.0
        weights = [e / total for e in exps]
        columns = range(len(value[0]))
        output.append([sum(w * v[c] for w, v in zip(weights, value, strict=True)) for c in columns])
    return output
