"""A learner file with one mistake: sink_given_a_value."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("sink_given_a_value")
