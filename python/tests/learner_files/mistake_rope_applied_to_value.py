"""A learner's layer and RoPE with one mistake: rope_applied_to_value."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("rope_applied_to_value")
apply_rotary = make_rotary("rope_applied_to_value")
