"""A learner file that refuses a rank-1 query on purpose and crashes where numpy cannot read an
input (a string in a query: numpy's own error), and otherwise returns zeros of the right shape."""

import numpy as np


def scaled_dot_product_attention(query, key, value):
    q = np.array(query, dtype=np.float64)  # numpy raises on a string: a crash, not a refusal
    if q.ndim < 2:
        raise ValueError(f"query must have at least 2 dimensions, got {q.ndim}")
    return np.zeros((q.shape[0], len(value[0]))).tolist()
