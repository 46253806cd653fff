// A learner file with one mistake: kv_seqlen_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("kv_seqlen_ignored");
