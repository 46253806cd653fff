// A learner file with one mistake: window_one_key_too_narrow.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("window_one_key_too_narrow");
