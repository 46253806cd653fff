// A learner that leaves a rejected promise behind (started, never awaited) and returns the right
// answer: the rejection belongs to the case that made it, not to the next one.
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

export function scaledDotProductAttention(query, key, value) {
  Promise.reject(new Error("left behind"));
  return right(query, key, value);
}
