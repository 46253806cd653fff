// A learner's layer and RoPE with one mistake: weights_not_transposed.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("weights_not_transposed");
export const applyRotary = makeRotary("weights_not_transposed");
