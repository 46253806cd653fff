// The CLI the Python harness runs (python/attention_port/node.py): its results document.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { main, numberJson } from "../src/cli.ts";
import { decodeNumbers } from "../src/fixtures.ts";

const scratch = mkdtempSync(join(tmpdir(), "attention-port-cli-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("run writes steps, errors and special numbers the way node.py reads them", async () => {
  const out = join(scratch, "results.json");
  const cases = ["tutorial_seq3_dk4", "nan_in_value", "empty_keys", "error_ragged_mask"];
  const code = await main(["run", "--out", out, ...cases.flatMap((id) => ["--case", id])]);
  assert.equal(code, 0);
  const document = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(document.port, "attention");
  assert.equal(typeof document.elapsed_ms, "number");
  assert.deepEqual(Object.keys(document.cases).sort(), [...cases].sort());
  const tutorial = document.cases.tutorial_seq3_dk4;
  assert.deepEqual(tutorial.output.shape, [3, 2]);
  assert.equal(tutorial.output.data.length, 6);
  assert.deepEqual(tutorial.scores.data, [2, 0, 1, 0, 2, 1, 1, 1, 2]);
  assert.ok((decodeNumbers(document.cases.nan_in_value.output.data) as number[]).some(Number.isNaN));
  assert.deepEqual(document.cases.empty_keys.weights, { shape: [2, 3, 0], data: [] });
  assert.deepEqual(document.cases.empty_keys.output.data, new Array(24).fill(0));
  assert.deepEqual(document.cases.error_ragged_mask.error, {
    kind: "ragged",
    message: "attnMask is ragged: attnMask[1] has length 2, expected 3 (shape from the first elements: [2, 3])",
  });
});

test("numbers keep NaN, infinities and the sign of zero", () => {
  assert.deepEqual([NaN, Infinity, -Infinity, -0, 0, 0.1].map(numberJson), ['"NaN"', '"Infinity"', '"-Infinity"', "-0.0", "0", "0.1"]);
});

test("a bad argument or port is one line and exit code 1", async (t) => {
  const errors: string[] = [];
  t.mock.method(console, "error", (line: string) => errors.push(line));
  assert.equal(await main(["run", "--out", join(scratch, "x.json"), "--port", "nope"]), 1);
  assert.equal(await main(["run", "--out", join(scratch, "x.json"), "--case", "no_such_case"]), 1);
  assert.equal(await main(["frobnicate"]), 1);
  assert.match(errors[0], /unknown port 'nope'/);
  assert.match(errors[1], /no case named 'no_such_case'/);
  assert.match(errors[2], /unknown command 'frobnicate'/);
});
