// A learner file with one mistake: sink_left_out_of_max.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("sink_left_out_of_max");
