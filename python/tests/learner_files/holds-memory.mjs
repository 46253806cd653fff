// A learner whose code computes the right answer, but first takes 6 GiB and holds on to it.
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

const held = [];

export function scaledDotProductAttention(query, key, value) {
  while (held.length < 96) {
    held.push(Buffer.alloc(64 << 20, 1)); // 64 MiB, written to: real memory, not a reservation
  }
  return right(query, key, value);
}
