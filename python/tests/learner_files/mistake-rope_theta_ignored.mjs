// A learner's layer and RoPE with one mistake: rope_theta_ignored.
import { makeLayer, makeRotary } from "./layer-base.mjs";

export const multiHeadAttention = makeLayer("rope_theta_ignored");
export const applyRotary = makeRotary("rope_theta_ignored");
