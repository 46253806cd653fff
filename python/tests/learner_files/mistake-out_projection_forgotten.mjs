// A learner's layer and RoPE with one mistake: out_projection_forgotten.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("out_projection_forgotten");
export const applyRotary = makeRotary("out_projection_forgotten");
