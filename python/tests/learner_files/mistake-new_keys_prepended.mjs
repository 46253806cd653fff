// A learner's layer and RoPE with one mistake: new_keys_prepended.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("new_keys_prepended");
export const applyRotary = makeRotary("new_keys_prepended");
