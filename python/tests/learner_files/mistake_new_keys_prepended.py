"""A learner's layer and RoPE with one mistake: new_keys_prepended."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("new_keys_prepended")
apply_rotary = make_rotary("new_keys_prepended")
