// A learner's layer and RoPE with one mistake: split_without_transpose.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("split_without_transpose");
export const applyRotary = makeRotary("split_without_transpose");
