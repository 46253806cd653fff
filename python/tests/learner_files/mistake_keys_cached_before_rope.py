"""A learner's layer and RoPE with one mistake: keys_cached_before_rope."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("keys_cached_before_rope")
apply_rotary = make_rotary("keys_cached_before_rope")
