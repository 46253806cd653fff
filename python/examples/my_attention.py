"""My attention: scaled dot-product attention in its simplest form, the five steps of

    attention(Q, K, V) = softmax(Q · Kᵀ / √d_k) · V

on rank-2 inputs ([L, E] nested lists) with no options. A starting point for your own
implementation: check it against the project's fixtures, level by level,

    attention-port check python/examples/my_attention.py

then copy it and grow it one level at a time (docs/learn.md walks the levels).
"""

import numpy as np


def softmax(x):
    """Each row of x -> weights that are positive and sum to 1."""
    # Subtracting the row's max changes nothing mathematically, but keeps exp() from overflowing:
    # exp(1000) is inf in float64, and inf / inf is NaN.
    x = x - np.max(x, axis=-1, keepdims=True)
    exps = np.exp(x)
    return exps / np.sum(exps, axis=-1, keepdims=True)


def scaled_dot_product_attention(query, key, value):
    """query [Lq, E], key [Lk, E], value [Lk, Ev] -> output [Lq, Ev], as nested lists."""
    Q = np.array(query, dtype=np.float64)  # [Lq, E]
    K = np.array(key, dtype=np.float64)  # [Lk, E]
    V = np.array(value, dtype=np.float64)  # [Lk, Ev]
    d_k = Q.shape[-1]  # E, the feature size of queries and keys

    # Step 1: scores. How well each query matches each key: one dot product per pair.
    scores = Q @ K.T  # [Lq, E] @ [E, Lk] -> [Lq, Lk]

    # Step 2: scale. A dot product of d_k terms grows like √d_k; dividing by it keeps the scores'
    # spread near 1, so softmax does not saturate on one key.
    logits = scores / np.sqrt(d_k)  # [Lq, Lk]

    # Step 3: mask. Nothing to mask yet: the masks' levels add this step (a disallowed cell's logit
    # becomes -inf, so its weight is exactly 0).

    # Step 4: weights. Softmax over each row: each query's weights over the keys sum to 1.
    weights = softmax(logits)  # [Lq, Lk]

    # Step 5: output. Each query's output is the weighted average of the value rows.
    output = weights @ V  # [Lq, Lk] @ [Lk, Ev] -> [Lq, Ev]
    return output.tolist()


if __name__ == "__main__":
    # The tutorial's first example.
    Q = [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
    V = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    print(scaled_dot_product_attention(Q, Q, V))
