"""A learner's layer and RoPE with one mistake: split_without_transpose."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("split_without_transpose")
apply_rotary = make_rotary("split_without_transpose")
