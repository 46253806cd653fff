// A hostile learner: it copies the expected output from the repository's fixtures, at a path it
// knows (three folders above this file).
import { fileURLToPath } from "node:url";
import { copiedOutput } from "./hostile-fixtures.mjs";

export function scaledDotProductAttention(query, _key, _value) {
  return copiedOutput(fileURLToPath(new URL("../../../fixtures", import.meta.url)), query);
}
