// A learner's layer and RoPE with one mistake: rope_conventions_swapped.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_conventions_swapped");
export const applyRotary = makeRotary("rope_conventions_swapped");
