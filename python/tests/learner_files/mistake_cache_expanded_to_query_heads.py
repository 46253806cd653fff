"""A learner's layer and RoPE with one mistake: cache_expanded_to_query_heads."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("cache_expanded_to_query_heads")
apply_rotary = make_rotary("cache_expanded_to_query_heads")
