/**
 * Run a TypeScript port on the fixtures and write its answers for the Python harness to judge.
 *
 *     node typescript/runners/cli.ts run --fixtures fixtures --out results.json [--port typescript] [--case ID]...
 *
 * The results document (read by python/attention_port/harness/node.py and runners.py):
 *     {"port": "typescript", "elapsed_ms": 12.3, "cases": {id: answer}}
 * where an answer is {"scores", "logits", "weights", "output"} (each {"shape", "data"}, data flat row-major),
 * {"error": {"kind", "message"}} for an AttentionInputError, or {"crash": "..."} for anything else.
 * Numbers are written as in the fixtures ("NaN", "Infinity", "-Infinity"), and -0.0 keeps its sign.
 * --port names a row of the port table (ports.json) that runs in Node. A port that records its own
 * steps (attention.ts, flash.ts) runs through its attentionSteps, and every step is written. One
 * that does not (simd.ts: its kernel keeps no scores, logits or weights, and its attentionSteps
 * returns the readable port's) has its output alone written, so verify judges only what it
 * computed and names no first diverging step for it. A port whose row computes in float32 runs its
 * flat entry on Float32Array inputs (float32 arithmetic) and writes the output only.
 * The CLI judges nothing (compare.py does). Exit codes: 0 the results are written (a case that
 * threw is recorded in them); 2 it cannot run: bad command-line usage or a fixture folder that
 * cannot be used, said in one line on stderr.
 */

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { type FlatTensor, oneLine } from "../src/inputs.ts";
import { type AttentionCore, layerWith } from "../src/layer.ts";
import { writeAtomic } from "./files.ts";
import {
  DEFAULT_FIXTURES,
  type FixtureCase,
  FixtureError,
  type FixtureTensor,
  type LayerFixtureCase,
  loadFixtures,
  loadLayerFixtures,
  portTensor,
} from "./fixtures.ts";
import { runLayerCase } from "./layer-cases.ts";
import { flatMask, float32Tensor, type StepsLike, stepsJson, thrownJson } from "./results.ts";

export { flat, numberJson, tensorJson } from "./results.ts";

/** A row of the port table (contract/ports.json, read by the Python harness
 * too): what this runner needs to know of a port is a property of its row, never its name. */
interface PortRow {
  name: string;
  module: string; // repository-relative, e.g. typescript/src/simd.ts
  // The module Node runs for it, where not `module`: simd.ts imports no node: module (a browser
  // bundles it) and its Node entry, simd-node.ts, reads the kernel from disk.
  node_entry: string | null;
  dtypes: string[]; // float32 first: the flat entry on Float32Array inputs
  records_steps: boolean; // else only the output is written (the other steps are not the port's)
  runs_in: "python" | "node" | "browser";
}

const TABLE_URL = new URL("../../contract/ports.json", import.meta.url);
/** The ports --port can run: the table's rows that run in Node. */
const PORTS: PortRow[] = (JSON.parse(readFileSync(TABLE_URL, "utf8")) as { ports: PortRow[] }).ports.filter(
  (row) => row.runs_in === "node",
);

type AttentionStepsFunction = (query: unknown, key: unknown, value: unknown, options: unknown) => StepsLike;
/** One fixture case -> the port's steps (or it throws). */
type CaseRunner = (c: FixtureCase) => StepsLike;

const USAGE = `usage: node typescript/runners/cli.ts run [--fixtures DIR] --out FILE [--port ${PORTS.map((row) => row.name).join("|")}] [--case ID]...`;

class UsageError extends Error {}

/** Bad usage or an unusable fixture folder: one line on stderr, and this exit code. */
export const EXIT_CANNOT_RUN = 2;
const HELP_HINT = "run with --help for usage";

async function loadPort(row: PortRow): Promise<CaseRunner> {
  const file = row.node_entry ?? row.module;
  let module: { attentionSteps?: unknown; scaledDotProductAttentionFlat?: unknown };
  try {
    module = (await import(new URL(`../../${file}`, import.meta.url).href)) as typeof module;
  } catch (error) {
    throw new UsageError(`port '${row.name}' is not available (${file}: ${(error as Error).message})`);
  }
  if (typeof module.attentionSteps !== "function") {
    throw new UsageError(`port '${row.name}' does not export attentionSteps`);
  }
  const steps = module.attentionSteps as AttentionStepsFunction;
  const nested: CaseRunner = (c) => {
    const tensor = (x: unknown) => (c.expected === null || x === null ? x : portTensor(x as FixtureTensor));
    return steps(tensor(c.inputs.query), tensor(c.inputs.key), tensor(c.inputs.value), {
      attnMask: tensor(c.inputs.attnMask),
      ...c.params,
    });
  };
  if (row.dtypes[0] !== "float32") {
    if (row.records_steps) {
      return nested;
    }
    // The same checks and errors as attentionSteps; of its steps, only the kernel's output is kept
    // (a port that keeps no scores, logits or weights returns the readable port's).
    return (c) => {
      const { output, outputShape } = nested(c);
      return { output, scoresShape: [], outputShape };
    };
  }
  // A port in float32: its flat entry with Float32Array tensors, which computes in float32.
  // It gives the output only (compare.py judges the output; the other steps are diagnostics).
  // Invalid-input cases go through the nested entry, whose checks are the same.
  const flat = module.scaledDotProductAttentionFlat as (
    q: FlatTensor,
    k: FlatTensor,
    v: FlatTensor,
    options: unknown,
  ) => FlatTensor;
  return (c) => {
    if (c.expected === null) {
      return nested(c);
    }
    const out = flat(
      float32Tensor(c.inputs.query as FixtureTensor),
      float32Tensor(c.inputs.key as FixtureTensor),
      float32Tensor(c.inputs.value as FixtureTensor),
      { attnMask: flatMask(c.inputs.attnMask as FixtureTensor | null), ...c.params },
    );
    return { output: Array.from(out.data), scoresShape: [], outputShape: out.shape };
  };
}

/** The layer and RoPE cases' runner of a port: the shared layer over the port's attentionSteps
 * (a float32 row has no float32 layer: its layer cases run its module's float64 attentionSteps). */
async function loadLayerPort(row: PortRow): Promise<(c: LayerFixtureCase) => string> {
  const file = row.node_entry ?? row.module;
  const module = (await import(new URL(`../../${file}`, import.meta.url).href)) as {
    attentionSteps: AttentionCore;
  };
  const layer = layerWith(module.attentionSteps);
  return (c) => runLayerCase(layer, c) as string;
}

function layerAnswer(run: (c: LayerFixtureCase) => string, c: LayerFixtureCase): string {
  try {
    return run(c);
  } catch (error) {
    return thrownJson(error);
  }
}

/** One case's answer, as a JSON text. */
function answer(run: CaseRunner, c: FixtureCase): string {
  try {
    return stepsJson(run(c));
  } catch (error) {
    return thrownJson(error);
  }
}

async function runCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      fixtures: { type: "string", default: DEFAULT_FIXTURES },
      out: { type: "string" },
      port: { type: "string", default: "typescript" },
      case: { type: "string", multiple: true },
    },
    strict: true,
  });
  if (values.out === undefined) {
    throw new UsageError(`--out is required; ${HELP_HINT}`);
  }
  const row = PORTS.find((candidate) => candidate.name === values.port);
  if (row === undefined) {
    const known = PORTS.map((candidate) => candidate.name).join(", ");
    throw new UsageError(`unknown port '${values.port}' (known: ${known})`);
  }
  const port = row.name;
  const run = await loadPort(row);
  const cases = loadFixtures(values.fixtures, values.case);
  const start = performance.now();
  const layerCases = loadLayerFixtures(values.fixtures, values.case);
  const runLayer = await loadLayerPort(row);
  const answers = [
    ...cases.map((c) => `    ${JSON.stringify(c.id)}: ${answer(run, c)}`),
    ...layerCases.map((c) => `    ${JSON.stringify(c.id)}: ${layerAnswer(runLayer, c)}`),
  ];
  const elapsed = performance.now() - start;
  const document =
    `{\n  "port": ${JSON.stringify(port)},\n  "elapsed_ms": ${elapsed.toFixed(3)},\n` +
    `  "cases": {\n${answers.join(",\n")}\n  }\n}\n`;
  try {
    writeAtomic(values.out, document); // never half a results file
  } catch (error) {
    throw new UsageError(`cannot write --out ${values.out} (${(error as Error).message})`);
  }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "run") {
      await runCommand(rest);
      return 0;
    }
    if (command === "--help" || command === "-h") {
      console.log(USAGE);
      return 0;
    }
    if (command === undefined) {
      throw new UsageError(`no command given; ${HELP_HINT}`);
    }
    throw new UsageError(`unknown command '${command}'; ${HELP_HINT}`);
  } catch (error) {
    if (error instanceof UsageError || error instanceof FixtureError) {
      console.error(`attention-port (typescript): ${oneLine(error.message)}`);
      return EXIT_CANNOT_RUN;
    }
    if (error instanceof TypeError && (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(`attention-port (typescript): ${oneLine(error.message)}; ${HELP_HINT}`);
      return EXIT_CANNOT_RUN;
    }
    throw error;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
