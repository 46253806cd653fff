// A learner file with one mistake: causal_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("causal_ignored");
