// A learner file with one mistake: last_key_dropped.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("last_key_dropped");
