// A learner file with one mistake: causal_diagonal_hidden.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("causal_diagonal_hidden");
