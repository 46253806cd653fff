"""A learner's layer and RoPE with one mistake: heads_split_on_wrong_axis."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("heads_split_on_wrong_axis")
apply_rotary = make_rotary("heads_split_on_wrong_axis")
