"""A learner file with one mistake: float_mask_as_boolean."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("float_mask_as_boolean")
