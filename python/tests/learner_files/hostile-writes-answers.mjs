// A hostile learner: its function returns zeros, and writes a right answer for the first case straight
// to check's answer descriptor (named on its command line), hoping that is read instead.
import { writeSync } from "node:fs";
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

export function scaledDotProductAttention(query, key, value) {
  const fd = Number(process.argv[process.argv.indexOf("--answers-fd") + 1]);
  const output = right(query, key, value);
  const forged = { id: "tutorial_seq3_dk4", steps: { output: { shape: [3, 2], data: output.flat() } } };
  writeSync(fd, `${JSON.stringify(forged)}\n`);
  return output.map((row) => row.map(() => 0));
}
