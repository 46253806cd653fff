// The runner the Python harness talks to (python/attention_port/harness/node.py): its replies.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, type TestContext, test } from "node:test";
import { fileURLToPath } from "node:url";
import { DEFAULT_FIXTURES, decodeNumbers, REGENERATE_HINT } from "../golden/reader.ts";
import { EXIT_CANNOT_RUN, main, numberJson } from "../harness/cli.ts";

/** The port table's rows that run in Node: what a request may name. */
const NODE_PORTS = (
  JSON.parse(readFileSync(new URL("../../contract/ports.json", import.meta.url), "utf8")).ports as {
    name: string;
    runs_in: string;
  }[]
)
  .filter((row) => row.runs_in === "node")
  .map((row) => row.name);

const CLI = fileURLToPath(new URL("../harness/cli.ts", import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), "attention-port-cli-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

type Tensor = { shape: number[]; data: unknown[] };
type Step = { step: string; passed: boolean; budgetUsed: number | string; problem: string | null };
interface Reply {
  port: string;
  elapsed_ms: number;
  verdicts: Record<string, { verdict: string; problem: string | null; steps: Step[] }>;
  answers: Record<string, Record<string, Tensor> & { error?: { kind: string; message: string } }>;
  problem?: string;
}

/** One `serve` process given these requests, one per line: its replies, in order. */
function serve(requests: object[], args: string[] = []): Reply[] {
  const run = spawnSync(process.execPath, [CLI, "serve", ...args], {
    input: requests.map((r) => `${JSON.stringify(r)}\n`).join(""),
    encoding: "utf8",
  });
  assert.equal(run.status, 0, run.stderr);
  return run.stdout
    .trimEnd()
    .split("\n")
    .map((line) => JSON.parse(line) as Reply);
}

const CASES = ["tutorial_seq3_dk4", "nan_in_value", "empty_keys", "error_ragged_mask", "layer_gqa"];

test("serve judges each port: a clean pass and a refusal cross as their verdicts, a layer case as its answer", () => {
  const [reply, everything] = serve([
    { port: "typescript", cases: CASES, every_answer: false },
    { port: "typescript", cases: CASES, every_answer: true },
  ]);
  assert.equal(reply.port, "typescript");
  assert.equal(typeof reply.elapsed_ms, "number");
  assert.deepEqual(Object.keys(reply.verdicts).sort(), [
    "empty_keys",
    "error_ragged_mask",
    "nan_in_value",
    "tutorial_seq3_dk4",
  ]);
  assert.deepEqual(Object.keys(reply.answers), ["layer_gqa"]);
  assert.deepEqual(reply.verdicts.error_ragged_mask, { verdict: "pass", problem: null, steps: [] });
  const tutorial = reply.verdicts.tutorial_seq3_dk4;
  assert.equal(tutorial.verdict, "pass");
  assert.deepEqual(
    tutorial.steps.map((s) => s.step),
    ["scores", "logits", "weights", "output"],
  );
  assert.ok(tutorial.steps.every((s) => s.passed && s.problem === null));
  assert.ok(reply.answers.layer_gqa.output.shape.length === 2);
  // every_answer: each attention case's answer too, special numbers written as in the fixtures.
  assert.deepEqual(Object.keys(everything.answers).sort(), [...CASES].sort());
  assert.deepEqual(everything.answers.error_ragged_mask.error, {
    kind: "ragged",
    message:
      "attnMask is ragged: attnMask[1] has length 2, expected 3 (shape from the first elements: [2, 3])",
  });
  assert.deepEqual(everything.verdicts, reply.verdicts);
  assert.deepEqual(everything.answers.tutorial_seq3_dk4.scores.data, [2, 0, 1, 0, 2, 1, 1, 1, 2]);
  assert.ok((decodeNumbers(everything.answers.nan_in_value.output.data) as number[]).some(Number.isNaN));
  assert.deepEqual(everything.answers.empty_keys.weights, { shape: [2, 3, 0], data: [] });
  assert.deepEqual(everything.answers.empty_keys.output.data, new Array(24).fill(0));
});

test("a refusal whose message is not the case's crosses as its answer, for compare.py to word", () => {
  // The fixture's message edited, and the case resealed (its sha256 in the manifest updated).
  const edited = join(scratch, "edited-message");
  cpSync(DEFAULT_FIXTURES, edited, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(edited, "manifest.json"), "utf8"));
  const entry = manifest.cases.find((c: { id: string }) => c.id === "error_ragged_mask");
  const document = JSON.parse(readFileSync(join(edited, entry.file), "utf8"));
  document.expected_error.message = `${document.expected_error.message} (edited)`;
  const text = JSON.stringify(document);
  writeFileSync(join(edited, entry.file), text);
  entry.sha256 = createHash("sha256").update(text).digest("hex");
  writeFileSync(join(edited, "manifest.json"), JSON.stringify(manifest));
  const [reply] = serve(
    [{ port: "typescript", cases: ["error_ragged_mask"], every_answer: false }],
    ["--fixtures", edited],
  );
  assert.deepEqual(reply.verdicts, {});
  assert.equal(reply.answers.error_ragged_mask.error?.kind, "ragged");
  assert.match(reply.answers.error_ragged_mask.error?.message ?? "", /^attnMask is ragged: /);
});

test("numbers keep NaN, infinities and the sign of zero", () => {
  assert.deepEqual([NaN, Infinity, -Infinity, -0, 0, 0.1].map(numberJson), [
    '"NaN"',
    '"Infinity"',
    '"-Infinity"',
    "-0.0",
    "0",
    "0.1",
  ]);
});

test("a case outside the contract crosses as a verdict that says so", () => {
  const [reply] = serve([{ port: "typescript", cases: ["score_overflow"], every_answer: false }]);
  assert.deepEqual(reply.verdicts.score_overflow, {
    verdict: "outside",
    problem: "outside the contract: score overflow",
    steps: [],
  });
});

test("one process serves every port, the fast one with the same steps, errors and special numbers", () => {
  const replies = serve(
    ["typescript", "typescript-flash"].map((port) => ({ port, cases: CASES, every_answer: true })),
  );
  const [readable, flash] = replies.map((reply) => reply.answers);
  assert.equal(replies[1].port, "typescript-flash");
  assert.deepEqual(Object.keys(replies[1].verdicts), Object.keys(replies[0].verdicts));
  assert.deepEqual(flash.error_ragged_mask, readable.error_ragged_mask);
  assert.deepEqual(flash.empty_keys, readable.empty_keys);
  assert.deepEqual(flash.tutorial_seq3_dk4.scores, readable.tutorial_seq3_dk4.scores);
  const output = (port: typeof flash) => decodeNumbers(port.tutorial_seq3_dk4.output.data) as number[];
  output(flash).forEach((x, n) =>
    assert.ok(Math.abs(x - output(readable)[n]) <= 1e-14 * Math.abs(x), `${x}`),
  );
  assert.deepEqual(
    (decodeNumbers(flash.nan_in_value.output.data) as number[]).map(Number.isNaN),
    (decodeNumbers(readable.nan_in_value.output.data) as number[]).map(Number.isNaN),
  );
});

test("a request that cannot be served is answered with its problem, and the next is served", () => {
  const missing = join(scratch, "no-fixtures-here");
  const damaged = join(scratch, "damaged");
  cpSync(DEFAULT_FIXTURES, damaged, { recursive: true });
  writeFileSync(join(damaged, "manifest.json"), "{ not json\n");
  const [unknown, noCase, served] = serve([
    { port: "nope", cases: null },
    { port: "typescript", cases: ["no_such_case"] },
    { port: "typescript", cases: ["tutorial_seq3_dk4"] },
  ]);
  assert.deepEqual(unknown, {
    port: "nope",
    problem: `unknown port 'nope' (known: ${NODE_PORTS.join(", ")})`,
  });
  assert.match(noCase.problem ?? "", /no case named 'no_such_case'/);
  assert.equal(served.verdicts.tutorial_seq3_dk4.verdict, "pass");
  const [notAFolder] = serve([{ port: "typescript", cases: null }], ["--fixtures", missing]);
  assert.equal(notAFolder.problem, `${missing}: is not a fixture folder; ${REGENERATE_HINT}`);
  const [bad] = serve([{ port: "typescript", cases: null }], ["--fixtures", damaged]);
  assert.match(bad.problem ?? "", new RegExp(`${join(damaged, "manifest.json")}: is not valid JSON`));
});

/** main() with console.error captured: its exit code and the lines it printed. */
async function mainCapturing(t: TestContext, argv: string[]): Promise<{ code: number; lines: string[] }> {
  const printed: string[] = [];
  const mock = t.mock.method(console, "error", (...parts: unknown[]) =>
    printed.push(parts.map(String).join(" ")),
  );
  try {
    const code = await main(argv);
    return { code, lines: printed.join("\n").split("\n") };
  } finally {
    mock.mock.restore();
  }
}

test("bad usage is one line on stderr and exit code 2", async (t) => {
  const expectations: [string[], RegExp][] = [
    [["frobnicate"], /unknown command 'frobnicate'; run with --help for usage/],
    [[], /no command given/],
    [["serve", "--frob"], /Unknown option '--frob'.*; run with --help for usage/],
  ];
  for (const [argv, pattern] of expectations) {
    const { code, lines } = await mainCapturing(t, argv);
    assert.equal(code, EXIT_CANNOT_RUN, argv.join(" "));
    assert.equal(EXIT_CANNOT_RUN, 2);
    assert.equal(lines.length, 1, lines.join("\n"));
    assert.match(lines[0], /^attention-port \(typescript\): /);
    assert.match(lines[0], pattern);
  }
  const printed: string[] = [];
  t.mock.method(console, "log", (line: string) => printed.push(line));
  assert.equal(await main(["--help"]), 0);
  assert.match(printed.join("\n"), /^usage: node typescript\/harness\/cli\.ts serve /);
});

test("the process itself exits with code 2 and one line on stderr", () => {
  const bare = spawnSync(process.execPath, [CLI], { encoding: "utf8" });
  assert.equal(bare.status, 2, bare.stderr);
  assert.equal(bare.stdout, "");
  assert.equal(bare.stderr.trimEnd().split("\n").length, 1, bare.stderr);
  assert.match(bare.stderr, /no command given/);
});

test("typescript-simd gives the kernel's output alone: the readable port's steps are not the kernel's", () => {
  const cases = ["tutorial_seq3_dk4", "error_ragged_mask"];
  const [simd, readable] = serve(
    ["typescript-simd", "typescript"].map((port) => ({ port, cases, every_answer: true })),
  );
  assert.deepEqual(
    simd.verdicts.tutorial_seq3_dk4.steps.map((s) => s.step),
    ["output"],
  );
  assert.deepEqual(Object.keys(simd.answers.tutorial_seq3_dk4), ["output"]);
  const [kernel, textbook] = [simd, readable].map((r) => r.answers.tutorial_seq3_dk4.output);
  assert.deepEqual(kernel.shape, textbook.shape);
  (kernel.data as number[]).forEach((x, n) =>
    assert.ok(Math.abs(x - (textbook.data[n] as number)) <= 1e-14 * Math.abs(x), `${x}`),
  );
  assert.deepEqual(simd.answers.error_ragged_mask, readable.answers.error_ragged_mask);
});
