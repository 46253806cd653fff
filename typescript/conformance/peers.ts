/**
 * The peers through the conformance kit: what a JavaScript engineer would pick instead of this
 * project's ports, run on every fixture case and judged by the kit, for docs/conformance.md.
 *
 *     node typescript/conformance/peers.ts --peers typescript/bench-peers --out results.json
 *
 * (scripts/conformance installs the peers on first use, runs this, then writes the page from the
 * results with `attention-port conformance-page`.)
 *
 *     onnxruntime-node   the standard ONNX Attention operator (opset 23), CPU provider
 *     onnxruntime-web    the same graph on its WebAssembly backend, in Node
 *     tfjs               tfjs-core on its CPU backend: tfjs has no attention operator, so this is the
 *                        textbook composition of its ops (matMul, softmax, where)
 *
 * onnxruntime runs in float32, onnxruntime-web in float16 too (onnxruntime-node's binding refuses
 * float16 tensors from JavaScript), tfjs in float32 (its CPU backend has no other float). The ONNX graph is one Attention node,
 * written here as protobuf bytes (no onnx package needed); its inputs are rank 4 [B, H, L, E], so an
 * adapter lays a case's [B..., H, L, E] tensors out that way (rank 2 and 3 get leading 1s, two
 * batch dims are merged) and the mask broadcast to the logits' shape, and lays the output back.
 * GQA is the operator's own (fewer key/value heads than query heads). Nothing else is adapted: the
 * peer's answer is judged as it comes. The invalid-input cases are not run: the peers take typed
 * tensors, so the adapter, not the peer, would refuse a ragged array or a string.
 */

import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import type { Dtype, FlatTensor } from "./judge.ts";
import { call, judge, loadCases, type TestCase } from "./kit.ts";

/** One peer at one dtype: a function the kit can call, and what to call it in the report. */
export interface Peer {
  readonly name: string;
  readonly version: string;
  readonly dtype: Dtype;
  readonly about: string;
  readonly run: (test: TestCase) => Promise<unknown>;
}

/** One peer's verdict on one case, as the results file holds it. */
export interface PeerVerdict {
  readonly caseId: string;
  readonly verdict: "pass" | "fail" | "outside";
  readonly problem: string | null;
  readonly budgetUsed: number | null;
}

// ---- the layout every peer takes: rank 4 ------------------------------------------------------

/** A valid case's tensors laid out [B, H, L, E], the mask materialized to [B, Hq, Lq, Lk]. */
export interface Rank4 {
  readonly query: FlatTensor;
  readonly key: FlatTensor;
  readonly value: FlatTensor;
  readonly mask: { readonly dtype: "bool" | "float64"; readonly tensor: FlatTensor } | null;
  readonly isCausal: boolean;
  readonly scale: number | null;
  readonly softcap: number;
  readonly outputShape: readonly number[]; // [B..., Hq, Lq, Ev], the case's own layout
}

function as4(t: FlatTensor): FlatTensor {
  const s = t.shape;
  const lead = s.slice(0, -3).reduce((a, n) => a * n, 1);
  const shape = s.length === 2 ? [1, 1, s[0], s[1]] : s.length === 3 ? [1, ...s] : [lead, ...s.slice(-3)];
  return { shape, data: t.data };
}

/** The case laid out as rank 4, or null for an invalid case. */
export function rank4(test: TestCase): Rank4 | null {
  const rule = test.rule;
  if (rule === null) {
    return null;
  }
  const [query, key, value] = [as4(rule.query), as4(rule.key), as4(rule.value)];
  const logits = rule.expected.logits.shape; // [B..., Hq, Lq, Lk]: fixed by the inputs' shapes
  let mask: Rank4["mask"] = null;
  if (rule.attnMask !== null) {
    // Broadcast numpy-style to the logits' shape, then merged as the inputs are.
    const m = rule.attnMask;
    const size = logits.reduce((a, n) => a * n, 1);
    const data = new Float64Array(size);
    const strides: number[] = new Array(logits.length).fill(0);
    let stride = 1;
    for (let d = m.shape.length - 1; d >= 0; d--) {
      strides[logits.length - m.shape.length + d] = m.shape[d] === 1 ? 0 : stride;
      stride *= m.shape[d];
    }
    for (let n = 0; n < size; n++) {
      let rest = n;
      let at = 0;
      for (let d = logits.length - 1; d >= 0; d--) {
        at += (rest % logits[d]) * strides[d];
        rest = Math.floor(rest / logits[d]);
      }
      data[n] = Number(m.data[at]);
    }
    mask = { dtype: m.dtype, tensor: as4({ shape: logits, data }) };
  }
  const outputShape = [...logits.slice(0, -1), rule.value.shape.at(-1) ?? 0];
  return {
    query,
    key,
    value,
    mask,
    isCausal: test.options.isCausal === true,
    scale: rule.scale,
    softcap: rule.softcap,
    outputShape,
  };
}

// ---- ONNX: one Attention node, as protobuf bytes ----------------------------------------------

/** The protobuf wire format, just enough for a ModelProto (onnx/onnx.proto); the adapters' test
 * writes its GroupQueryAttention model with it too. */
export class Proto {
  readonly bytes: number[] = [];

  varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    do {
      const byte = Number(v & 0x7fn);
      v >>= 7n;
      this.bytes.push(v === 0n ? byte : byte | 0x80);
    } while (v !== 0n);
    return this;
  }
  int(field: number, value: number): this {
    return this.varint(field << 3).varint(value);
  }
  float(field: number, value: number): this {
    const buffer = new DataView(new ArrayBuffer(4));
    buffer.setFloat32(0, value, true);
    this.varint((field << 3) | 5);
    this.bytes.push(...new Uint8Array(buffer.buffer));
    return this;
  }
  bytesField(field: number, data: readonly number[] | Uint8Array): this {
    this.varint((field << 3) | 2).varint(data.length);
    this.bytes.push(...data);
    return this;
  }
  string(field: number, text: string): this {
    return this.bytesField(field, new TextEncoder().encode(text));
  }
  message(field: number, build: (p: Proto) => void): this {
    const inner = new Proto();
    build(inner);
    return this.bytesField(field, inner.bytes);
  }
}

const ONNX_TYPES = { float32: 1, bool: 9, float16: 10, float64: 11 } as const;

/** A model of one Attention node (opset 23) for these input shapes and options. */
export function attentionModel(layout: Rank4, dtype: "float32" | "float16"): Uint8Array {
  const inputs: [string, readonly number[], keyof typeof ONNX_TYPES][] = [
    ["Q", layout.query.shape, dtype],
    ["K", layout.key.shape, dtype],
    ["V", layout.value.shape, dtype],
  ];
  if (layout.mask !== null) {
    inputs.push(["attn_mask", layout.mask.tensor.shape, layout.mask.dtype === "bool" ? "bool" : dtype]);
  }
  const valueInfo = (p: Proto, name: string, shape: readonly number[], type: keyof typeof ONNX_TYPES) =>
    p.string(1, name).message(2, (t) =>
      t.message(1, (tensor) =>
        tensor.int(1, ONNX_TYPES[type]).message(2, (s) => {
          for (const n of shape) {
            s.message(1, (d) => d.int(1, n));
          }
        }),
      ),
    );
  const attributes: [string, "int" | "float", number][] = [["is_causal", "int", layout.isCausal ? 1 : 0]];
  if (layout.scale !== null) {
    attributes.push(["scale", "float", layout.scale]);
  }
  if (layout.softcap !== 0) {
    attributes.push(["softcap", "float", layout.softcap]);
  }
  const model = new Proto()
    .int(1, 11) // ir_version
    .message(8, (o) => o.string(1, "").int(2, 23)) // opset_import: the default domain, opset 23
    .message(7, (graph) => {
      graph.message(1, (node) => {
        for (const [name] of inputs) {
          node.string(1, name);
        }
        node.string(2, "Y").string(3, "attention").string(4, "Attention");
        for (const [name, kind, value] of attributes) {
          node.message(5, (a) => {
            a.string(1, name);
            if (kind === "int") {
              a.int(3, value).int(20, 2);
            } else {
              a.float(2, value).int(20, 1);
            }
          });
        }
      });
      graph.string(2, "attention");
      for (const [name, shape, type] of inputs) {
        graph.message(11, (v) => valueInfo(v, name, shape, type));
      }
      const [b, h, lq] = layout.query.shape;
      graph.message(12, (v) => valueInfo(v, "Y", [b, h, lq, layout.value.shape[3]], dtype));
    });
  return Uint8Array.from(model.bytes);
}

/** What the kit uses of onnxruntime's JavaScript API (the same in -node and -web). */
interface OrtTensor {
  readonly dims: readonly number[];
  readonly data: ArrayLike<number>;
}
interface Ort {
  readonly Tensor: new (
    type: string,
    data: ArrayLike<number> | Uint8Array,
    dims: readonly number[],
  ) => OrtTensor;
  readonly InferenceSession: {
    create(
      model: Uint8Array,
      options: object,
    ): Promise<{ run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>> }>;
  };
  readonly env: { wasm: { numThreads: number }; logLevel?: string };
}

/** Float16Array (Node 24, recent browsers), which the TypeScript lib here does not declare yet. */
const Float16 = (
  globalThis as unknown as {
    Float16Array?: { from(x: ArrayLike<number>): { buffer: ArrayBuffer } } & (new (
      buffer: ArrayBuffer,
      offset: number,
      length: number,
    ) => ArrayLike<number>);
  }
).Float16Array;

/** float16 tensors travel as their bits (Uint16Array), which every onnxruntime takes. */
function storage(data: ArrayLike<number>, dtype: "float32" | "float16"): ArrayLike<number> {
  if (dtype === "float32") {
    return Float32Array.from(data);
  }
  if (Float16 === undefined) {
    throw new Error("float16 needs Float16Array (Node 24)");
  }
  return new Uint16Array(Float16.from(data).buffer);
}

function readBack(data: ArrayLike<number>, dtype: "float32" | "float16"): Float64Array {
  if (dtype === "float16" && data instanceof Uint16Array && Float16 !== undefined) {
    return Float64Array.from(new Float16(data.buffer as ArrayBuffer, data.byteOffset, data.length));
  }
  return Float64Array.from(data);
}

function onnxPeer(
  ort: Ort,
  name: string,
  version: string,
  provider: string,
  dtype: "float32" | "float16",
): Peer {
  return {
    name,
    version,
    dtype,
    about: `ONNX Attention (opset 23), ${provider} provider`,
    async run(test) {
      const layout = rank4(test) as Rank4;
      const session = await ort.InferenceSession.create(attentionModel(layout, dtype), {
        executionProviders: [provider],
        graphOptimizationLevel: "disabled",
        logSeverityLevel: 4, // its own errors come back as the thrown error the kit reports
      });
      const tensor = (t: FlatTensor) => new ort.Tensor(dtype, storage(t.data, dtype), t.shape);
      const feeds: Record<string, OrtTensor> = {
        Q: tensor(layout.query),
        K: tensor(layout.key),
        V: tensor(layout.value),
      };
      if (layout.mask !== null) {
        const m = layout.mask;
        feeds.attn_mask =
          m.dtype === "bool"
            ? new ort.Tensor("bool", Uint8Array.from(m.tensor.data), m.tensor.shape)
            : tensor(m.tensor);
      }
      const { Y } = await session.run(feeds);
      return { shape: layout.outputShape, data: readBack(Y.data, dtype) };
    },
  };
}

/** What the kit uses of tfjs-core. */
interface Tf {
  tensor(data: ArrayLike<number>, shape: readonly number[], dtype?: string): TfTensor;
  matMul(a: TfTensor, b: TfTensor, transposeA?: boolean, transposeB?: boolean): TfTensor;
  softmax(x: TfTensor): TfTensor;
  where(condition: TfTensor, a: TfTensor, b: TfTensor): TfTensor;
  fill(shape: readonly number[], value: number): TfTensor;
  tile(x: TfTensor, reps: readonly number[]): TfTensor;
  mul(a: TfTensor, b: TfTensor | number): TfTensor;
  div(a: TfTensor, b: TfTensor | number): TfTensor;
  add(a: TfTensor, b: TfTensor): TfTensor;
  tanh(x: TfTensor): TfTensor;
  reshape(x: TfTensor, shape: readonly number[]): TfTensor;
  expandDims(x: TfTensor, axis: number): TfTensor;
  setBackend(name: string): Promise<boolean>;
  version_core: string;
}
interface TfTensor {
  readonly shape: number[];
  dataSync(): ArrayLike<number>;
}

function tfjsPeer(tf: Tf): Peer {
  return {
    name: "tfjs",
    version: tf.version_core,
    dtype: "float32",
    about: "tfjs-core, CPU backend: matMul, softmax and where, composed",
    async run(test) {
      const layout = rank4(test) as Rank4;
      const t = (x: FlatTensor) => tf.tensor(Float32Array.from(x.data), x.shape, "float32");
      const [b, hq, lq, e] = layout.query.shape;
      const [, hkv, lk, ev] = layout.value.shape;
      let key = t(layout.key);
      let value = t(layout.value);
      if (hkv !== hq && hkv > 0) {
        // Grouped-query heads: each key/value head repeated for the query heads that read it.
        const group = hq / hkv;
        key = tf.reshape(tf.tile(tf.expandDims(key, 2), [1, 1, group, 1, 1]), [b, hq, lk, e]);
        value = tf.reshape(tf.tile(tf.expandDims(value, 2), [1, 1, group, 1, 1]), [b, hq, lk, ev]);
      }
      let logits = tf.mul(tf.matMul(t(layout.query), key, false, true), layout.scale ?? 1 / Math.sqrt(e));
      if (layout.softcap !== 0) {
        logits = tf.mul(tf.tanh(tf.div(logits, layout.softcap)), layout.softcap);
      }
      const minusInf = tf.fill([b, hq, lq, lk], -Infinity);
      if (layout.isCausal) {
        const allowed = Array.from({ length: b * hq * lq * lk }, (_, n) =>
          n % lk <= Math.floor(n / lk) % lq ? 1 : 0,
        );
        logits = tf.where(tf.tensor(allowed, [b, hq, lq, lk], "bool"), logits, minusInf);
      }
      if (layout.mask !== null) {
        const m = layout.mask.tensor;
        logits =
          layout.mask.dtype === "bool"
            ? tf.where(tf.tensor(Uint8Array.from(m.data), m.shape, "bool"), logits, minusInf)
            : tf.add(logits, tf.tensor(Float32Array.from(m.data), m.shape, "float32"));
      }
      const output = tf.matMul(tf.softmax(logits), value);
      return { shape: layout.outputShape, data: Float64Array.from(output.dataSync()) };
    },
  };
}

/** The peers installed in `folder` (scripts/conformance installs them there). */
export async function peers(folder: string): Promise<Peer[]> {
  const require = createRequire(resolve(folder, "package.json"));
  const load = async (name: string) => import(pathToFileURL(require.resolve(name)).href);
  const version = (name: string) =>
    JSON.parse(readFileSync(join(folder, "node_modules", name, "package.json"), "utf8")).version as string;
  const ortNode = (await load("onnxruntime-node")) as Ort;
  const ortWeb = (await load("onnxruntime-web")) as Ort;
  ortWeb.env.wasm.numThreads = 1;
  const tf = (await load("@tensorflow/tfjs-core")) as Tf;
  await load("@tensorflow/tfjs-backend-cpu");
  await tf.setBackend("cpu");
  // No float16 for onnxruntime-node: its binding refuses every float16 tensor from JavaScript
  // ("not enough space: expected 24, got 0" for 12 values, as Uint16Array or Float16Array).
  return [
    onnxPeer(ortNode, "onnxruntime-node", version("onnxruntime-node"), "cpu", "float32"),
    onnxPeer(ortWeb, "onnxruntime-web", version("onnxruntime-web"), "wasm", "float32"),
    onnxPeer(ortWeb, "onnxruntime-web", version("onnxruntime-web"), "wasm", "float16"),
    tfjsPeer(tf),
  ];
}

/** Every valid case through one peer, judged by the kit at the peer's dtype. */
export async function runPeer(peer: Peer, cases: readonly TestCase[]): Promise<PeerVerdict[]> {
  const verdicts: PeerVerdict[] = [];
  for (const test of cases) {
    const v = judge(test, await call(() => peer.run(test), test), { dtype: peer.dtype });
    verdicts.push({ caseId: v.caseId, verdict: v.verdict, problem: v.problem, budgetUsed: v.budgetUsed });
  }
  return verdicts;
}

/** One peer on the cases from `from` on, in this process: one JSON line per verdict on stdout,
 * each written before the next case starts, so that a case that kills the process is known. */
async function worker(folder: string, name: string, from: number): Promise<void> {
  const peer = (await peers(folder)).find((p) => `${p.name}-${p.dtype}` === name);
  if (peer === undefined) {
    throw new Error(`no peer named ${name}`);
  }
  const cases = validCases().slice(from);
  for (const test of cases) {
    const [verdict] = await runPeer(peer, [test]);
    process.stdout.write(`${JSON.stringify(verdict)}\n`);
  }
}

function validCases(): TestCase[] {
  return loadCases().filter((c) => c.expected.error === null);
}

/** Every valid case through one peer, each peer in a child process of its own: a case on which
 * the peer ends the process (a native crash) is a failure that says so, and the next case runs
 * in a fresh process. */
function runIsolated(folder: string, peer: Peer, cases: readonly TestCase[]): PeerVerdict[] {
  const verdicts: PeerVerdict[] = [];
  while (verdicts.length < cases.length) {
    const child = spawnSync(
      process.execPath,
      [
        fileURLToPath(import.meta.url),
        "--peers",
        folder,
        "--worker",
        `${peer.name}-${peer.dtype}`,
        "--from",
        String(verdicts.length),
      ],
      { encoding: "utf8", maxBuffer: 2 ** 28, stdio: ["ignore", "pipe", "ignore"] },
    );
    verdicts.push(
      ...child.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as PeerVerdict),
    );
    if (child.status !== 0 && verdicts.length < cases.length) {
      const how = child.signal ?? `exit code ${String(child.status)}`;
      verdicts.push({
        caseId: cases[verdicts.length].id,
        verdict: "fail",
        problem: `the process died (${how})`,
        budgetUsed: null,
      });
    }
  }
  return verdicts;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      peers: { type: "string" },
      out: { type: "string" },
      worker: { type: "string" },
      from: { type: "string", default: "0" },
    },
    strict: true,
  });
  if (values.peers === undefined) {
    throw new Error("usage: node typescript/conformance/peers.ts --peers DIR --out FILE");
  }
  if (values.worker !== undefined) {
    await worker(values.peers, values.worker, Number(values.from));
    return;
  }
  if (values.out === undefined) {
    throw new Error("usage: node typescript/conformance/peers.ts --peers DIR --out FILE");
  }
  const cases = validCases();
  const results = [];
  for (const peer of await peers(values.peers)) {
    const started = performance.now();
    const verdicts = runIsolated(values.peers, peer, cases);
    const seconds = (performance.now() - started) / 1000;
    const { run: _, ...about } = peer;
    results.push({ ...about, seconds, verdicts });
    console.error(`${peer.name} (${peer.dtype}): ${cases.length} cases in ${seconds.toFixed(1)} s`);
  }
  writeFileSync(values.out, `${JSON.stringify({ node: process.versions.node, peers: results }, null, 1)}\n`);
}

if (import.meta.main) {
  await main();
}
