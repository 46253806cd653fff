// A learner's layer and RoPE with one mistake: cache_offset_ignored.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("cache_offset_ignored");
export const applyRotary = makeRotary("cache_offset_ignored");
