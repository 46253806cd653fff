"""A learner file with one mistake: softcap_ignored."""

from learner_base import make_attention

scaled_dot_product_attention = make_attention("softcap_ignored")
