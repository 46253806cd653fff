// A learner's layer and RoPE with one mistake: heads_in_wrong_order.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("heads_in_wrong_order");
export const applyRotary = makeRotary("heads_in_wrong_order");
