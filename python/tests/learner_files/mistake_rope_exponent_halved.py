"""A learner's layer and RoPE with one mistake: rope_exponent_halved."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("rope_exponent_halved")
apply_rotary = make_rotary("rope_exponent_halved")
