"""A learner file with one mistake: kv_seqlen_one_past."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("kv_seqlen_one_past")
