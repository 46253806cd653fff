"""A learner's layer and RoPE with one mistake: past_ignored."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("past_ignored")
apply_rotary = make_rotary("past_ignored")
