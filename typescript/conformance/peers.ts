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
 *
 * Windows, sinks and ragged batches, each passed the way the peer takes it (PEER_CONVENTIONS):
 *     kvSeqlen      ONNX Attention's nonpad_kv_seqlen (opset 24: a count of valid keys, as ours)
 *     window        onnxruntime's GroupQueryAttention (com.microsoft) local_window_size = left + 1
 *                   (its keys include the query's own); it is causal, its rows are each sequence's
 *                   last (query_offset = kv_seqlen - Lq), its key count seqlens_k = kv_seqlen - 1
 *     sinkLogits    GroupQueryAttention's head_sink [Hq]
 *     tfjs          every option composed: one boolean mask of the visible keys, and the sink
 *                   logit as one more softmax column that has no value
 * A case one peer cannot say (sink tokens in ONNX, a window that is not causal, a query offset
 * GroupQueryAttention's alignment cannot give) is "not expressible" for it, with the reason: not
 * a failure, since the peer was never asked the question.
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

/** One peer's verdict on one case, as the results file holds it: "not expressible" where the peer
 * has no way to take one of the case's options (problem says which and why). */
export interface PeerVerdict {
  readonly caseId: string;
  readonly verdict: "pass" | "fail" | "outside" | "not expressible";
  readonly problem: string | null;
  readonly budgetUsed: number | null;
}

/** Thrown by a peer's run for a case it cannot express; runPeer records it as "not expressible". */
export class NotExpressible extends Error {}

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
  /** The new options, per merged batch index b (B of the rank-4 layout) where they are per sequence. */
  readonly queryOffset: readonly number[]; // [B]
  readonly kvSeqlen: readonly number[] | null; // [B], null: every key
  readonly window: readonly [number | null, number | null] | null;
  readonly sinkTokens: number;
  readonly sinkLogits: readonly number[] | null; // [Hq]
}

/** An option given as a number or as nested [B...] numbers, one per merged batch index. */
function perBatch(option: unknown, batch: number): number[] {
  if (Array.isArray(option)) {
    return (option as unknown[]).flat(Number.POSITIVE_INFINITY) as number[];
  }
  return new Array(batch).fill(Number(option ?? 0));
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
  const o = test.options;
  const batch = query.shape[0];
  return {
    queryOffset: perBatch(o.queryOffset, batch),
    kvSeqlen: o.kvSeqlen == null ? null : perBatch(o.kvSeqlen, batch),
    window: (o.window ?? null) as Rank4["window"],
    sinkTokens: Number(o.sinkTokens ?? 0),
    sinkLogits: o.sinkLogits == null ? null : (o.sinkLogits as number[]),
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

const ONNX_TYPES = { float32: 1, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11 } as const;
type OnnxType = keyof typeof ONNX_TYPES;

/** One input or output of a one-node graph: its name, element type and shape (null: the shape
 * left unsaid), or null for an optional input left out ("" in the node's list). */
type Port = readonly [name: string, type: OnnxType, shape: readonly number[] | null] | null;

/** A model of one node, as protobuf bytes (onnx/onnx.proto): `opsets` the domains it imports with
 * their versions, attributes ints or floats. */
export function oneNodeModel(node: {
  readonly op: string;
  readonly domain?: string;
  readonly opsets: readonly (readonly [domain: string, version: number])[];
  readonly inputs: readonly Port[];
  readonly outputs: readonly Port[];
  readonly attributes: readonly (readonly [name: string, kind: "int" | "float", value: number])[];
}): Uint8Array {
  const valueInfo = (p: Proto, [name, type, shape]: NonNullable<Port>) =>
    p.string(1, name).message(2, (t) =>
      t.message(1, (tensor) => {
        tensor.int(1, ONNX_TYPES[type]);
        if (shape !== null) {
          tensor.message(2, (s) => {
            for (const n of shape) {
              s.message(1, (d) => d.int(1, n));
            }
          });
        }
      }),
    );
  const model = new Proto().int(1, 11); // ir_version
  for (const [domain, version] of node.opsets) {
    model.message(8, (o) => o.string(1, domain).int(2, version));
  }
  model.message(7, (graph) => {
    graph.message(1, (n) => {
      for (const input of node.inputs) {
        n.string(1, input === null ? "" : input[0]);
      }
      for (const output of node.outputs) {
        n.string(2, output === null ? "" : output[0]);
      }
      n.string(3, "node").string(4, node.op);
      if (node.domain !== undefined) {
        n.string(7, node.domain);
      }
      for (const [name, kind, value] of node.attributes) {
        n.message(5, (a) => {
          a.string(1, name);
          if (kind === "int") {
            a.int(3, value).int(20, 2);
          } else {
            a.float(2, value).int(20, 1);
          }
        });
      }
    });
    graph.string(2, "graph");
    for (const input of node.inputs) {
      if (input !== null) {
        graph.message(11, (v) => valueInfo(v, input));
      }
    }
    for (const output of node.outputs) {
      if (output !== null) {
        graph.message(12, (v) => valueInfo(v, output));
      }
    }
  });
  return Uint8Array.from(model.bytes);
}

/** A model of one Attention node for these input shapes and options: opset 23, or 24 with its
 * nonpad_kv_seqlen input (int64 [B], a count of valid keys per sequence) where the case has one. */
export function attentionModel(layout: Rank4, dtype: "float32" | "float16"): Uint8Array {
  const counts = layout.kvSeqlen !== null;
  const past = pastKeys(layout);
  const [key, value] = [layout.key, layout.value].map((t) => split(t, past));
  const inputs: Port[] = [
    ["Q", dtype, layout.query.shape],
    ["K", dtype, key[1].shape],
    ["V", dtype, value[1].shape],
    layout.mask === null
      ? null
      : ["attn_mask", layout.mask.dtype === "bool" ? "bool" : dtype, layout.mask.tensor.shape],
    past === 0 ? null : ["past_key", dtype, key[0].shape],
    past === 0 ? null : ["past_value", dtype, value[0].shape],
  ];
  if (counts) {
    inputs.push(["nonpad_kv_seqlen", "int64", [layout.query.shape[0]]]);
  }
  while (inputs.at(-1) === null) {
    inputs.pop();
  }
  const attributes: [string, "int" | "float", number][] = [["is_causal", "int", layout.isCausal ? 1 : 0]];
  if (layout.scale !== null) {
    attributes.push(["scale", "float", layout.scale]);
  }
  if (layout.softcap !== 0) {
    attributes.push(["softcap", "float", layout.softcap]);
  }
  const [b, h, lq] = layout.query.shape;
  return oneNodeModel({
    op: "Attention",
    opsets: [["", counts ? 24 : 23]],
    inputs,
    // onnxruntime's Attention refuses a past_key without the present it would write.
    outputs: [
      ["Y", dtype, [b, h, lq, layout.value.shape[3]]],
      ...(past === 0 ? [] : [["present_key", dtype, null] as Port, ["present_value", dtype, null] as Port]),
    ],
    attributes,
  });
}

/** How many keys an Attention node takes as past_key: a causal case's query offset where every
 * sequence has the same one and no key count (then the mask starts after the past), else 0. */
function pastKeys(layout: Rank4): number {
  return layout.isCausal && layout.kvSeqlen === null ? (layout.queryOffset[0] ?? 0) : 0;
}

/** [B, H, L, E] as its first `at` rows and the rest, each [B, H, rows, E]. */
function split(t: FlatTensor, at: number): [FlatTensor, FlatTensor] {
  const [b, h, l, e] = t.shape;
  const rows = (from: number, to: number): FlatTensor => {
    const data = new Float64Array(b * h * (to - from) * e);
    for (let m = 0; m < b * h; m++) {
      for (let r = from; r < to; r++) {
        for (let x = 0; x < e; x++) {
          data[(m * (to - from) + r - from) * e + x] = Number(t.data[(m * l + r) * e + x]);
        }
      }
    }
    return { shape: [b, h, to - from, e], data };
  };
  return [rows(0, at), rows(at, l)];
}

/** Why onnxruntime's GroupQueryAttention cannot take this case as the contract states it, or
 * null when it can. Its conventions (its contrib-op documentation, and its own tests): always
 * causal; local_window_size w lets a row see w keys ending at its own (the contract's window
 * (w - 1, 0)), -1 none; seqlens_k[b] is the index of sequence b's last valid key (kv_seqlen - 1,
 * not a count); the Lq query rows are each sequence's last, so row i sits at
 * seqlens_k[b] + 1 - Lq + i; head_sink [Hq] is the sink logit; value's head size is the key's. */
export function gqaProblem(layout: Rank4): string | null {
  const [batch, hq, lq, e] = layout.query.shape;
  const [, hkv, lk, ev] = layout.value.shape;
  const counts = layout.kvSeqlen ?? new Array(batch).fill(lk);
  if (layout.sinkTokens > 0) {
    return "sink_tokens: neither ONNX Attention nor GroupQueryAttention keeps the first keys visible";
  }
  if (!layout.isCausal) {
    return "a window or sink logits without is_causal: GroupQueryAttention is always causal, ONNX Attention has neither option";
  }
  if (layout.mask !== null) {
    return "a mask beside a window or sink logits: the case's mask has no GroupQueryAttention input here";
  }
  if (e !== ev) {
    return `E = ${e}, Ev = ${ev}: GroupQueryAttention's value has the key's head size`;
  }
  if (hkv === 0 || hq % hkv !== 0 || lq === 0) {
    return `${hq} query heads on ${hkv}, Lq = ${lq}: GroupQueryAttention needs Hq a multiple of Hkv and a query row`;
  }
  const bad = layout.queryOffset.findIndex((o, b) => o !== counts[b] - lq);
  if (bad >= 0) {
    return `query_offset ${layout.queryOffset[bad]} for sequence ${bad}: GroupQueryAttention puts its ${lq} rows at the end of the sequence's ${counts[bad]} keys (offset ${counts[bad] - lq})`;
  }
  return null;
}

/** A model of one com.microsoft GroupQueryAttention node: the case's keys are the past (its
 * full key tensor, [B, Hkv, Lk, E]) and each sequence's last Lq keys the new ones, so that the
 * present it writes is the case's key tensor again. */
export function gqaModel(layout: Rank4, dtype: "float32" | "float16"): Uint8Array {
  const [b, hq, lq, e] = layout.query.shape;
  const [, hkv, lk] = layout.key.shape;
  const { window } = layout;
  const attributes: [string, "int" | "float", number][] = [
    ["num_heads", "int", hq],
    ["kv_num_heads", "int", hkv],
    ["local_window_size", "int", window === null || window[0] === null ? -1 : window[0] + 1],
  ];
  if (layout.scale !== null) {
    attributes.push(["scale", "float", layout.scale]);
  }
  if (layout.softcap !== 0) {
    attributes.push(["softcap", "float", layout.softcap]);
  }
  const inputs: Port[] = [
    ["query", dtype, [b, lq, hq * e]],
    ["key", dtype, [b, lq, hkv * e]],
    ["value", dtype, [b, lq, hkv * e]],
    ["past_key", dtype, [b, hkv, lk, e]],
    ["past_value", dtype, [b, hkv, lk, e]],
    ["seqlens_k", "int32", [b]],
    ["total_sequence_length", "int32", []],
  ];
  if (layout.sinkLogits !== null) {
    // cos_cache, sin_cache, position_ids and attention_bias left out, then head_sink [Hq].
    inputs.push(null, null, null, null, ["head_sink", dtype, [hq]]);
  }
  return oneNodeModel({
    op: "GroupQueryAttention",
    domain: "com.microsoft",
    opsets: [
      ["", 21],
      ["com.microsoft", 1],
    ],
    inputs,
    outputs: [
      ["output", dtype, null],
      ["present_key", dtype, null],
      ["present_value", dtype, null],
    ],
    attributes,
  });
}

/** [B, H, L, E] as [B, L, H * E] (onnxruntime's layout for GroupQueryAttention's inputs), keeping
 * only rows `from[b] .. from[b] + rows` of sequence b. */
function tokensMajor(t: FlatTensor, from: readonly number[], rows: number): Float64Array {
  const [b, h, l, e] = t.shape;
  const out = new Float64Array(b * rows * h * e);
  for (let n = 0; n < b; n++)
    for (let r = 0; r < rows; r++)
      for (let k = 0; k < h; k++)
        for (let x = 0; x < e; x++) {
          out[((n * rows + r) * h + k) * e + x] = Number(t.data[((n * h + k) * l + from[n] + r) * e + x]);
        }
  return out;
}

/** [B, L, H * E] back to [B, H, L, E]. */
function headsMajor(data: ArrayLike<number>, [b, h, l, e]: readonly number[]): Float64Array {
  const out = new Float64Array(b * h * l * e);
  for (let n = 0; n < b; n++)
    for (let r = 0; r < l; r++)
      for (let k = 0; k < h; k++)
        for (let x = 0; x < e; x++) {
          out[((n * h + k) * l + r) * e + x] = data[((n * l + r) * h + k) * e + x];
        }
  return out;
}

/** What the kit uses of onnxruntime's JavaScript API (the same in -node and -web). */
interface OrtTensor {
  readonly dims: readonly number[];
  readonly data: ArrayLike<number>;
}
interface Ort {
  readonly Tensor: new (
    type: string,
    data: ArrayLike<number> | Uint8Array | BigInt64Array,
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

/** Which operator the ONNX peers give a case: Attention for everything it takes (nonpad_kv_seqlen
 * among them), GroupQueryAttention where the case has a window, sink logits or a causal query
 * offset (ONNX Attention has none of the three: its causal mask is aligned top-left), or why
 * neither can say it. */
export function onnxOperator(layout: Rank4): "Attention" | "GroupQueryAttention" {
  const offsets = layout.queryOffset;
  const lq = layout.query.shape[2];
  if (layout.window === null && layout.sinkLogits === null && layout.sinkTokens === 0) {
    // Attention's causal mask starts after past_key's keys, else (nonpad_kv_seqlen given) after
    // each sequence's count less Lq: a causal query offset it takes is one of those two.
    const counts = layout.kvSeqlen;
    const lk = layout.key.shape[2];
    const past = counts === null && offsets.every((o) => o === offsets[0]);
    if (layout.isCausal && past && offsets[0] > lk) {
      throw new NotExpressible(
        `query_offset ${offsets[0]} with ${lk} keys: Attention's causal mask starts after past_key, which cannot hold more keys than there are`,
      );
    }
    const last = counts !== null && offsets.every((o, b) => o === counts[b] - lq);
    if (!layout.isCausal || offsets.every((o) => o === 0) || past || last) {
      return "Attention";
    }
  }
  const problem = gqaProblem(layout);
  if (problem !== null) {
    throw new NotExpressible(problem);
  }
  return "GroupQueryAttention";
}

function onnxPeer(
  ort: Ort,
  name: string,
  version: string,
  provider: string,
  dtype: "float32" | "float16",
): Peer {
  const sessionOptions = {
    executionProviders: [provider],
    graphOptimizationLevel: "disabled",
    logSeverityLevel: 4, // its own errors come back as the thrown error the kit reports
  };
  const tensor = (t: FlatTensor | { shape: readonly number[]; data: ArrayLike<number> }) =>
    new ort.Tensor(dtype, storage(t.data, dtype), t.shape);
  return {
    name,
    version,
    dtype,
    about: `ONNX Attention (opset 23; 24 for nonpad_kv_seqlen) and com.microsoft GroupQueryAttention, ${provider} provider`,
    async run(test) {
      const layout = rank4(test) as Rank4;
      if (onnxOperator(layout) === "GroupQueryAttention") {
        return runGqa(layout);
      }
      const session = await ort.InferenceSession.create(attentionModel(layout, dtype), sessionOptions);
      const past = pastKeys(layout);
      const [key, value] = [layout.key, layout.value].map((t) => split(t, past));
      const feeds: Record<string, OrtTensor> = {
        Q: tensor(layout.query),
        K: tensor(key[1]),
        V: tensor(value[1]),
      };
      if (past > 0) {
        feeds.past_key = tensor(key[0]);
        feeds.past_value = tensor(value[0]);
      }
      if (layout.mask !== null) {
        const m = layout.mask;
        feeds.attn_mask =
          m.dtype === "bool"
            ? new ort.Tensor("bool", Uint8Array.from(m.tensor.data), m.tensor.shape)
            : tensor(m.tensor);
      }
      if (layout.kvSeqlen !== null) {
        const counts = BigInt64Array.from(layout.kvSeqlen, (n) => BigInt(n));
        feeds.nonpad_kv_seqlen = new ort.Tensor("int64", counts, [counts.length]);
      }
      const { Y } = await session.run(feeds);
      return { shape: layout.outputShape, data: readBack(Y.data, dtype) };
    },
  };

  async function runGqa(layout: Rank4): Promise<FlatTensor> {
    const [b, hq, lq, e] = layout.query.shape;
    const [, hkv, lk] = layout.key.shape;
    const counts = layout.kvSeqlen ?? new Array(b).fill(lk);
    const session = await ort.InferenceSession.create(gqaModel(layout, dtype), sessionOptions);
    const last = counts.map((n) => n - lq); // each sequence's first new row
    const feeds: Record<string, OrtTensor> = {
      query: tensor({ shape: [b, lq, hq * e], data: tokensMajor(layout.query, new Array(b).fill(0), lq) }),
      key: tensor({ shape: [b, lq, hkv * e], data: tokensMajor(layout.key, last, lq) }),
      value: tensor({ shape: [b, lq, hkv * e], data: tokensMajor(layout.value, last, lq) }),
      past_key: tensor(layout.key),
      past_value: tensor(layout.value),
      seqlens_k: new ort.Tensor(
        "int32",
        Int32Array.from(counts, (n) => n - 1),
        [b],
      ),
      total_sequence_length: new ort.Tensor("int32", Int32Array.of(lk), []),
    };
    if (layout.sinkLogits !== null) {
      feeds.head_sink = tensor({ shape: [hq], data: layout.sinkLogits });
    }
    const { output } = await session.run(feeds);
    return { shape: layout.outputShape, data: headsMajor(readBack(output.data, dtype), [b, hq, lq, e]) };
  }
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
  concat(xs: TfTensor[], axis: number): TfTensor;
  slice(x: TfTensor, begin: readonly number[], size: readonly number[]): TfTensor;
  setBackend(name: string): Promise<boolean>;
  version_core: string;
}
interface TfTensor {
  readonly shape: number[];
  dataSync(): ArrayLike<number>;
}

/** Whether row i of merged batch b may see key j, by the contract's definition: the row at
 * p = i + query_offset[b] sees keys p - left .. p + right (a side null: unbounded), none after p
 * with is_causal, none from kv_seqlen[b] on, and the first sink_tokens keys whatever the window
 * says (causality and kv_seqlen still apply to them). */
export function visible(layout: Rank4, b: number, i: number, j: number): boolean {
  const p = i + layout.queryOffset[b];
  const [left, right] = layout.window ?? [null, null];
  const last = Math.min(layout.isCausal ? p : Infinity, right === null ? Infinity : p + right);
  const keys = layout.kvSeqlen === null ? Infinity : layout.kvSeqlen[b];
  if (j > last || j >= keys) {
    return false;
  }
  return j < layout.sinkTokens || left === null || j >= p - left;
}

function tfjsPeer(tf: Tf): Peer {
  return {
    name: "tfjs",
    version: tf.version_core,
    dtype: "float32",
    about: "tfjs-core, CPU backend: matMul, softmax and where, composed (windows and sinks too)",
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
      const options = layout.window !== null || layout.sinkTokens > 0 || layout.kvSeqlen !== null;
      if (layout.isCausal || options) {
        // tfjs has no window, sink or key-count option: one boolean mask of the keys the contract
        // lets each row see, composed here from its definition (docs/design.md).
        const allowed = Array.from({ length: b * hq * lq * lk }, (_, n) =>
          visible(layout, Math.floor(n / (hq * lq * lk)), Math.floor(n / lk) % lq, n % lk) ? 1 : 0,
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
      let weights: TfTensor;
      if (layout.sinkLogits === null) {
        weights = tf.softmax(logits);
      } else {
        // The sink logit as one more column of the softmax, whose weight then goes nowhere.
        const sinks = layout.sinkLogits;
        const column = tf.tensor(
          Float32Array.from({ length: b * hq * lq }, (_, n) => sinks[Math.floor(n / lq) % hq]),
          [b, hq, lq, 1],
          "float32",
        );
        weights = tf.slice(tf.softmax(tf.concat([logits, column], 3)), [0, 0, 0, 0], [b, hq, lq, lk]);
      }
      const output = tf.matMul(weights, value);
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
    const answer = await call(() => peer.run(test), test);
    if (answer instanceof NotExpressible) {
      verdicts.push({
        caseId: test.id,
        verdict: "not expressible",
        problem: answer.message,
        budgetUsed: null,
      });
      continue;
    }
    const v = judge(test, answer, { dtype: peer.dtype });
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
