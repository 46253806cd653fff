// A learner's layer and RoPE with one mistake: keys_cached_before_rope.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("keys_cached_before_rope");
export const applyRotary = makeRotary("keys_cached_before_rope");
