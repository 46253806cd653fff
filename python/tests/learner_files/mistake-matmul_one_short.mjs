// A learner file with one mistake: matmul_one_short.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("matmul_one_short");
