// A learner file with one mistake: causal_bottom_right.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("causal_bottom_right");
