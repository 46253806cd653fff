"""A learner's layer and RoPE with one mistake: rope_theta_ignored."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("rope_theta_ignored")
apply_rotary = make_rotary("rope_theta_ignored")
