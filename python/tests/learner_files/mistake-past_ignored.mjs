// A learner's layer and RoPE with one mistake: past_ignored.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("past_ignored");
export const applyRotary = makeRotary("past_ignored");
