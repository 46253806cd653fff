// A learner file with one mistake: enable_gqa_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("enable_gqa_ignored");
