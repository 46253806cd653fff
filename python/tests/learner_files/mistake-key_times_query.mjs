// A learner file with one mistake: key_times_query.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("key_times_query");
