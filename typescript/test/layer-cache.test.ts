// The layer's KV cache: the layer on n tokens in one causal pass, and again as a prefill of k
// tokens followed by decode steps of 1, 3, 7 and 4 tokens with the cache (pastKey, pastValue from
// the previous call's presentKey, presentValue), give the same output rows and the same final
// cache bit for bit over attention.ts, flash.ts and simd.ts: the projections, RoPE at positions
// P.. and each port's core order a row's arithmetic the same way whatever other rows share its
// call. With RoPE and grouped-query heads; the lengths cross the tiled ports' key tiles (64). The
// numbers are checked against the fixtures elsewhere (verify); this file holds the layers to the
// equality, and the cache's errors to their kinds and messages. simd.ts runs through its Node entry.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { attentionSteps as flashSteps } from "../src/flash.ts";
import { AttentionInputError, type NestedArray } from "../src/inputs.ts";
import { type LayerOptions, type LayerResult, layerWith, multiHeadAttention } from "../src/layer.ts";
import { attentionSteps as simdSteps } from "../src/simd-node.ts";
import { generator } from "./generate.ts";

const [D, Hq, Hkv, E, Ev, Dout] = [6, 4, 2, 4, 3, 5];
const PREFILL = 70;
const STEPS = [1, 3, 7, 4];
const N = PREFILL + STEPS.reduce((a, n) => a + n, 0); // 85 tokens

const random = generator(27);
const matrix = (rows: number, cols: number) =>
  Array.from({ length: rows }, () => Array.from({ length: cols }, () => 2 * random() - 1));
const X = [matrix(N, D), matrix(N, D)]; // [B = 2, N, D]
const PARAMS = {
  wQ: matrix(Hq * E, D),
  wK: matrix(Hkv * E, D),
  wV: matrix(Hkv * Ev, D),
  wO: matrix(Dout, Hq * Ev),
  bK: matrix(1, Hkv * E)[0],
  bO: matrix(1, Dout)[0],
};
const OPTIONS: LayerOptions = { numHeads: Hq, numKvHeads: Hkv, isCausal: true, rope: { theta: 100 } };

type Layer = (x: number[][][], options: LayerOptions) => LayerResult;
const over = (core: Parameters<typeof layerWith>[0]): Layer => {
  const layer = layerWith(core);
  return (x, options) => layer(x, null, PARAMS, { ...options, returnCache: true });
};
const LAYERS: Record<string, Layer> = {
  "attention.ts": (x, options) => multiHeadAttention(x, null, PARAMS, { ...options, returnCache: true }),
  "flash.ts": over(flashSteps),
  "simd.ts": over(simdSteps),
};

const rows = (x: NestedArray, from: number, to: number) => (x as number[][][]).map((b) => b.slice(from, to));

function differing(actual: unknown, expected: unknown): string | null {
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  return a === b ? null : `${a.slice(0, 80)}... vs ${b.slice(0, 80)}...`;
}

describe("a prefill and decode steps with the cache give one causal pass, bit for bit", () => {
  for (const [name, layer] of Object.entries(LAYERS)) {
    test(name, () => {
      const whole = layer(X, OPTIONS);
      let cache: Pick<LayerOptions, "pastKey" | "pastValue"> = {};
      let start = 0;
      for (const n of [PREFILL, ...STEPS]) {
        const block = layer(rows(X as NestedArray, start, start + n) as number[][][], {
          ...OPTIONS,
          ...cache,
        });
        assert.equal(differing(block.output, rows(whole.output, start, start + n)), null, `rows ${start}..`);
        cache = { pastKey: block.presentKey, pastValue: block.presentValue };
        start += n;
      }
      assert.equal(differing(cache.pastKey, whole.presentKey), null, "presentKey");
      assert.equal(differing(cache.pastValue, whole.presentValue), null, "presentValue");
      assert.equal((whole.presentKey as number[][][][])[0].length, Hkv); // never expanded to Hq
    });
  }

  test("the equality rests on the cache: the same rows alone (positions 0.., top-left) differ", () => {
    const whole = multiHeadAttention(X, null, PARAMS, { ...OPTIONS, returnCache: true });
    const prefill = multiHeadAttention(rows(X as NestedArray, 0, PREFILL) as number[][][], null, PARAMS, {
      ...OPTIONS,
      returnCache: true,
    });
    const next = rows(X as NestedArray, PREFILL, PREFILL + 3) as number[][][];
    // No cache: the 3 rows alone, at positions 0..2 with the top-left rule.
    const alone = multiHeadAttention(next, null, PARAMS, OPTIONS);
    assert.notEqual(differing(alone, rows(whole.output, PREFILL, PREFILL + 3)), null);
    // With the prefill's cache: the rows of the full pass.
    const cached = multiHeadAttention(next, null, PARAMS, {
      ...OPTIONS,
      pastKey: prefill.presentKey,
      pastValue: prefill.presentValue,
    });
    assert.equal(differing(cached, rows(whole.output, PREFILL, PREFILL + 3)), null);
  });

  test("the past is copied exactly; P = 0 is the same as no past; absent fields are undefined", () => {
    const pastKey = [matrix(2, E), matrix(2, E)]; // [Hkv, P = 2, E]
    const pastValue = [matrix(2, Ev), matrix(2, Ev)];
    const x = matrix(3, D);
    const result = multiHeadAttention(x, null, PARAMS, { ...OPTIONS, pastKey, pastValue, returnCache: true });
    const present = result.presentKey as number[][][];
    assert.deepEqual(
      present.map((h) => h.slice(0, 2)),
      pastKey,
    );
    assert.equal(result.weights, undefined);
    const empty = multiHeadAttention(x, null, PARAMS, {
      ...OPTIONS,
      pastKey: { shape: [Hkv, 0, E], data: [] },
      pastValue: { shape: [Hkv, 0, Ev], data: [] },
      returnCache: true,
    });
    const plain = multiHeadAttention(x, null, PARAMS, { ...OPTIONS, returnCache: true });
    assert.equal(differing(empty, plain), null);
    const weighted = multiHeadAttention(x, null, PARAMS, { ...OPTIONS, needWeights: true });
    assert.equal(weighted.presentKey, undefined);
    assert.equal((weighted.weights as number[][][])[0].length, 3);
  });
});

describe("a step with no new keys after a cache attends to the past alone, in every core", () => {
  // Each head's two cached keys are equal, so its weights are exactly 1/2 and 1/2 whatever the
  // query, and its output the mean of its two cached values: [B = 2, Hkv = 2, P = 2, 1] each.
  // python/tests/test_layer_cache.py holds numpy's and torch's layers to the same values.
  const pastKey = [
    [
      [[1], [1]],
      [[-2], [-2]],
    ],
    [
      [[0.5], [0.5]],
      [[3], [3]],
    ],
  ];
  const pastValue = [
    [
      [[1], [3]],
      [[-4], [2]],
    ],
    [
      [[5], [6]],
      [[0], [1]],
    ],
  ];
  const params = {
    wQ: [
      [1, 0.5],
      [-1, 2],
    ],
    wK: [
      [1, 0],
      [0, 1],
    ],
    wV: [
      [2, 1],
      [0, -1],
    ],
    wO: [
      [1, 0],
      [0, 1],
    ],
  };
  const options = { numHeads: 2, pastKey, pastValue, returnCache: true } as const;
  const cores = {
    "attention.ts": multiHeadAttention,
    "flash.ts": layerWith(flashSteps),
    "simd.ts": layerWith(simdSteps),
  };
  for (const [name, layer] of Object.entries(cores)) {
    test(`${name}: cross-attention with an empty xKv, and an empty self-attention step`, () => {
      const crossed = layer([[[1, 1]], [[2, -1]]], { shape: [2, 0, 2], data: [] }, params, options);
      assert.deepEqual(crossed.output, [[[2, -1]], [[5.5, 0.5]]]);
      assert.deepEqual([crossed.presentKey, crossed.presentValue], [pastKey, pastValue]);
      const empty = layer({ shape: [2, 0, 2], data: [] }, null, params, options);
      assert.deepEqual(empty.output, [[], []]); // [B = 2, Lq = 0, Dout = 2]
      assert.deepEqual([empty.presentKey, empty.presentValue], [pastKey, pastValue]);
    });
  }
});

describe("a cache that disagrees with the layer is refused with a kind", () => {
  const x = matrix(1, D);
  const cases: [string, LayerOptions, string, string][] = [
    [
      "pastKey without pastValue",
      { ...OPTIONS, pastKey: [matrix(2, E), matrix(2, E)] },
      "value",
      "pastValue is missing: pastKey and pastValue come together, give both or neither",
    ],
    [
      "a cache expanded to the query heads",
      {
        ...OPTIONS,
        pastKey: [1, 2, 3, 4].map(() => matrix(2, E)),
        pastValue: [1, 2, 3, 4].map(() => matrix(2, Ev)),
      },
      "heads",
      "pastKey has 4 heads but the layer has numKvHeads = 2 (pastKey [4, 2, 4]): the cache keeps the key/value heads, never expanded",
    ],
    [
      "lengths that differ",
      { ...OPTIONS, pastKey: [matrix(2, E), matrix(2, E)], pastValue: [matrix(3, Ev), matrix(3, Ev)] },
      "shape",
      "pastKey holds 2 positions but pastValue holds 3 (pastKey [2, 2, 4], pastValue [2, 3, 3])",
    ],
    [
      "returnCache not a boolean",
      { ...OPTIONS, returnCache: 1 as never },
      "value",
      "returnCache must be a boolean, got 1",
    ],
  ];
  for (const [what, options, kind, message] of cases) {
    test(what, () => {
      assert.throws(
        () => multiHeadAttention(x, null, PARAMS, options),
        (error: unknown) =>
          error instanceof AttentionInputError && error.kind === kind && error.message === message,
      );
    });
  }
});
