// A learner who prints 3 MB on its first case (a whole tensor in a loop, say).
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

let first = true;

export function scaledDotProductAttention(query, key, value) {
  if (first) {
    first = false;
    for (let n = 0; n < 30_000; n++) {
      console.log(`${n} `.padEnd(99, "x"));
    }
  }
  return right(query, key, value);
}
