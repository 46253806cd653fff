// A learner file with one mistake: mask_read_per_query.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("mask_read_per_query");
