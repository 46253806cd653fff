"""A learner file with one mistake: key_not_transposed."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("key_not_transposed")
