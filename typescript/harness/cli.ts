/**
 * Run and judge the TypeScript ports on the fixtures, in one Node process that serves the Python
 * harness (python/attention_port/harness/node.py) one port at a time:
 *
 *     node typescript/harness/cli.ts serve [--fixtures DIR]
 *
 * Each line on stdin asks for one port: {"port": "typescript", "cases": [id, ...] or null (every
 * case), "every_answer": false}. Each line on stdout answers one (results.ts writes it):
 *     {"port", "elapsed_ms", "verdicts": {id: verdict}, "answers": {id: answer}}
 * The fixture folder is read and checked against its manifest once per process, each case the
 * first time a request names it, and shared by every port after. An attention case is called
 * through the conformance kit and judged by its `judge` (typescript/conformance/, held to
 * compare.py by a test) in the dtype of the port's row, as kit-cases.ts does for the WebGPU page
 * too: a clean pass, a case outside the contract and an invalid case refused with its kind and
 * message cross as their verdicts alone; a failure crosses as its answer (verify's report words
 * it, step by step), and with every_answer every attention case does (verify's typescript~torch
 * cross-check holds the answers to torch's). A layer or RoPE case crosses as its answer (the kit
 * has no layer rule). A request that cannot be served (an unknown port or case, a fixture file
 * that fails its check) is answered {"port", "problem": "..."}; the process stays up for the next.
 *
 * --port's table is contract/ports.json: what this runner needs to know of a port is a property of
 * its row, never its name. A port that records its own steps (attention.ts, flash.ts) is called
 * through its attentionSteps, and every step is judged. One that does not (simd.ts: its kernel
 * keeps no scores, logits or weights, and its attentionSteps returns the readable port's) gives its
 * output alone, so only what it computed is judged and no first diverging step is named for it. A
 * port whose row computes in float32 runs its flat entry on Float32Array inputs (float32
 * arithmetic) and gives the output only; an invalid case goes through its nested entry, whose
 * checks are the same. Exit codes: 0 stdin closed; 2 bad command-line usage, said in one line on
 * stderr.
 */

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { rawCasesIn } from "../conformance/fixture-data.ts";
import { type AttentionFunction, type TestCase, testCase } from "../conformance/kit.ts";
import {
  DEFAULT_FIXTURES,
  FixtureError,
  type LayerFixtureCase,
  loadLayerFixtures,
} from "../golden/reader.ts";
import { oneLine } from "../src/inputs.ts";
import { type AttentionCore, layerWith } from "../src/layer.ts";
import { type FlatEntry, float32Entry, type Judged, runCase } from "./kit-cases.ts";
import { type LayerCase, runLayerCase } from "./layer-cases.ts";
import { replyJson, thrownJson } from "./results.ts";

export { numberJson } from "./results.ts";

/** A row of the port table (contract/ports.json, read by the Python harness
 * too): what this runner needs to know of a port is a property of its row, never its name. */
interface PortRow {
  name: string;
  module: string; // repository-relative, e.g. typescript/src/simd.ts
  // The module Node runs for it, where not `module`: simd.ts imports no node: module (a browser
  // bundles it) and its Node entry, simd-node.ts, reads the kernel from disk.
  node_entry: string | null;
  dtypes: string[]; // float32 first: the flat entry on Float32Array inputs
  records_steps: boolean; // else only the output is judged (the other steps are not the port's)
  runs_in: "python" | "node" | "browser";
}

const TABLE_URL = new URL("../../contract/ports.json", import.meta.url);
/** The ports a request can name: the table's rows that run in Node. */
const PORTS: PortRow[] = (JSON.parse(readFileSync(TABLE_URL, "utf8")) as { ports: PortRow[] }).ports.filter(
  (row) => row.runs_in === "node",
);

const USAGE = "usage: node typescript/harness/cli.ts serve [--fixtures DIR]  (one request per line on stdin)";

class UsageError extends Error {}

/** Bad usage: one line on stderr, and this exit code. */
export const EXIT_CANNOT_RUN = 2;
const HELP_HINT = "run with --help for usage";

/** A port as the kit calls it: the function for one case (a float32 row's flat entry for a valid
 * case, its nested entry for an invalid one), and its layer. */
interface LoadedPort {
  readonly row: PortRow;
  readonly attention: (test: TestCase) => AttentionFunction;
  readonly layer: (c: LayerCase) => string | Promise<string>;
}

type AttentionSteps = (
  query: unknown,
  key: unknown,
  value: unknown,
  options: unknown,
) => {
  readonly output: unknown;
  readonly outputShape: readonly number[];
};
async function loadPort(row: PortRow): Promise<LoadedPort> {
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
  const steps = module.attentionSteps as AttentionSteps;
  const layer = layerWith(module.attentionSteps as AttentionCore);
  const runLayer = (c: LayerCase) => runLayerCase(layer, c);
  // The same checks and errors as attentionSteps; of its steps, only the kernel's output is kept
  // (a port that keeps no scores, logits or weights returns the readable port's).
  const nested: AttentionFunction = row.records_steps
    ? steps
    : (query, key, value, options) => {
        const { output, outputShape } = steps(query, key, value, options);
        return { output, scoresShape: [], outputShape };
      };
  if (row.dtypes[0] !== "float32") {
    return { row, attention: () => nested, layer: runLayer };
  }
  // A port in float32: its flat entry with Float32Array tensors, which computes in float32. (A
  // float32 row has no float32 layer: its layer cases run its module's float64 attentionSteps.)
  const flatEntry = float32Entry(module.scaledDotProductAttentionFlat as FlatEntry);
  return { row, attention: (test) => (test.rule === null ? nested : flatEntry), layer: runLayer };
}

/** A request from the harness. */
interface Request {
  readonly port: string;
  readonly cases: readonly string[] | null;
  readonly every_answer: boolean;
}

/** The fixture cases of one folder, each read and checked once, the first time it is asked for. */
class FixtureFolder {
  private readonly folder: string;
  private readonly attention = new Map<string, TestCase>();
  private readonly layer = new Map<string, LayerFixtureCase>();
  private everything = false;

  constructor(folder: string) {
    this.folder = folder;
  }

  cases(ids: readonly string[] | null): { attention: TestCase[]; layer: LayerFixtureCase[] } {
    const missing = ids?.filter((id) => !this.attention.has(id) && !this.layer.has(id));
    if (ids === null ? !this.everything : (missing as string[]).length > 0) {
      for (const raw of rawCasesIn(this.folder, missing)) {
        this.attention.set(raw.id, testCase(raw));
      }
      for (const c of loadLayerFixtures(this.folder, missing)) {
        this.layer.set(c.id, c);
      }
      this.everything ||= ids === null;
    }
    const pick = <T>(table: Map<string, T>) =>
      ids === null ? [...table.values()] : ids.flatMap((id) => table.get(id) ?? []);
    return { attention: pick(this.attention), layer: pick(this.layer) };
  }
}

/** One request's reply line: every case run and judged (see the header for what crosses). */
async function serveRequest(
  request: Request,
  folder: FixtureFolder,
  loaded: Map<string, Promise<LoadedPort>>,
): Promise<string> {
  const row = PORTS.find((candidate) => candidate.name === request.port);
  if (row === undefined) {
    const known = PORTS.map((candidate) => candidate.name).join(", ");
    throw new UsageError(`unknown port '${String(request.port)}' (known: ${known})`);
  }
  if (!loaded.has(row.name)) {
    loaded.set(row.name, loadPort(row));
  }
  const port = await (loaded.get(row.name) as Promise<LoadedPort>);
  const { attention, layer } = folder.cases(request.cases);
  const dtype = row.dtypes[0] as "float64" | "float32";
  const start = performance.now();
  const reply: Judged = { verdicts: {}, answers: {} };
  for (const test of attention) {
    await runCase(reply, port.attention(test), test, dtype, request.every_answer);
  }
  const { verdicts, answers } = reply;
  for (const c of layer) {
    try {
      answers[c.id] = await port.layer(c);
    } catch (error) {
      answers[c.id] = thrownJson(error);
    }
  }
  return replyJson(row.name, performance.now() - start, verdicts, answers);
}

async function serveCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: { fixtures: { type: "string", default: DEFAULT_FIXTURES } },
    strict: true,
  });
  const folder = new FixtureFolder(values.fixtures);
  const loaded = new Map<string, Promise<LoadedPort>>();
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === "") {
      continue;
    }
    let request: Request | null = null;
    let reply: string;
    try {
      request = JSON.parse(line) as Request;
      reply = await serveRequest(request, folder, loaded);
    } catch (error) {
      if (!(error instanceof UsageError || error instanceof FixtureError || error instanceof SyntaxError)) {
        throw error;
      }
      reply = JSON.stringify({ port: request?.port ?? null, problem: oneLine(error.message) });
    }
    process.stdout.write(`${reply}\n`);
  }
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === "serve") {
      await serveCommand(rest);
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
    if (error instanceof UsageError) {
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
