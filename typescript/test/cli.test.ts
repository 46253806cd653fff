// The CLI the Python harness runs (python/attention_port/harness/node.py): its results document.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, type TestContext, test } from "node:test";
import { fileURLToPath } from "node:url";

import { EXIT_CANNOT_RUN, main, numberJson } from "../runners/cli.ts";
import { DEFAULT_FIXTURES, decodeNumbers, REGENERATE_HINT } from "../runners/fixtures.ts";

/** The port table's rows that run in Node: what --port may name. */
const NODE_PORTS = (
  JSON.parse(readFileSync(new URL("../../contract/ports.json", import.meta.url), "utf8")).ports as {
    name: string;
    runs_in: string;
  }[]
)
  .filter((row) => row.runs_in === "node")
  .map((row) => row.name);

const scratch = mkdtempSync(join(tmpdir(), "attention-port-cli-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("run writes steps, errors and special numbers the way node.py reads them", async () => {
  const out = join(scratch, "results.json");
  const cases = ["tutorial_seq3_dk4", "nan_in_value", "empty_keys", "error_ragged_mask"];
  const code = await main(["run", "--out", out, ...cases.flatMap((id) => ["--case", id])]);
  assert.equal(code, 0);
  const document = JSON.parse(readFileSync(out, "utf8"));
  assert.equal(document.port, "typescript");
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
    message:
      "attnMask is ragged: attnMask[1] has length 2, expected 3 (shape from the first elements: [2, 3])",
  });
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

test("--port typescript-flash runs the fast port: the same steps, errors and special numbers", async () => {
  const cases = ["tutorial_seq3_dk4", "nan_in_value", "empty_keys", "error_ragged_mask"];
  const documents: Record<
    string,
    { port: string; cases: Record<string, Record<string, { shape: number[]; data: unknown[] }>> }
  > = {};
  for (const port of ["typescript", "typescript-flash"]) {
    const out = join(scratch, `results-${port}.json`);
    assert.equal(
      await main(["run", "--out", out, "--port", port, ...cases.flatMap((id) => ["--case", id])]),
      0,
    );
    documents[port] = JSON.parse(readFileSync(out, "utf8"));
  }
  const [readable, flash] = [documents.typescript, documents["typescript-flash"]];
  assert.equal(flash.port, "typescript-flash");
  assert.deepEqual(Object.keys(flash.cases).sort(), [...cases].sort());
  assert.deepEqual(flash.cases.error_ragged_mask, readable.cases.error_ragged_mask);
  assert.deepEqual(flash.cases.empty_keys, readable.cases.empty_keys);
  assert.deepEqual(flash.cases.tutorial_seq3_dk4.scores, readable.cases.tutorial_seq3_dk4.scores);
  const output = (port: typeof flash) => decodeNumbers(port.cases.tutorial_seq3_dk4.output.data) as number[];
  output(flash).forEach((x, n) =>
    assert.ok(Math.abs(x - output(readable)[n]) <= 1e-14 * Math.abs(x), `${x}`),
  );
  assert.deepEqual(
    (decodeNumbers(flash.cases.nan_in_value.output.data) as number[]).map(Number.isNaN),
    (decodeNumbers(readable.cases.nan_in_value.output.data) as number[]).map(Number.isNaN),
  );
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
  const out = join(scratch, "x.json");
  const expectations: [string[], RegExp][] = [
    [
      ["run", "--out", out, "--port", "nope"],
      new RegExp(`unknown port 'nope' \\(known: ${NODE_PORTS.join(", ")}\\)`),
    ],
    [["run", "--out", out, "--case", "no_such_case"], /no case named 'no_such_case'/],
    [["frobnicate"], /unknown command 'frobnicate'; run with --help for usage/],
    [[], /no command given/],
    [["run"], /--out is required/],
    [["run", "--out", out, "--frob"], /Unknown option '--frob'.*; run with --help for usage/],
    [
      ["run", "--out", join(scratch, "no", "such", "folder", "x.json")],
      /cannot write --out .*no\/such\/folder/,
    ],
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
  assert.match(printed.join("\n"), /^usage: node typescript\/runners\/cli\.ts run /);
});

test("a bad fixture folder is one line naming it, and exit code 2", async (t) => {
  const out = join(scratch, "x.json");
  const missing = join(scratch, "no-fixtures-here");
  let result = await mainCapturing(t, ["run", "--fixtures", missing, "--out", out]);
  assert.equal(result.code, 2);
  assert.deepEqual(result.lines, [
    `attention-port (typescript): ${missing}: is not a fixture folder; ${REGENERATE_HINT}`,
  ]);
  // A folder whose manifest is damaged.
  const damaged = join(scratch, "damaged");
  cpSync(DEFAULT_FIXTURES, damaged, { recursive: true });
  writeFileSync(join(damaged, "manifest.json"), "{ not json\n");
  result = await mainCapturing(t, ["run", "--fixtures", damaged, "--out", out]);
  assert.equal(result.code, 2);
  assert.equal(result.lines.length, 1);
  assert.match(result.lines[0], new RegExp(`${join(damaged, "manifest.json")}: is not valid JSON`));
});

test("the process itself exits with code 2 and one line on stderr", () => {
  const cli = fileURLToPath(new URL("../runners/cli.ts", import.meta.url));
  const missing = join(scratch, "nowhere");
  const run = spawnSync(
    process.execPath,
    [cli, "run", "--fixtures", missing, "--out", join(scratch, "y.json")],
    { encoding: "utf8" },
  );
  assert.equal(run.status, 2, run.stderr);
  assert.equal(run.stdout, "");
  assert.equal(run.stderr.trimEnd().split("\n").length, 1, run.stderr);
  assert.match(run.stderr, /nowhere: is not a fixture folder/);
  const bare = spawnSync(process.execPath, [cli], { encoding: "utf8" });
  assert.equal(bare.status, 2, bare.stderr);
  assert.match(bare.stderr, /no command given/);
});

test("--port typescript-simd writes the kernel's output alone: the readable port's steps are not the kernel's", async () => {
  const cases = ["tutorial_seq3_dk4", "error_ragged_mask"];
  const read = async (port: string) => {
    const out = join(scratch, `results-${port}-alone.json`);
    assert.equal(
      await main(["run", "--out", out, "--port", port, ...cases.flatMap((id) => ["--case", id])]),
      0,
    );
    return JSON.parse(readFileSync(out, "utf8")).cases;
  };
  const [simd, readable] = [await read("typescript-simd"), await read("typescript")];
  assert.deepEqual(Object.keys(simd.tutorial_seq3_dk4), ["output"]);
  assert.deepEqual(simd.tutorial_seq3_dk4.output.shape, readable.tutorial_seq3_dk4.output.shape);
  const output = (doc: typeof simd) => decodeNumbers(doc.tutorial_seq3_dk4.output.data) as number[];
  output(simd).forEach((x, n) => assert.ok(Math.abs(x - output(readable)[n]) <= 1e-14 * Math.abs(x), `${x}`));
  assert.deepEqual(simd.error_ragged_mask, readable.error_ragged_mask);
});
