// A learner file with one mistake: attn_mask_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("attn_mask_ignored");
