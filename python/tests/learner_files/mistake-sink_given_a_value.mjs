// A learner file with one mistake: sink_given_a_value.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("sink_given_a_value");
