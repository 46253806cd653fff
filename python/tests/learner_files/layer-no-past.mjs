// A learner's layer and RoPE written before the KV cache: its layer reads no pastKey, pastValue or
// returnCache, so check leaves the cache's level not attempted and passes the rest.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer(null, { cache: false });
export const applyRotary = makeRotary();
