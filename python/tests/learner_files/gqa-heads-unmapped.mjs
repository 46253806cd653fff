// A learner file that reads key/value head h for query head h, as if enableGqa changed nothing: past
// the last key/value head it reads undefined and crashes.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("gqa_heads_unmapped");
