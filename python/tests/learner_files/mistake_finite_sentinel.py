"""A learner file with one mistake: finite_sentinel."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("finite_sentinel")
