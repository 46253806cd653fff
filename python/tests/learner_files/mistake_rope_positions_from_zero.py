"""A learner's layer and RoPE with one mistake: rope_positions_from_zero."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("rope_positions_from_zero")
apply_rotary = make_rotary("rope_positions_from_zero")
