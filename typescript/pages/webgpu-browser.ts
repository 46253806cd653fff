/**
 * The script of the WebGPU port's page (webgpu-page.ts builds it): what the Python harness calls
 * in headless Chromium, through playwright, to verify and to time the port.
 *
 *     attentionPort.runFixtureCases(everyAnswer)
 *                                      every fixture case written into the page, in one device,
 *                                      judged as cli.ts judges (kit-cases.ts): a reply as cli.ts's
 *                                      (results.ts), as a string
 *     attentionPort.bench(plan)        time one port call per cell on the given inputs
 *     attentionPort.adapter()          the adapter the port runs on, described
 *     attentionPort.attend(call)       one call on nested arrays, for the tests
 *     attentionPort.layer(call)        one call of the shared layer over the port's core, for the tests
 *
 * The attention cases are the kit's (the page holds them as fixture-data.ts gives them), run and
 * judged in float32 through the conformance kit as cli.ts runs the Node ports: valid cases go
 * through the flat entry with Float32Array tensors (the port computes in float32 whatever it is
 * given), invalid ones through the nested entry with their inputs as written, whose checks are the
 * same. Only the output is judged: the other steps would be the readable port's (webgpu.ts's
 * attentionSteps). The layer's and RoPE's cases go through the shared layer (layer.ts) over the
 * port's attentionSteps, and their answers cross (the kit has no layer rule).
 */

import { type AttentionFunction, testCase } from "../conformance/kit.ts";
import type { RawCase } from "../conformance/raw-case.ts";
import { type FlatEntry, float32Entry, type Judged, runCase } from "../harness/kit-cases.ts";
import { type LayerCase, runLayerCase } from "../harness/layer-cases.ts";
import { replyJson, thrownJson } from "../harness/results.ts";
import { type LayerOptions, type LayerParams, type LayerResult, layerWithAsync } from "../src/layer.ts";
import {
  type AdapterDescription,
  type AttentionOptions,
  createAttention,
  type NestedArray,
  type TensorInput,
  type WebGpuAttention,
  type WebGpuSetup,
} from "../src/webgpu.ts";

/** An attention case as the page holds it (webgpu-page.ts writes them): the kit's. */
export type PageCase = RawCase;

/** A layer or RoPE case as the page holds it: as golden/reader.ts's loadLayerFixtures reads it. */
export type PageLayerCase = LayerCase;

/** One bench cell: query, key and value [n, d] (float64 values, rounded to float32 by the port),
 * or of the given shapes (a decode step: [1, Hq, 1, E] and [1, Hkv, Lk, E], grouped-query heads). */
export interface BenchCell {
  readonly n: number;
  readonly d: number;
  readonly causal: boolean;
  readonly shapes?: readonly [number[], number[], number[]];
  readonly enableGqa?: boolean;
  readonly query: readonly number[];
  readonly key: readonly number[];
  readonly value: readonly number[];
  readonly minRuns: number;
  readonly maxRuns: number;
  readonly budgetS: number;
  readonly warmupS: number;
}

declare global {
  // Written into the page by webgpu-page.ts.
  var WEBGPU_CASES: readonly (PageCase | PageLayerCase)[] | undefined;
  var attentionPort: unknown;
}

let attention: Promise<WebGpuAttention> | null = null;

/** One device for the whole page: the pipeline is compiled once. */
function device(): Promise<WebGpuAttention> {
  attention ??= createAttention();
  return attention;
}

/** A layer or RoPE case's answer: the shared layer over the port's core (projections and RoPE in
 * float64 on the CPU, each head attended on the GPU in float32). */
async function layerAnswer(port: WebGpuAttention, c: PageLayerCase): Promise<string> {
  try {
    return await runLayerCase(layerWithAsync(port.attentionSteps.bind(port)), c);
  } catch (error) {
    return thrownJson(error);
  }
}

/** Every case in the page, one after the other on one device, each attention case judged by the
 * kit in float32: a reply as cli.ts's (what crosses as kit-cases.ts says; with everyAnswer, every
 * attention case's answer too, for verify's cross-check), and the adapter it ran on. */
async function runFixtureCases(everyAnswer = false): Promise<string> {
  const port = await device();
  const cases = globalThis.WEBGPU_CASES ?? [];
  // An invalid case through the nested entry (the same checks as the flat one); the output only.
  const nested: AttentionFunction = async (query, key, value, options) => {
    // Its inputs as written (ragged, strings, null): the port's checks refuse them.
    const steps = port.attentionSteps.bind(port) as unknown as (
      ...args: unknown[]
    ) => Promise<{ readonly output: unknown; readonly outputShape: readonly number[] }>;
    const { output, outputShape } = await steps(query, key, value, options);
    return { output, scoresShape: [], outputShape };
  };
  const flat = float32Entry(port.scaledDotProductAttentionFlat.bind(port) as FlatEntry);
  const start = performance.now();
  const reply: Judged = { verdicts: {}, answers: {} };
  for (const c of cases) {
    if ("kind" in c) {
      reply.answers[c.id] = await layerAnswer(port, c);
      continue;
    }
    const test = testCase(c);
    await runCase(reply, test.rule === null ? nested : flat, test, "float32", everyAnswer);
  }
  const elapsed = performance.now() - start;
  return replyJson("webgpu", elapsed, reply.verdicts, reply.answers, { adapter: port.adapter.summary });
}

/** One cell of the bench: warm up, then time whole calls (upload, dispatch, read back) as
 * bench/worker.ts's timeCell does; the last output comes back for the parent to check. */
async function bench(cell: BenchCell): Promise<{ timesMs: number[]; warmupRuns: number; output: number[] }> {
  const port = await device();
  const shapes = cell.shapes ?? [
    [cell.n, cell.d],
    [cell.n, cell.d],
    [cell.n, cell.d],
  ];
  const [query, key, value] = [cell.query, cell.key, cell.value].map((x, n) => ({
    shape: shapes[n],
    data: Float32Array.from(x),
  }));
  const options = { isCausal: cell.causal, enableGqa: cell.enableGqa ?? false };
  const call = () => port.scaledDotProductAttentionFlat(query, key, value, options);
  let warmupRuns = 0;
  let warmupMs = 0;
  while (warmupRuns === 0 || (warmupRuns < 20 && warmupMs < cell.warmupS * 1e3)) {
    const start = performance.now();
    await call();
    warmupMs += performance.now() - start;
    warmupRuns += 1;
  }
  const timesMs: number[] = [];
  let output: Float32Array | Float64Array = new Float32Array(0);
  let spentMs = 0;
  while (timesMs.length < cell.minRuns || (timesMs.length < cell.maxRuns && spentMs < cell.budgetS * 1e3)) {
    const start = performance.now();
    output = (await call()).data;
    const elapsed = performance.now() - start;
    timesMs.push(elapsed);
    spentMs += elapsed;
  }
  return { timesMs, warmupRuns, output: Array.from(output) };
}

async function adapter(): Promise<AdapterDescription> {
  return (await device()).adapter;
}

/** One call of the port on nested arrays, for the tests: the output, or what was thrown (name,
 * kind for an AttentionInputError, message). `setup` makes a device of its own (lowered limits). */
async function attend(call: {
  readonly query: unknown;
  readonly key: unknown;
  readonly value: unknown;
  readonly options?: Record<string, unknown>;
  readonly setup?: WebGpuSetup;
}): Promise<{ output?: NestedArray; error?: { name: string; kind?: string; message: string } }> {
  const port = call.setup === undefined ? await device() : await createAttention(call.setup);
  try {
    const output = await port.scaledDotProductAttention(
      call.query as TensorInput,
      call.key as TensorInput,
      call.value as TensorInput,
      call.options as AttentionOptions,
    );
    return { output };
  } catch (error) {
    const { name, message } = error as Error;
    return { error: { name, message, kind: (error as { kind?: string }).kind } };
  } finally {
    if (call.setup !== undefined) {
      port.destroy();
    }
  }
}

/** One call of the shared layer over the port's core on nested arrays (xKv null), with
 * returnCache: the output and the cache, for the tests. */
async function layer(call: {
  readonly xQ: TensorInput;
  readonly params: LayerParams;
  readonly options: LayerOptions;
}): Promise<LayerResult> {
  const port = await device();
  const run = layerWithAsync(port.attentionSteps.bind(port));
  return await run(call.xQ, null, call.params, { ...call.options, returnCache: true });
}

globalThis.attentionPort = { runFixtureCases, bench, adapter, attend, layer };
