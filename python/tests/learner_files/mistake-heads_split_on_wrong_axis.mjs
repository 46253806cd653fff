// A learner's layer and RoPE with one mistake: heads_split_on_wrong_axis.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("heads_split_on_wrong_axis");
export const applyRotary = makeRotary("heads_split_on_wrong_axis");
