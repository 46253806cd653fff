"""A learner's layer and RoPE with one mistake: scaled_by_model_dim."""

from layer_base import make_layer, make_rotary

multi_head_attention = make_layer("scaled_by_model_dim")
apply_rotary = make_rotary("scaled_by_model_dim")
