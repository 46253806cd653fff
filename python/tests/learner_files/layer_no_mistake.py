"""A learner's layer and RoPE with no mistake: passes the layer's and RoPE's levels."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer()
apply_rotary = make_rotary()
