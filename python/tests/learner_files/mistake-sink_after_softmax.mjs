// A learner file with one mistake: sink_after_softmax.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("sink_after_softmax");
