// A learner file with one mistake: mask_inverted.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("mask_inverted");
