// A learner's layer and RoPE with one mistake: cache_expanded_to_query_heads.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("cache_expanded_to_query_heads");
export const applyRotary = makeRotary("cache_expanded_to_query_heads");
