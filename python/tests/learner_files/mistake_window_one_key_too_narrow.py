"""A learner file with one mistake: window_one_key_too_narrow."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("window_one_key_too_narrow")
