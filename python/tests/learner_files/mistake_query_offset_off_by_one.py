"""A learner file with one mistake: query_offset_off_by_one."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("query_offset_off_by_one")
