// hostile.ts's checks, one child process per section, all started at once and each killed at a
// deadline: hostile input that sends a port into a long synchronous loop (2 ** 31 holes read one
// by one, a cycle walked forever) fails its tests at the deadline instead of hanging the run,
// which no timeout of node:test can do for synchronous code. Every check passes in well under a
// second.

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { SECTIONS } from "./hostile.ts";

const DEADLINE_MS = 30_000;
const SCRIPT = fileURLToPath(new URL("./hostile.ts", import.meta.url));

/** Each check's failure (null: passed) for one section of hostile.ts, run in its own process. */
function runSection(sectionName: string): Promise<Record<string, string | null>> {
  const unanswered = (why: string) =>
    Object.fromEntries([...SECTIONS.get(sectionName)!.keys()].map((name) => [name, why]));
  return new Promise((resolve) => {
    const options = { timeout: DEADLINE_MS, killSignal: "SIGKILL" as const, maxBuffer: 1 << 24 };
    execFile(process.execPath, [SCRIPT, sectionName], options, (error, stdout, stderr) => {
      if (error === null) {
        resolve(JSON.parse(stdout));
      } else if (error.killed) {
        resolve(unanswered(`no answer within ${DEADLINE_MS / 1000} s: a port hangs`));
      } else {
        resolve(unanswered(`the check process failed: ${error.message}\n${stderr.slice(-2000)}`));
      }
    });
  });
}

const running = new Map([...SECTIONS.keys()].map((name) => [name, runSection(name)]));

for (const [sectionName, checks] of SECTIONS) {
  describe(sectionName, () => {
    for (const checkName of checks.keys()) {
      test(checkName, async () => {
        const failure = (await running.get(sectionName)!)[checkName];
        assert.equal(failure, null, failure ?? "");
      });
    }
  });
}
