"""A learner's layer and RoPE with one mistake: heads_in_wrong_order."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("heads_in_wrong_order")
apply_rotary = make_rotary("heads_in_wrong_order")
