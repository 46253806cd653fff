"""A learner file with one mistake: causal_ignored."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("causal_ignored")
