// A learner's layer and RoPE with one mistake: scaled_by_model_dim.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("scaled_by_model_dim");
export const applyRotary = makeRotary("scaled_by_model_dim");
