// A learner who prints while debugging, on stdout and stderr, and computes the right answer.
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

console.log("loaded");

export function scaledDotProductAttention(query, key, value) {
  console.log(`query has ${query.length} rows`);
  console.error(`key has ${key.length} rows`);
  return right(query, key, value);
}
