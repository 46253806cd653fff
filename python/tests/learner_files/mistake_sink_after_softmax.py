"""A learner file with one mistake: sink_after_softmax."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("sink_after_softmax")
