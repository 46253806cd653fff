"""Attention computed in float32, as a WebGPU or WebAssembly kernel does: any number of batch and
head dims before [L, E], no options.

Every step rounds to float32, so its answers are up to a few float32 units off the exact ones.
float64's budget is far too tight for that; float32's is not:

    attention-port check python/examples/float32_attention.py --dtype float32   # passes
    attention-port check python/examples/float32_attention.py                   # fails at level 1
"""

import numpy as np


def _leaves(x):
    return [y for item in x for y in _leaves(item)] if isinstance(x, (list, tuple)) else [x]


def _float32(name, x):
    if any(isinstance(leaf, bool) for leaf in _leaves(x)):  # numpy would take True for 1.0
        raise TypeError(f"{name} holds a boolean, expected numbers")
    array = np.asarray(x)
    if array.dtype.kind not in "fiu":  # None, strings, ragged lists
        raise TypeError(f"{name} must be a tensor of numbers, got {array.dtype}")
    if array.ndim < 2:
        raise ValueError(f"{name} must have rank 2 or more, got shape {list(array.shape)}")
    return array.astype(np.float32)


def scaled_dot_product_attention(query, key, value):
    """query [..., Lq, E], key [..., Lk, E], value [..., Lk, Ev] -> output [..., Lq, Ev], in float32."""
    query, key, value = (_float32(n, x) for n, x in (("query", query), ("key", key), ("value", value)))
    if not query.ndim == key.ndim == value.ndim:
        raise ValueError("query, key and value must have the same rank")
    if query.shape[:-2] != key.shape[:-2] or key.shape[:-1] != value.shape[:-1]:
        raise ValueError(f"shapes differ: {list(query.shape)}, {list(key.shape)}, {list(value.shape)}")
    if query.shape[-1] != key.shape[-1] or query.shape[-1] == 0:
        raise ValueError("query and key must have the same number of features, at least one")
    scale = np.float32(1.0) / np.sqrt(np.float32(query.shape[-1]))
    logits = (query @ key.swapaxes(-1, -2)) * scale  # [..., Lq, Lk]
    if logits.shape[-1] == 0:  # no key: nothing to attend to, an output of +0.0
        return np.zeros((*logits.shape[:-1], value.shape[-1]), dtype=np.float32)
    exps = np.exp(logits - logits.max(axis=-1, keepdims=True))  # [..., Lq, Lk]
    weights = exps / exps.sum(axis=-1, keepdims=True)  # [..., Lq, Lk]
    return weights @ value  # [..., Lq, Ev]
