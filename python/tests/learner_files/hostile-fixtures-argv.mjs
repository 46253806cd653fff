// A hostile learner: it copies the expected output from the fixtures, found through a path on its
// process's command line (check used to start its process with --fixtures DIR).
import { copiedOutput } from "./hostile-fixtures.mjs";

export function scaledDotProductAttention(query, _key, _value) {
  const named = process.argv.indexOf("--fixtures");
  return copiedOutput(named >= 0 ? process.argv[named + 1] : "/no/fixtures/on/the/command/line", query);
}
