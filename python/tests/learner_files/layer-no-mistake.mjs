// A learner's layer and RoPE with no mistake: passes the layer's and RoPE's levels.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer();
export const applyRotary = makeRotary();
