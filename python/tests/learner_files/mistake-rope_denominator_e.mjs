// A learner's layer and RoPE with one mistake: rope_denominator_e.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_denominator_e");
export const applyRotary = makeRotary("rope_denominator_e");
