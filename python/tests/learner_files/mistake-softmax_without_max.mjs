// A learner file with one mistake: softmax_without_max.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("softmax_without_max");
