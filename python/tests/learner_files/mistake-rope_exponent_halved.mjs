// A learner's layer and RoPE with one mistake: rope_exponent_halved.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_exponent_halved");
export const applyRotary = makeRotary("rope_exponent_halved");
