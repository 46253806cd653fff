// A learner file with one mistake: query_offset_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("query_offset_ignored");
