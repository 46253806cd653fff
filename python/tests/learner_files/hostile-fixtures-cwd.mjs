// A hostile learner: it copies the expected output from ./fixtures, in the folder its process runs
// in (check used to run it in the repository).
import { copiedOutput } from "./hostile-fixtures.mjs";

export function scaledDotProductAttention(query, _key, _value) {
  return copiedOutput("fixtures", query);
}
