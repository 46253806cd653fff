// A learner's layer and RoPE with one mistake: rope_applied_to_value.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_applied_to_value");
export const applyRotary = makeRotary("rope_applied_to_value");
