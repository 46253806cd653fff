"""A learner file with one mistake: window_top_left."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("window_top_left")
