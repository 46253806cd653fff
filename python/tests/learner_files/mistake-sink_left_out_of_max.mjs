// A learner file with one mistake: sink_left_out_of_max. The row's max is taken over the keys
// alone, so a sink of +Infinity gives exp(Infinity) in the sum and weights of 0 instead of NaN: an
// edge case. Bad input is refused by the project's readable port, whose answer is not used, so
// that check reaches the edge-case level.
import { scaledDotProductAttention as projectPort } from "../../../typescript/src/attention.ts";
import { makeAttention } from "./learner-base.mjs";

const attention = makeAttention("sink_left_out_of_max");

export function scaledDotProductAttention(query, key, value, options = {}) {
  projectPort(query, key, value, options);
  return attention(query, key, value, options);
}
