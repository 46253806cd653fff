"""A learner's layer and RoPE with one mistake: weights_not_transposed."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("weights_not_transposed")
apply_rotary = make_rotary("weights_not_transposed")
