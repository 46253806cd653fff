/**
 * The Node worker of `attention-port bench`: times one port in a process of its own.
 *
 *     node typescript/bench/worker.ts PLAN.json
 *
 * python/attention_port/bench/run.py (the parent) draws the inputs once, writes them as raw
 * little-endian float64 files and starts one worker per port. Its twin for the Python ports is
 * python/attention_port/bench/worker.py: the same plan, the same timing loop, the same result
 * document (see there for every field). PORTS below is this side of run.py's port table:
 *     typescript               attention.ts, the readable port: number[][] in and out (float64)
 *     typescript-flash         flash.ts's flat entry, {shape, data} tensors: Float64Array for
 *                              float64, Float32Array for float32
 *     typescript-flash-nested  flash.ts through number[][], as a caller with nested arrays has it
 *     typescript-simd          simd.ts's flat entry (Float32Array inputs computed in float32); a
 *                              decode step as a generator runs it: its resident cache
 *                              (SimdKeyValueCache) holds the first n - 1 keys and values, and each
 *                              run appends the last token's and attends
 *     typescript-simd-2w       the same with `workers: 2`
 *     typescript-simd-copy     decode only: the flat entry handed the whole cache each step, as
 *                              onnxruntime is, so that the cost of copying it stays in view
 *     typescript-simd-nested   simd.ts through number[][]
 *     onnxruntime-node         the peers, running run.py's ONNX graph (plan.models) from the
 *     onnxruntime-web          bench-only packages in plan.peers; Web is its WebAssembly backend
 *     wasm-limits              the machine's limits as WebAssembly sees them (no attention): the
 *                              read bandwidth of a streaming sum and the 128-bit multiply-add peak,
 *                              from simd.ts's kernel module (limitReadSum, limitMaddPeak)
 *
 * A cell is a prefill cell (single-head self-attention, [n, d]) or, with kind "decode", one decode
 * step: query [1, hq, 1, d] against key and value [1, hkv, n, d] (n keys: the cache and the new
 * token), grouped-query heads, no mask (one row after every key sees every key). Only the flat
 * entries and the peers take decode cells.
 *
 * Modes: "time" (warm-up, timed runs, output written for the parent to check), "memory" (exactly one
 * pass, then the peak RSS) and "idle" (load the port, then the peak RSS: the baseline).
 * Exit codes: 0 the result document is written (a cell that threw is recorded in it); 1 anything else.
 */

import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { endianness } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { writeAtomic } from "../files.ts";
import { scaledDotProductAttention as readableAttention } from "../src/attention.ts";
import {
  type FlatTensor,
  scaledDotProductAttention as flashAttention,
  scaledDotProductAttentionFlat,
} from "../src/flash.ts";
import {
  createSimdKeyValueCache,
  kernelBuild,
  scaledDotProductAttention as simdAttention,
  scaledDotProductAttentionFlat as simdFlat,
} from "../src/simd-node.ts";
import { BUILDS } from "../wasm/stamp.ts";

type Dtype = "float64" | "float32";

interface Cell {
  readonly n: number; // prefill: tokens; decode: keys in the cache
  readonly d: number;
  readonly dtype: Dtype;
  readonly causal: boolean;
  readonly kind?: "prefill" | "decode" | "limits";
  readonly hq?: number; // decode: query heads
  readonly hkv?: number; // decode: key/value heads
  readonly window?: readonly [number, number] | null; // a windowed cell: [left, right]
  readonly query_offset?: number; // a windowed decode step: its row's position (the last key's)
  readonly bytes?: number; // limits: the buffer the read bandwidth streams over
}

/** The cell's tensors' shapes: [n, d] each for prefill; [1, hq, 1, d], [1, hkv, n, d] twice for decode. */
function shapesOf(cell: Cell): [number[], number[], number[]] {
  if (cell.kind === "decode") {
    const kv = [1, cell.hkv!, cell.n, cell.d];
    return [[1, cell.hq!, 1, cell.d], kv, kv];
  }
  return [
    [cell.n, cell.d],
    [cell.n, cell.d],
    [cell.n, cell.d],
  ];
}

/** Where run.py wrote one input of the cell (timing.input_path and timing.decode_input_path). */
function inputName(cell: Cell, which: string): string {
  return cell.kind === "decode"
    ? `decode-k${cell.n}-h${cell.hq}-kv${cell.hkv}-e${cell.d}-${which}.f64`
    : `n${cell.n}-d${cell.d}-${which}.f64`;
}

interface Plan {
  readonly mode: "time" | "memory" | "idle";
  readonly port: string;
  readonly inputs: string;
  readonly cells: readonly Cell[];
  readonly min_runs: number;
  readonly max_runs: number;
  readonly budget_s: number;
  readonly warmup_s: number;
  readonly threads: number;
  readonly outputs: string;
  readonly models: string;
  readonly peers: string;
  readonly result: string;
  readonly corrupt?: boolean;
}

/** One cell made ready: `run` is the timed call, `flatten` turns its output into float64 [n, d];
 * `reset`, where a run changes the port's state (a resident cache grows), puts it back before the
 * next run, outside the timed span. */
interface Prepared {
  readonly run: () => unknown;
  readonly flatten: (output: unknown) => Float64Array;
  readonly reset?: () => void;
}

interface Port {
  readonly prepare: (query: Float64Array, key: Float64Array, value: Float64Array, cell: Cell) => Prepared;
  readonly versions?: Record<string, string>;
}

/** The options a port is called with for a cell (timing.cell_options in Python): grouped-query
 * heads for a decode step; a windowed cell's window and its decode row's position. */
interface CellOptions {
  readonly isCausal: boolean;
  readonly enableGqa?: boolean;
  readonly window?: readonly [number, number];
  readonly queryOffset?: number;
}

function cellOptions(cell: Cell): CellOptions {
  return {
    isCausal: cell.causal,
    ...(cell.kind === "decode" ? { enableGqa: true } : {}),
    ...(cell.window != null ? { window: cell.window } : {}),
    ...(cell.query_offset ? { queryOffset: cell.query_offset } : {}),
  };
}

/** The file a cell's output is written to (timing.output_name in Python). */
function outputName(port: string, cell: Cell): string {
  const window = cell.window == null ? "" : `-w${cell.window[0]}-${cell.window[1]}`;
  return `${port}-${cell.kind ?? "prefill"}-${cell.dtype}-${cell.causal ? "causal" : "full"}${window}-n${cell.n}-d${cell.d}.f64`;
}

type NestedAttention = (
  query: number[][],
  key: number[][],
  value: number[][],
  options: CellOptions,
) => number[][];
/** A promise too: a port that hands the work to worker threads answers asynchronously. */
type FlatAttention = (
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options: CellOptions,
) => FlatTensor | Promise<FlatTensor>;

const PORTS: Record<string, (plan: Plan) => Port | Promise<Port>> = {
  typescript: () => nestedPort(readableAttention),
  "typescript-flash": () => flatPort(scaledDotProductAttentionFlat),
  "typescript-flash-nested": () => nestedPort(flashAttention),
  "typescript-simd": () => simdPort(residentDecode(flatPort(simdFlat), 1)),
  "typescript-simd-2w": () =>
    simdPort(
      residentDecode(
        flatPort((q, k, v, options) => simdFlat(q, k, v, { ...options, workers: 2 })),
        2,
      ),
    ),
  "typescript-simd-copy": () => simdPort(flatPort(simdFlat)),
  "typescript-simd-nested": () => simdPort(nestedPort(simdAttention)),
  "onnxruntime-node": (plan) => onnxPort(plan, "onnxruntime-node"),
  "onnxruntime-web": (plan) => onnxPort(plan, "onnxruntime-web"),
  "wasm-limits": () => limitsPort(),
};

/** The SIMD port, with its WebAssembly build chosen and checked at load and named among the
 * versions. */
function simdPort(port: Port): Port {
  return { ...port, versions: { ...port.versions, "simd.ts kernel build": kernelBuild() } };
}

/** The port's prefill cells as `port` times them; its decode cells as a generator runs a step
 * with simd.ts's resident cache: the cache, made ready untimed, holds keys and values 0 .. n - 2;
 * a run appends row n - 1's (one token: [1, hkv, 1, d] each) and attends the query against all n,
 * and `reset` takes the token off again (truncate) so that every run is the same step. */
function residentDecode(port: Port, workers: number): Port {
  return {
    ...port,
    prepare(query, key, value, cell) {
      if (cell.kind !== "decode") {
        return port.prepare(query, key, value, cell);
      }
      const [hkv, n, d] = [cell.hkv!, cell.n, cell.d];
      const cache = createSimdKeyValueCache([1, hkv, d], d, cell.dtype);
      const rows = (x: Float64Array, from: number, to: number) => {
        const out = new Float64Array(hkv * (to - from) * d);
        for (let h = 0; h < hkv; h++) {
          out.set(x.subarray((h * n + from) * d, (h * n + to) * d), h * (to - from) * d);
        }
        return { shape: [1, hkv, to - from, d], data: storage(out, cell) };
      };
      cache.append(rows(key, 0, n - 1), rows(value, 0, n - 1));
      const [newKey, newValue] = [rows(key, n - 1, n), rows(value, n - 1, n)];
      const q = { shape: shapesOf(cell)[0], data: storage(query, cell) };
      // A windowed step: the cache holds every key, and the kernel reads the window's only.
      const options = { ...cellOptions(cell), workers };
      return {
        run() {
          cache.append(newKey, newValue);
          return cache.attend(q, options);
        },
        reset: () => cache.truncate(n - 1),
        flatten(output) {
          const tensor = output as FlatTensor;
          checkShape(tensor.shape, cell);
          return Float64Array.from(tensor.data);
        },
      };
    },
  };
}

/** float64 [n, d] as the cell's dtype holds it: a Float32Array copy for float32. */
function storage(x: Float64Array, cell: Cell): Float64Array | Float32Array {
  return cell.dtype === "float32" ? Float32Array.from(x) : x;
}

function checkShape(shape: readonly number[], cell: Cell): void {
  const want = cell.kind === "decode" ? shapesOf(cell)[0] : [cell.n, cell.d];
  if (shape.length !== want.length || shape.some((n, i) => n !== want[i])) {
    throw new Error(`output has shape [${shape.join(", ")}], expected [${want.join(", ")}]`);
  }
}

/** A port that takes and gives number[][] (float64 only). */
function nestedPort(attention: NestedAttention): Port {
  return {
    prepare(query, key, value, cell) {
      if (cell.dtype !== "float64" || cell.kind === "decode") {
        throw new Error(`this entry is timed on float64 prefill cells only, not ${cell.dtype} ${cell.kind}`);
      }
      const [Q, K, V] = [query, key, value].map((x) =>
        Array.from({ length: cell.n }, (_, i) => Array.from(x.subarray(i * cell.d, (i + 1) * cell.d))),
      ); // [n, d] each
      return {
        run: () => attention(Q, K, V, cellOptions(cell)),
        flatten(output) {
          const rows = output as number[][];
          checkShape([rows.length, rows[0]?.length ?? 0], cell);
          return Float64Array.from(rows.flat());
        },
      };
    },
  };
}

/** A port with flash.ts's flat entry: {shape, data}, Float32Array storage for float32. */
function flatPort(attention: FlatAttention): Port {
  return {
    prepare(query, key, value, cell) {
      const shapes = shapesOf(cell);
      const [Q, K, V] = [query, key, value].map(
        (x, n): FlatTensor => ({ shape: shapes[n], data: storage(x, cell) }),
      );
      const options = cellOptions(cell);
      return {
        run: () => attention(Q, K, V, options),
        flatten(output) {
          const tensor = output as FlatTensor;
          checkShape(tensor.shape, cell);
          return Float64Array.from(tensor.data);
        },
      };
    },
  };
}

/** What the bench uses of onnxruntime's JavaScript API (the same in -node and -web). The packages
 * are bench-only, installed by scripts/bench beside this project, so their types are not here. */
interface OrtTensor {
  readonly dims: readonly number[];
  readonly data: Float64Array | Float32Array;
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
}
interface Ort {
  readonly Tensor: new (type: Dtype, data: Float64Array | Float32Array, dims: number[]) => OrtTensor;
  readonly InferenceSession: { create(path: string, options: object): Promise<OrtSession> };
  readonly env: { wasm: { numThreads: number } };
}

/** peers.model_name and peers.decode_model_name: the graph file for one cell (a windowed one's
 * graph masks outside its window, peers.py says how). */
function modelName(cell: Cell): string {
  const window = cell.window == null ? "" : `-w${cell.window[0]}-${cell.window[1]}`;
  return cell.kind === "decode"
    ? `decode-h${cell.hq}-kv${cell.hkv}-e${cell.d}-${cell.dtype}${window}.onnx`
    : `attention-d${cell.d}-${cell.dtype}-${cell.causal ? "causal" : "full"}${window}.onnx`;
}

/** An onnxruntime package from plan.peers running the graph in plan.models, one thread by default. */
async function onnxPort(plan: Plan, name: "onnxruntime-node" | "onnxruntime-web"): Promise<Port> {
  const require = createRequire(join(plan.peers, "package.json"));
  const ort = (await import(pathToFileURL(require.resolve(name)).href)) as Ort;
  const web = name === "onnxruntime-web";
  if (web) {
    ort.env.wasm.numThreads = plan.threads; // a WebAssembly worker pool only when > 1
  }
  const options = {
    executionProviders: [web ? "wasm" : "cpu"],
    intraOpNumThreads: plan.threads,
    interOpNumThreads: 1,
  };
  const sessions = new Map<string, OrtSession>();
  for (const cell of plan.cells) {
    // Idle mode too: a session (the WebAssembly module, its heap) is the runtime's resting cost.
    const file = modelName(cell);
    if (!sessions.has(file)) {
      sessions.set(file, await ort.InferenceSession.create(join(plan.models, file), options));
    }
  }
  const version = JSON.parse(readFileSync(join(plan.peers, "node_modules", name, "package.json"), "utf8"));
  return {
    versions: { [name]: version.version },
    prepare(query, key, value, cell) {
      const session = sessions.get(modelName(cell))!;
      const shapes = shapesOf(cell);
      const tensor = (x: Float64Array, n: number) => new ort.Tensor(cell.dtype, storage(x, cell), shapes[n]);
      const scale = new ort.Tensor(cell.dtype, storage(Float64Array.of(1 / Math.sqrt(cell.d)), cell), []);
      const feeds = { query: tensor(query, 0), key: tensor(key, 1), value: tensor(value, 2), scale };
      return {
        run: () => session.run(feeds),
        flatten(output) {
          const tensor = (output as Record<string, OrtTensor>).output;
          checkShape(tensor.dims, cell);
          return Float64Array.from(tensor.data);
        },
      };
    },
  };
}

/** The machine's limits in WebAssembly, from simd.ts's kernel module (its relaxed build, as simd.ts
 * picks where it validates): a cell of kind "limits" times a streaming sum over `bytes` of memory
 * and a loop of independent 128-bit multiply-adds, and returns [read GB/s, GFLOP/s] as its output:
 * the best of every run so far, as a limit is what the machine can do (a run another process
 * interrupted says less about it). */
function limitsPort(): Port {
  const build = WebAssembly.validate(readFileSync(BUILDS.relaxed.file)) ? "relaxed" : "baseline";
  const module = new WebAssembly.Module(readFileSync(BUILDS[build].file));
  return {
    versions: { "limits kernel build": build },
    prepare(_query, _key, _value, cell) {
      const bytes = Math.ceil(cell.bytes! / 128) * 128;
      const pages = Math.ceil((bytes + 2 ** 20) / 65536);
      const memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
      const exports = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as {
        limitReadSum(ptr: number, n: number): number;
        limitMaddPeak(iterations: number, factor: number, addend: number): number;
        heapBase(): number;
      };
      const base = Math.ceil(exports.heapBase() / 128) * 128;
      new Float32Array(memory.buffer, base, bytes / 4).fill(1); // touched: every page is resident
      const iterations = 2e7;
      const best = [0, 0]; // GB/s, GFLOP/s
      return {
        run: () => {
          let start = performance.now();
          exports.limitReadSum(base, bytes / 4);
          const readMs = performance.now() - start;
          start = performance.now();
          exports.limitMaddPeak(iterations, 0.999999, 1e-7); // s·a + b settles at b / (1 - a) = 0.1: no overflow, no subnormals
          const maddMs = performance.now() - start;
          best[0] = Math.max(best[0], bytes / (readMs * 1e6));
          best[1] = Math.max(best[1], (96 * iterations) / (maddMs * 1e6));
          return Float64Array.from(best);
        },
        flatten: (output) => output as Float64Array,
      };
    },
  };
}

/** One run and its wall-clock time in ms. A port whose call returns a promise (onnxruntime) is
 * awaited inside the timed span; a plain result is not awaited, which would add a tick to it. */
async function clock(run: () => unknown): Promise<[unknown, number]> {
  const start = performance.now();
  let output = run();
  if (output instanceof Promise) {
    output = await output;
  }
  return [output, performance.now() - start];
}

/** Warm up, then time runs: at least minRuns; past that, more only while the timed runs have
 * taken less than budgetS in all, up to maxRuns (the loop of worker.time_cell). */
async function timeCell(
  { run, reset }: Pick<Prepared, "run" | "reset">,
  minRuns: number,
  maxRuns: number,
  budgetS: number,
  warmupS: number,
): Promise<{ output: unknown; warmupRuns: number; timesMs: number[] }> {
  let warmupRuns = 0;
  let warmupMs = 0;
  while (warmupRuns === 0 || (warmupRuns < 20 && warmupMs < warmupS * 1e3)) {
    warmupMs += (await clock(run))[1];
    reset?.();
    warmupRuns += 1;
  }
  const timesMs: number[] = [];
  let spentMs = 0;
  let output: unknown = null;
  while (timesMs.length < minRuns || (timesMs.length < maxRuns && spentMs < budgetS * 1e3)) {
    const [result, elapsedMs] = await clock(run);
    reset?.();
    output = result;
    timesMs.push(elapsedMs);
    spentMs += elapsedMs;
  }
  return { output, warmupRuns, timesMs };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** A raw little-endian float64 file of n*d numbers (worker.input_path names it). */
function readInput(folder: string, cell: Cell, which: string): Float64Array {
  if (cell.kind === "limits") {
    return new Float64Array(0); // no inputs: the limits stream over their own buffer
  }
  const path = join(folder, inputName(cell, which));
  const bytes = readFileSync(path);
  const shape = shapesOf(cell)[["query", "key", "value"].indexOf(which)];
  const count = shape.reduce((a, n) => a * n, 1);
  if (bytes.byteLength !== count * 8) {
    throw new Error(`${path} holds ${bytes.byteLength} bytes, expected [${shape.join(", ")}] float64`);
  }
  if (bytes.byteOffset % 8 === 0) {
    return new Float64Array(bytes.buffer, bytes.byteOffset, count); // no copy
  }
  const copy = new Float64Array(count);
  new Uint8Array(copy.buffer).set(bytes);
  return copy;
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
  const load = PORTS[plan.port];
  if (load === undefined) {
    throw new Error(`unknown Node port '${plan.port}'; choose from ${Object.keys(PORTS).join(", ")}`);
  }
  const port = await load(plan);
  const cells: Record<string, unknown>[] = [];
  for (const cell of plan.mode === "idle" ? [] : plan.cells) {
    const record: Record<string, unknown> = { ...cell };
    const window = cell.window == null ? "" : ` window=[${cell.window.join(", ")}]`;
    const label = `${plan.port} ${cell.kind ?? "prefill"} ${cell.dtype} n=${cell.n} d=${cell.d} causal=${cell.causal ? "on" : "off"}${window}`;
    try {
      const [query, key, value] = ["query", "key", "value"].map((w) => readInput(plan.inputs, cell, w));
      const prepared = port.prepare(query, key, value, cell);
      if (plan.mode === "memory") {
        await prepared.run(); // exactly one pass: the peak is read at exit
        record.runs_ms = [];
      } else {
        const timed = await timeCell(prepared, plan.min_runs, plan.max_runs, plan.budget_s, plan.warmup_s);
        const out64 = prepared.flatten(timed.output);
        if (plan.corrupt === true) {
          out64[out64.length - 1] += 0.01; // test hook: a wrong answer the parent must catch
        }
        const path = join(plan.outputs, outputName(plan.port, cell));
        writeFileSync(path, new Uint8Array(out64.buffer, out64.byteOffset, out64.byteLength));
        const medianMs = median(timed.timesMs);
        Object.assign(record, {
          warmup_runs: timed.warmupRuns,
          runs_ms: timed.timesMs,
          median_ms: medianMs,
          output: path,
        });
        console.error(`${label}: median ${medianMs.toFixed(3)} ms over ${timed.timesMs.length} runs`);
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
    versions: { node: process.versions.node, v8: process.versions.v8, ...port.versions },
    cells,
    vm_hwm_kib: vmHwmKib(),
    ru_maxrss_kib: process.resourceUsage().maxRSS, // KiB; only a fallback: it starts at the parent's peak (fork + exec)
  };
}

export async function main(argv: string[]): Promise<number> {
  if (argv.length !== 1) {
    console.error("usage: node typescript/bench/worker.ts PLAN.json");
    return 1;
  }
  if (endianness() !== "LE") {
    console.error("attention-port bench (node): the raw input files are little-endian; this machine is not");
    return 1;
  }
  const plan = JSON.parse(readFileSync(argv[0], "utf8")) as Plan;
  try {
    const result = await runPlan(plan);
    writeAtomic(plan.result, `${JSON.stringify(result, null, 1)}\n`);
    return 0;
  } catch (error) {
    console.error(
      `attention-port bench (node): ${plan.port}: ${error instanceof Error ? error.message : error}`,
    );
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
