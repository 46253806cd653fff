// A learner's layer and RoPE with one mistake: rope_rotary_dim_ignored.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_rotary_dim_ignored");
export const applyRotary = makeRotary("rope_rotary_dim_ignored");
