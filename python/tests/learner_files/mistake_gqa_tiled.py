"""A learner file with one mistake: gqa_tiled."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("gqa_tiled")
