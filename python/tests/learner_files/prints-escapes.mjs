// A learner who prints terminal escape codes (clear the screen, red text) and a carriage return.
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

export function scaledDotProductAttention(query, key, value) {
  console.log("\x1b[2J\x1b[31mred\x1b[0m\rover");
  return right(query, key, value);
}
