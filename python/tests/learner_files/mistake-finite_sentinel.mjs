// A learner file with one mistake: finite_sentinel.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("finite_sentinel");
