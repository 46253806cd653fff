// A learner file with one mistake: scale_forgotten.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("scale_forgotten");
