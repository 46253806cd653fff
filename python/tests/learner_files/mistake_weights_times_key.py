"""A learner file with one mistake: weights_times_key."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("weights_times_key")
