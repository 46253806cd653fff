"""A learner's layer and RoPE with one mistake: cache_offset_ignored."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("cache_offset_ignored")
apply_rotary = make_rotary("cache_offset_ignored")
