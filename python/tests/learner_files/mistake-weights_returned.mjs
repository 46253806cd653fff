// A learner file with one mistake: weights_returned.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("weights_returned");
