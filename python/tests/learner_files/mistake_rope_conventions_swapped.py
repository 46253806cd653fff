"""A learner's layer and RoPE with one mistake: rope_conventions_swapped."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("rope_conventions_swapped")
apply_rotary = make_rotary("rope_conventions_swapped")
