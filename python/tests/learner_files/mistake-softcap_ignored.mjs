// A learner file with one mistake: softcap_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("softcap_ignored");
