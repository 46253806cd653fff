"""A learner file with one mistake: softmax without subtracting the row max (rank 2, no options)."""

import numpy as np


def scaled_dot_product_attention(query, key, value):
    q, k, v = np.array(query), np.array(key), np.array(value)
    logits = q @ k.T / np.sqrt(q.shape[-1])
    with np.errstate(all="ignore"):
        exps = np.exp(logits)
        weights = exps / exps.sum(axis=-1, keepdims=True)
    return (weights @ v).tolist()
