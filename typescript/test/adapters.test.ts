// The engine adapters of adapters.ts: jax-js's own mask (a JavaScript engine, written here as its
// source writes it) against the keys the adapter's options show, and onnxruntime's real
// GroupQueryAttention (onnxruntime-node, the peer scripts/install-peers puts in
// typescript/bench-peers), window, key counts and head_sink, against the readable port given the
// adapter's options. The other engines'
// masks, and the byte-for-byte agreement of both languages' adapters, are in
// python/tests/test_adapters.py.

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";

import { Proto } from "../conformance/peers.ts";
import { type EngineOptions, fromJaxJs, fromOnnxruntimeGqa } from "../src/adapters.ts";
import { scaledDotProductAttention } from "../src/attention.ts";
import { AttentionInputError } from "../src/inputs.ts";
import { flatten } from "./helpers.ts";

/** [B][Lq][Lk]: the keys this contract shows each row (docs/design.md's rule): row i of sequence
 * b at p = i + o_b sees [0, min(sinkTokens, n_b, end)) and [start, end), with end = clamp(p + 1 +
 * min(R, 0 if causal), 0, n_b) and start = clamp(p - L, 0, end). */
function contractVisible(batch: number, lq: number, lk: number, options: EngineOptions): boolean[][][] {
  const [left, right] = options.window ?? [null, null];
  return Array.from({ length: batch }, (_, b) => {
    const o = Array.isArray(options.queryOffset) ? options.queryOffset[b] : (options.queryOffset ?? 0);
    const n = options.kvSeqlen?.[b] ?? lk;
    return Array.from({ length: lq }, (_, i) => {
      const p = i + o;
      const reach = Math.min(right ?? Infinity, options.isCausal ? 0 : Infinity);
      const end = Math.min(Math.max(p + 1 + reach, 0), n);
      const start = Math.min(Math.max(p - (left ?? Infinity), 0), end);
      const sinkEnd = Math.min(options.sinkTokens ?? 0, n, end);
      return Array.from({ length: lk }, (_, j) => j < sinkEnd || (start <= j && j < end));
    });
  });
}

/** dotProductAttention in src/library/nn.ts (ekzhang/jax-js): tri(L, S, k) is true where
 * j <= i + k; isCausal: tri(L, S, 0); localWindowSize [before, after] (a number w: [w, w]):
 * tri(L, S, after).mul(tri(L, S, -before - 1).notEqual(true)); keyValueSeqLengths:
 * arange(S).less(keyValueSeqLengths[b]). */
function jaxJsVisible(
  lq: number,
  lk: number,
  localWindowSize: number | [number, number] | undefined,
  isCausal: boolean,
  lengths: number[] | undefined,
): boolean[][][] {
  const tri = (i: number, j: number, k: number) => j <= i + k;
  const band: [number, number] | undefined =
    typeof localWindowSize === "number" ? [localWindowSize, localWindowSize] : localWindowSize;
  return (lengths ?? [lk]).map((n) =>
    Array.from({ length: lq }, (_, i) =>
      Array.from(
        { length: lk },
        (_, j) =>
          (!isCausal || tri(i, j, 0)) &&
          (band === undefined || (tri(i, j, band[1]) && !tri(i, j, -band[0] - 1))) &&
          (lengths === undefined || j < n),
      ),
    ),
  );
}

describe("fromJaxJs", () => {
  const windows: (number | [number, number] | undefined)[] = [undefined, 0, 1, 2, [0, 0], [2, 0], [1, 3]];
  for (const localWindowSize of windows) {
    for (const isCausal of [false, true]) {
      test(`localWindowSize ${JSON.stringify(localWindowSize)}, isCausal ${isCausal}: jax-js's keys`, () => {
        for (const [lq, lk, lengths] of [
          [4, 4, undefined],
          [3, 7, undefined],
          [3, 6, [6, 2, 0]],
        ] as const) {
          const options = fromJaxJs({ localWindowSize, isCausal, keyValueSeqLengths: lengths });
          const engine = jaxJsVisible(lq, lk, localWindowSize, isCausal, lengths ? [...lengths] : undefined);
          assert.deepEqual(contractVisible(engine.length, lq, lk, options), engine);
        }
      });
    }
  }

  test("a single number is symmetric, [w, w], not w keys back", () => {
    assert.deepEqual(fromJaxJs({ localWindowSize: 3 }), { isCausal: false, window: [3, 3] });
  });

  test("an impossible window is refused in adapters.py's words", () => {
    assert.throws(
      () => fromJaxJs({ localWindowSize: [1, -1] }),
      (e: unknown) =>
        e instanceof AttentionInputError &&
        e.kind === "value" &&
        e.message === "localWindowSize[1] must be an integer >= 0, got -1",
    );
  });
});

// ---- onnxruntime's real GroupQueryAttention ---------------------------------------------------

const PEERS = join(fileURLToPath(new URL("../bench-peers/", import.meta.url)));
const ORT_INSTALLED = existsSync(join(PEERS, "node_modules", "onnxruntime-node"));

interface OrtTensor {
  readonly dims: readonly number[];
  readonly data: ArrayLike<number>;
}
interface Ort {
  readonly Tensor: new (type: string, data: ArrayLike<number>, dims: readonly number[]) => OrtTensor;
  readonly InferenceSession: {
    create(
      model: Uint8Array,
      options: object,
    ): Promise<{
      run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
    }>;
  };
}

const ONNX_FLOAT = 1;
const ONNX_INT32 = 6;
// cos_cache, sin_cache, position_ids and attention_bias left out, then head_sink [num_heads].
const SINK_INPUT = [null, null, null, null, ["head_sink", ONNX_FLOAT, [4]]] as const;

/** A model of one com.microsoft GroupQueryAttention node (inputs in its order: query, key, value,
 * past_key, past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache, position_ids,
 * attention_bias, head_sink; "" for one left out), as protobuf bytes (onnx/onnx.proto). */
function gqaModel(
  inputs: readonly (readonly [name: string, type: number, shape: readonly number[]] | null)[],
  attributes: Readonly<Record<string, number>>,
): Uint8Array {
  const valueInfo = (p: Proto, name: string, type: number, shape: readonly number[]) =>
    p.string(1, name).message(2, (t) =>
      t.message(1, (tensor) =>
        tensor.int(1, type).message(2, (s) => {
          for (const n of shape) {
            s.message(1, (d) => d.int(1, n));
          }
        }),
      ),
    );
  const model = new Proto()
    .int(1, 10) // ir_version
    .message(8, (o) => o.string(1, "").int(2, 21))
    .message(8, (o) => o.string(1, "com.microsoft").int(2, 1))
    .message(7, (graph) => {
      graph.message(1, (node) => {
        for (const input of inputs) {
          node.string(1, input === null ? "" : input[0]);
        }
        node.string(2, "output").string(2, "present_key").string(2, "present_value");
        node.string(3, "gqa").string(4, "GroupQueryAttention").string(7, "com.microsoft");
        for (const [name, value] of Object.entries(attributes)) {
          node.message(5, (a) => a.string(1, name).int(3, value).int(20, 2));
        }
      });
      graph.string(2, "gqa");
      for (const input of inputs) {
        if (input !== null) {
          graph.message(11, (v) => valueInfo(v, ...input));
        }
      }
      for (const name of ["output", "present_key", "present_value"]) {
        graph.message(12, (v) =>
          v.string(1, name).message(2, (t) => t.message(1, (x) => x.int(1, ONNX_FLOAT))),
        );
      }
    });
  return Uint8Array.from(model.bytes);
}

/** Numbers from a fixed generator (mulberry32), in [-1, 1). */
function numbers(count: number, seed: number): Float32Array {
  let state = seed >>> 0;
  return Float32Array.from({ length: count }, () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 31 - 1;
  });
}

/** [B, S, H·E] (onnxruntime's layout) as [B, H, S, E] (this contract's). */
function heads(data: ArrayLike<number>, b: number, s: number, h: number, e: number): Float64Array {
  const out = new Float64Array(b * h * s * e);
  for (let n = 0; n < b; n++)
    for (let t = 0; t < s; t++)
      for (let k = 0; k < h; k++)
        for (let x = 0; x < e; x++) out[((n * h + k) * s + t) * e + x] = data[((n * s + t) * h + k) * e + x];
  return out;
}

/** This contract's output, from the readable port given the adapter's options, for onnxruntime's
 * query and its present cache: [B, Hq, S, E]. */
function contractOutput(
  query: Float64Array,
  presentKey: OrtTensor,
  presentValue: OrtTensor,
  shape: { b: number; hq: number; s: number; e: number },
  options: EngineOptions,
): number[] {
  const [, hkv, lk] = presentKey.dims;
  const out = scaledDotProductAttention(
    { shape: [shape.b, shape.hq, shape.s, shape.e], data: query },
    { shape: [shape.b, hkv, lk, shape.e], data: Float64Array.from(presentKey.data) },
    { shape: [shape.b, hkv, lk, shape.e], data: Float64Array.from(presentValue.data) },
    { ...options, enableGqa: true },
  );
  return flatten(out);
}

/** The largest difference over the rows onnxruntime defines (a first prompt's padded rows are not). */
function largestDifference(
  ours: readonly number[],
  theirs: Float64Array,
  shape: { b: number; hq: number; s: number; e: number },
  defined: (b: number, row: number) => boolean,
): number {
  let worst = 0;
  for (let n = 0; n < ours.length; n++) {
    const row = Math.floor(n / shape.e) % shape.s;
    const b = Math.floor(n / (shape.e * shape.s * shape.hq));
    if (defined(b, row)) {
      worst = Math.max(worst, Math.abs(ours[n] - theirs[n]));
    }
  }
  return worst;
}

describe("fromOnnxruntimeGqa against onnxruntime-node's GroupQueryAttention", () => {
  const skip = ORT_INSTALLED ? false : "onnxruntime-node is not installed: run scripts/install-peers";

  test("a ragged prompt and a ragged decode step, local_window_size 1 to 4, head_sink", {
    skip,
  }, async () => {
    const require = createRequire(join(PEERS, "package.json"));
    const ort = (await import(pathToFileURL(require.resolve("onnxruntime-node")).href)) as Ort;
    const [b, hq, hkv, e, prompt] = [2, 4, 2, 8, 6];
    const seqlensPrompt = [5, 3]; // the second sequence has 4 tokens, padded to 6
    // One sink logit per query head (gpt-oss's), large enough to take a visible share of each row.
    const headSink = Float32Array.of(0.5, -1, 2, 0);
    for (const w of [1, 2, 3, 4]) {
      const attributes = { num_heads: hq, kv_num_heads: hkv, local_window_size: w };
      // The prompt: sequence_length == total_sequence_length.
      const q1 = numbers(b * prompt * hq * e, 1 + w);
      const k1 = numbers(b * prompt * hkv * e, 2 + w);
      const v1 = numbers(b * prompt * hkv * e, 3 + w);
      const promptModel = gqaModel(
        [
          ["query", ONNX_FLOAT, [b, prompt, hq * e]],
          ["key", ONNX_FLOAT, [b, prompt, hkv * e]],
          ["value", ONNX_FLOAT, [b, prompt, hkv * e]],
          null,
          null,
          ["seqlens_k", ONNX_INT32, [b]],
          ["total_sequence_length", ONNX_INT32, []],
          ...SINK_INPUT,
        ],
        attributes,
      );
      const session = await ort.InferenceSession.create(promptModel, {
        executionProviders: ["cpu"],
        logSeverityLevel: 3,
      });
      const first = await session.run({
        query: new ort.Tensor("float32", q1, [b, prompt, hq * e]),
        key: new ort.Tensor("float32", k1, [b, prompt, hkv * e]),
        value: new ort.Tensor("float32", v1, [b, prompt, hkv * e]),
        seqlens_k: new ort.Tensor("int32", Int32Array.from(seqlensPrompt), [b]),
        total_sequence_length: new ort.Tensor("int32", Int32Array.of(prompt), []),
        head_sink: new ort.Tensor("float32", headSink, [hq]),
      });
      const shape1 = { b, hq, s: prompt, e };
      const options1 = fromOnnxruntimeGqa({
        sequence_length: prompt,
        total_sequence_length: prompt,
        seqlens_k: Int32Array.from(seqlensPrompt),
        local_window_size: w,
        head_sink: headSink,
      });
      const theirs1 = heads(first.output.data, b, prompt, hq, e);
      const q1Heads = heads(q1, b, prompt, hq, e);
      const definedPrompt = (n: number, row: number) => row <= seqlensPrompt[n];
      const ours1 = contractOutput(q1Heads, first.present_key, first.present_value, shape1, options1);
      assert.ok(largestDifference(ours1, theirs1, shape1, definedPrompt) < 1e-5, `prompt, w = ${w}`);
      // One key more or one fewer is caught: the check can fail.
      for (const wrong of [w, w - 2]) {
        if (wrong >= 0) {
          const off = { ...options1, window: [wrong, 0] as [number, number] };
          const oursOff = contractOutput(q1Heads, first.present_key, first.present_value, shape1, off);
          assert.ok(
            largestDifference(oursOff, theirs1, shape1, definedPrompt) > 1e-3,
            `w = ${w} as ${wrong}`,
          );
        }
      }

      // A decode step: one new token per sequence after its own past.
      const seqlensStep = seqlensPrompt.map((n) => n + 1);
      const q2 = numbers(b * hq * e, 4 + w);
      const k2 = numbers(b * hkv * e, 5 + w);
      const v2 = numbers(b * hkv * e, 6 + w);
      const stepModel = gqaModel(
        [
          ["query", ONNX_FLOAT, [b, 1, hq * e]],
          ["key", ONNX_FLOAT, [b, 1, hkv * e]],
          ["value", ONNX_FLOAT, [b, 1, hkv * e]],
          ["past_key", ONNX_FLOAT, first.present_key.dims],
          ["past_value", ONNX_FLOAT, first.present_value.dims],
          ["seqlens_k", ONNX_INT32, [b]],
          ["total_sequence_length", ONNX_INT32, []],
          ...SINK_INPUT,
        ],
        attributes,
      );
      const stepSession = await ort.InferenceSession.create(stepModel, {
        executionProviders: ["cpu"],
        logSeverityLevel: 3,
      });
      const second = await stepSession.run({
        query: new ort.Tensor("float32", q2, [b, 1, hq * e]),
        key: new ort.Tensor("float32", k2, [b, 1, hkv * e]),
        value: new ort.Tensor("float32", v2, [b, 1, hkv * e]),
        past_key: first.present_key,
        past_value: first.present_value,
        seqlens_k: new ort.Tensor("int32", Int32Array.from(seqlensStep), [b]),
        total_sequence_length: new ort.Tensor("int32", Int32Array.of(prompt + 1), []),
        head_sink: new ort.Tensor("float32", headSink, [hq]),
      });
      const shape2 = { b, hq, s: 1, e };
      const options2 = fromOnnxruntimeGqa({
        sequence_length: 1,
        total_sequence_length: prompt + 1,
        seqlens_k: seqlensStep,
        local_window_size: w,
        head_sink: headSink,
      });
      assert.deepEqual(options2.queryOffset, [6, 4]);
      const theirs2 = heads(second.output.data, b, 1, hq, e);
      const ours2 = contractOutput(
        heads(q2, b, 1, hq, e),
        second.present_key,
        second.present_value,
        shape2,
        options2,
      );
      assert.ok(largestDifference(ours2, theirs2, shape2, () => true) < 1e-5, `decode, w = ${w}`);
    }
  });
});
