// A learner file with one mistake: fully_masked_zero_times_value. A fully-masked row's weights are 0
// (learner-base.mjs), but its output is still weights · value, NaN where the value holds NaN or
// Infinity. Bad input is refused by the project's readable port, whose answer is not used, so that
// check reaches the edge-case level.
import { scaledDotProductAttention as projectPort } from "../../../typescript/src/attention.ts";
import { makeAttention } from "./learner-base.mjs";

const attention = makeAttention();

export function scaledDotProductAttention(query, key, value, options = {}) {
  projectPort(query, key, value, options);
  return attention(query, key, value, options);
}
