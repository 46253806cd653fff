// A learner file with one mistake: scale_option_ignored.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("scale_option_ignored");
