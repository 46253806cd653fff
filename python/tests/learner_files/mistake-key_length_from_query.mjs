// A learner file with one mistake: key_length_from_query.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("key_length_from_query");
