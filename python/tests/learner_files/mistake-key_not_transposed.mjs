// A learner file with one mistake: key_not_transposed.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("key_not_transposed");
