"""A learner file that transposes the key with .T, the rank-2 habit: right on [Lk, E], wrong on a
rank-3 key, where .T reverses every axis."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("key_all_axes_transposed")
