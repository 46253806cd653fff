// A learner file with one mistake: weights_times_key.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("weights_times_key");
