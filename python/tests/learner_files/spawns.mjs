// A learner whose code starts a detached process, which would outlive check, then computes the
// right answer. The process is `sleep 297.5`, a length no other process uses, so a test can look for it.
import { spawn } from "node:child_process";
import { scaledDotProductAttention as right } from "../../../typescript/src/attention.ts";

export function scaledDotProductAttention(query, key, value) {
  spawn("sleep", ["297.5"], { detached: true, stdio: "ignore" }).unref();
  return right(query, key, value);
}
