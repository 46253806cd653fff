// A learner file with one mistake: kv_seqlen_one_short.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("kv_seqlen_one_short");
