// A learner's layer and RoPE with one mistake: rope_positions_from_zero.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_positions_from_zero");
export const applyRotary = makeRotary("rope_positions_from_zero");
