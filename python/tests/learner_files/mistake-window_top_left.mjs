// A learner file with one mistake: window_top_left.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("window_top_left");
