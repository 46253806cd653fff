// A learner file with one mistake: softmax_wrong_axis.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("softmax_wrong_axis");
