// A learner's layer and RoPE with one mistake: merge_without_transpose.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("merge_without_transpose");
export const applyRotary = makeRotary("merge_without_transpose");
