// A learner file with one mistake: query_offset_off_by_one.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("query_offset_off_by_one");
