"""A learner file with one mistake: sink_left_out_of_max."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("sink_left_out_of_max")
