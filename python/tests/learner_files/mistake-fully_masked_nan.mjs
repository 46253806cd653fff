// A learner file with one mistake: fully_masked_nan.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("fully_masked_nan");
