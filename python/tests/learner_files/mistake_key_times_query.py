"""A learner file with one mistake: key_times_query."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("key_times_query")
