"""A learner's layer and RoPE with one mistake: out_projection_forgotten."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("out_projection_forgotten")
apply_rotary = make_rotary("out_projection_forgotten")
