"""A learner file with one mistake: softcap_without_multiply."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("softcap_without_multiply")
