// A learner file with one mistake: softcap_without_multiply.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("softcap_without_multiply");
