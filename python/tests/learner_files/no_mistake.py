"""A learner file without a mistake in its attention (numpy, every rank and option); it checks no input."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention()
