// A learner file with no mistake: passes every level up to invalid input, which it does not check.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention();
