/**
 * The Node worker of `attention-port bench`: times one TypeScript port in a process of its own.
 *
 *     node typescript/src/bench.ts PLAN.json
 *
 * python/attention_port/bench.py (the parent) draws the inputs once, writes them as raw
 * little-endian float64 files and starts one worker per port. Its twin for the Python ports is
 * python/attention_port/bench_worker.py: the same plan, the same timing loop, the same result
 * document (see there for every field). The ports here:
 *     typescript        attention.ts, the readable port: nested number[][] in and out (float64 only)
 *     typescript-flash  flash.ts through its flat entry point scaledDotProductAttentionFlat, with
 *                       {shape, data} tensors: Float64Array for float64, Float32Array for float32
 *
 * Modes: "time" (warm-up, timed runs, output written for the parent to check), "memory" (exactly one
 * pass, then the peak RSS) and "idle" (import the port, then the peak RSS: the baseline).
 * Exit codes: 0 the result document is written (a cell that threw is recorded in it); 3 the port is
 * not available (flash.ts not written yet), said in the document's "unavailable"; 1 anything else.
 */

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { endianness } from "node:os";
import { join } from "node:path";

type Dtype = "float64" | "float32";
type Mode = "time" | "memory" | "idle";

interface Cell {
  readonly n: number;
  readonly dtype: Dtype;
  readonly causal: boolean;
}

interface Plan {
  readonly mode: Mode;
  readonly port: string;
  readonly inputs: string;
  readonly d: number;
  readonly cells: readonly Cell[];
  readonly min_runs: number;
  readonly max_runs: number;
  readonly budget_s: number;
  readonly warmup_s: number;
  readonly outputs: string;
  readonly result: string;
  readonly corrupt?: boolean;
}

interface CellRecord {
  n: number;
  dtype: Dtype;
  causal: boolean;
  warmup_runs?: number;
  runs_ms?: number[];
  median_ms?: number;
  output?: string;
  error?: string;
}

/** flash.ts's flat tensors: row-major data with its shape beside it. */
interface FlatTensor {
  readonly shape: readonly number[];
  readonly data: Float64Array | Float32Array;
}
type FlatAttention = (
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options: { isCausal?: boolean },
) => FlatTensor;
type NestedAttention = (
  query: readonly (readonly number[])[],
  key: readonly (readonly number[])[],
  value: readonly (readonly number[])[],
  options: { isCausal?: boolean },
) => number[][];

/** One cell made ready: `run` is the timed call, `flatten` turns its output into float64 [n, d]. */
interface Prepared {
  readonly run: () => unknown;
  readonly flatten: (output: unknown) => Float64Array;
}

interface Port {
  readonly prepare: (
    query: Float64Array,
    key: Float64Array,
    value: Float64Array,
    cell: Cell,
    d: number,
  ) => Prepared;
}

/** The port cannot run here at all (not an error in the port): exit code 3. */
class Unavailable extends Error {}

const TYPESCRIPT_PORTS = ["typescript", "typescript-flash"];

/** [n, d] row-major -> number[][] (the readable port's form). */
function nested(data: Float64Array, n: number, d: number): number[][] {
  const rows: number[][] = [];
  for (let i = 0; i < n; i++) {
    rows.push(Array.from(data.subarray(i * d, (i + 1) * d)));
  }
  return rows;
}

function checkShape(shape: readonly number[], n: number, d: number): void {
  if (shape.length !== 2 || shape[0] !== n || shape[1] !== d) {
    throw new Error(`output has shape [${shape.join(", ")}], expected [${n}, ${d}]`);
  }
}

async function loadReadable(): Promise<Port> {
  const { scaledDotProductAttention } = await import("./attention.ts");
  const attention = scaledDotProductAttention as NestedAttention;
  return {
    prepare(query, key, value, cell, d) {
      if (cell.dtype !== "float64") {
        throw new Error(`the readable port computes in float64 (number[][]) only, not ${cell.dtype}`);
      }
      const [Q, K, V] = [query, key, value].map((x) => nested(x, cell.n, d)); // [n, d] each
      return {
        run: () => attention(Q, K, V, { isCausal: cell.causal }),
        flatten(output) {
          const rows = output as number[][];
          checkShape([rows.length, rows[0]?.length ?? 0], cell.n, d);
          const flat = new Float64Array(cell.n * d);
          rows.forEach((row, i) => flat.set(row, i * d));
          return flat;
        },
      };
    },
  };
}

async function loadFlash(): Promise<Port> {
  const specifier = "./flash.ts"; // a variable, so that typechecking does not need the file to exist
  let module: { scaledDotProductAttentionFlat?: unknown };
  try {
    module = (await import(specifier)) as { scaledDotProductAttentionFlat?: unknown };
  } catch (error) {
    if (!existsSync(new URL(specifier, import.meta.url))) {
      throw new Unavailable("typescript/src/flash.ts does not exist yet (the fast port is being written)");
    }
    throw error; // the file is there but does not load: a real failure
  }
  if (typeof module.scaledDotProductAttentionFlat !== "function") {
    throw new Error("typescript/src/flash.ts does not export scaledDotProductAttentionFlat");
  }
  const attention = module.scaledDotProductAttentionFlat as FlatAttention;
  return {
    prepare(query, key, value, cell, d) {
      const storage = (x: Float64Array) => (cell.dtype === "float32" ? Float32Array.from(x) : x);
      const shape = [cell.n, d];
      const [Q, K, V] = [query, key, value].map((x): FlatTensor => ({ shape, data: storage(x) }));
      return {
        run: () => attention(Q, K, V, { isCausal: cell.causal }),
        flatten(output) {
          const tensor = output as FlatTensor;
          checkShape(tensor.shape, cell.n, d);
          return Float64Array.from(tensor.data);
        },
      };
    },
  };
}

async function loadPort(name: string): Promise<Port> {
  if (name === "typescript") {
    return loadReadable();
  }
  if (name === "typescript-flash") {
    return loadFlash();
  }
  throw new Error(`unknown TypeScript port '${name}'; choose from ${TYPESCRIPT_PORTS.join(", ")}`);
}

/** Warm up, then time runs: at least minRuns; past that, more only while the timed runs have
 * taken less than budgetS in all, up to maxRuns (bench_worker.time_cell, line for line). */
export function timeCell(
  run: () => unknown,
  minRuns: number,
  maxRuns: number,
  budgetS: number,
  warmupS: number,
): { output: unknown; warmupRuns: number; timesMs: number[] } {
  const started = performance.now();
  let warmupRuns = 0;
  for (;;) {
    run();
    warmupRuns += 1;
    if (warmupRuns >= 20 || performance.now() - started >= warmupS * 1e3) {
      break;
    }
  }
  const timesMs: number[] = [];
  let spentMs = 0;
  let output: unknown = null;
  while (timesMs.length < minRuns || (timesMs.length < maxRuns && spentMs < budgetS * 1e3)) {
    const start = performance.now();
    output = run();
    const elapsed = performance.now() - start;
    timesMs.push(elapsed);
    spentMs += elapsed;
  }
  return { output, warmupRuns, timesMs };
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** A raw little-endian float64 file of n*d numbers. */
function readInput(folder: string, n: number, d: number, which: string): Float64Array {
  const path = join(folder, `n${n}-${which}.f64`);
  const bytes = readFileSync(path);
  if (bytes.byteLength !== n * d * 8) {
    throw new Error(`${path} holds ${bytes.byteLength} bytes, expected n*d*8 = ${n}*${d}*8`);
  }
  if (bytes.byteOffset % 8 === 0) {
    return new Float64Array(bytes.buffer, bytes.byteOffset, n * d); // no copy
  }
  const copy = new Float64Array(n * d);
  new Uint8Array(copy.buffer).set(bytes);
  return copy;
}

export function outputName(port: string, n: number, dtype: Dtype, causal: boolean): string {
  return `${port}-${dtype}-${causal ? "causal" : "full"}-n${n}.f64`;
}

/** VmHWM from /proc/self/status (KiB), or null where there is no /proc. */
function vmHwmKib(): number | null {
  try {
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync("/proc/self/status", "latin1"));
    return match === null ? null : Number(match[1]);
  } catch {
    return null;
  }
}

async function runPlan(plan: Plan): Promise<Record<string, unknown>> {
  const port = await loadPort(plan.port);
  const cells: CellRecord[] = [];
  for (const cell of plan.mode === "idle" ? [] : plan.cells) {
    const record: CellRecord = { n: cell.n, dtype: cell.dtype, causal: cell.causal };
    const label = `${plan.port} ${cell.dtype} n=${cell.n} causal=${cell.causal ? "on" : "off"}`;
    try {
      const [query, key, value] = ["query", "key", "value"].map((w) =>
        readInput(plan.inputs, cell.n, plan.d, w),
      );
      const prepared = port.prepare(query, key, value, cell, plan.d);
      if (plan.mode === "memory") {
        prepared.run(); // exactly one pass: the peak is read at exit
        record.runs_ms = [];
      } else {
        const timed = timeCell(prepared.run, plan.min_runs, plan.max_runs, plan.budget_s, plan.warmup_s);
        const out64 = prepared.flatten(timed.output);
        if (plan.corrupt === true) {
          out64[out64.length - 1] += 0.01; // test hook: a wrong answer the parent must catch
        }
        const path = join(plan.outputs, outputName(plan.port, cell.n, cell.dtype, cell.causal));
        writeFileSync(path, new Uint8Array(out64.buffer, out64.byteOffset, out64.byteLength));
        Object.assign(record, {
          warmup_runs: timed.warmupRuns,
          runs_ms: timed.timesMs,
          median_ms: median(timed.timesMs),
          output: path,
        });
        console.error(
          `${label}: median ${record.median_ms?.toFixed(3)} ms over ${timed.timesMs.length} runs`,
        );
      }
    } catch (error) {
      record.error = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      console.error(`${label}: FAILED: ${record.error}`);
    }
    cells.push(record);
  }
  return {
    port: plan.port,
    mode: plan.mode,
    versions: { node: process.versions.node, v8: process.versions.v8 },
    cells,
    vm_hwm_kib: vmHwmKib(),
    ru_maxrss_kib: process.resourceUsage().maxRSS, // KiB; only a fallback: it starts at the parent's peak (fork + exec)
  };
}

async function main(argv: string[]): Promise<number> {
  if (argv.length !== 1) {
    console.error("usage: node typescript/src/bench.ts PLAN.json");
    return 1;
  }
  const plan = JSON.parse(readFileSync(argv[0], "utf8")) as Plan;
  if (endianness() !== "LE") {
    console.error(
      "attention-port bench (typescript): the raw input files are little-endian; this machine is not",
    );
    return 1;
  }
  try {
    const result = await runPlan(plan);
    writeFileSync(plan.result, `${JSON.stringify(result, null, 1)}\n`);
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    const unavailable = error instanceof Unavailable;
    writeFileSync(
      plan.result,
      `${JSON.stringify({ port: plan.port, mode: plan.mode, [unavailable ? "unavailable" : "error"]: message })}\n`,
    );
    console.error(`attention-port bench (typescript): ${plan.port}: ${message}`);
    return unavailable ? 3 : 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}

export { main };
