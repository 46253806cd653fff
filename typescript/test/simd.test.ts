// The SIMD port (simd.ts and its WebAssembly kernel): every fixture under the tolerance rule in
// float64 and float32, agreement with the readable port on random problems across every block,
// tile and vector-width edge, the exp approximation against Math.exp, worker threads bit for bit,
// and the build's freshness. Both builds of the kernel (relaxed SIMD and baseline) are checked.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, describe, test } from "node:test";

import fc from "fast-check";
import { type FixtureTensor, loadFixtures } from "../golden/reader.ts";
import * as readable from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import type { FlatAttentionOptions, FlatMask, FlatTensor, ShapedMask, ShapedTensor } from "../src/inputs.ts";
import {
  AttentionInputError,
  attentionSteps,
  initSimd,
  kernelBlocks,
  kernelBuild,
  kernelExp,
  scaledDotProductAttention,
  scaledDotProductAttentionFlat,
  selectKernelBuild,
} from "../src/simd-node.ts";
import {
  BUILDS,
  buildIsFresh,
  builtStamp,
  expectedStamp,
  KERNEL_SOURCE,
  outputHashes,
} from "../wasm/stamp.ts";
import { attentionProblems, generator, type Problem } from "./generate.ts";
import { assertFixtureError, flatten, product, runCase } from "./helpers.ts";

const cases = loadFixtures();
const BUILD_NAMES = ["relaxed", "baseline"] as const;
const U64 = 2 ** -53;
const U32 = 2 ** -24;
const { queryBlock, keyTile } = kernelBlocks();
after(() => selectKernelBuild("auto"));

/** Shaped numbers -> a flat tensor with float64 or float32 storage. */
function flatTensor(t: ShapedTensor, float32 = false): FlatTensor {
  const data = Array.from(t.data);
  return { shape: t.shape, data: float32 ? Float32Array.from(data) : Float64Array.from(data) };
}

/** A shaped mask -> the flat form: Uint8Array for booleans, Float64Array for numbers. */
function flatMask(m: ShapedMask): FlatMask {
  const values = Array.from(m.data);
  if (typeof values[0] === "boolean") {
    return { dtype: "bool", shape: m.shape, data: Uint8Array.from(values, Number) };
  }
  return { dtype: "float", shape: m.shape, data: Float64Array.from(values as number[]) };
}

const shaped2 = (rows: number[][]): ShapedTensor => ({
  shape: [rows.length, rows[0].length],
  data: rows.flat(),
});
const shaped = (t: FixtureTensor) => ({ shape: t.shape, data: t.data }) as ShapedTensor & ShapedMask;

describe("the kernel build", () => {
  test("the .wasm files are built from the current kernel source and unchanged since", () => {
    const stamp = builtStamp();
    assert.ok(stamp !== null, "no kernel.stamp: run scripts/setup");
    assert.equal(
      stamp.input,
      expectedStamp(),
      "the kernel source changed since the build: run scripts/setup",
    );
    assert.deepEqual(stamp.outputs, outputHashes(), "a .wasm changed since it was built: run scripts/setup");
    assert.ok(buildIsFresh());
  });

  test("any edit to the kernel source changes the stamp, so the build above would be stale", () => {
    const source = readFileSync(KERNEL_SOURCE, "utf8");
    assert.equal(expectedStamp(source), expectedStamp());
    assert.notEqual(expectedStamp(`${source} `), expectedStamp());
    assert.notEqual(
      expectedStamp(source.replace("const BC: i32 = 64;", "const BC: i32 = 32;")),
      expectedStamp(),
    );
  });

  test("both builds validate here; relaxed is chosen where it validates", () => {
    for (const name of BUILD_NAMES) {
      assert.ok(WebAssembly.validate(readFileSync(BUILDS[name].file)), name);
    }
    selectKernelBuild("auto");
    assert.equal(kernelBuild(), "relaxed"); // Node 24 has relaxed SIMD
  });

  test("the block sizes fit the kernel's register blocking", () => {
    assert.ok(queryBlock % 4 === 0 && queryBlock >= 4, `queryBlock ${queryBlock}`);
    assert.ok(keyTile % 8 === 0 && keyTile >= 8, `keyTile ${keyTile}`);
  });
});

for (const build of BUILD_NAMES) {
  describe(`every fixture, ${build} build: float64 at float64's budget, float32 at float32's`, () => {
    for (const c of cases) {
      if (c.expected !== null) {
        const expected = c.expected;
        test(`${c.id}`, () => {
          selectKernelBuild(build);
          // The fixtures' rule itself is compare.py's: test_cross_language.py holds both builds to
          // it. Here every entry point of one build must give that build's one answer.
          const steps = runCase(attentionSteps, c);
          assert.deepEqual(steps.outputShape, expected.output.shape);
          assert.deepEqual(flatten(runCase(scaledDotProductAttention, c)), flatten(steps.output));
          const input = c.inputs as Record<string, FixtureTensor | null>;
          const options = {
            attnMask: input.attnMask === null ? null : flatMask(shaped(input.attnMask)),
            ...(c.params as FlatAttentionOptions),
          };
          const tensors = (float32: boolean) =>
            [input.query!, input.key!, input.value!].map((t) => flatTensor(shaped(t), float32));
          const [q, k, v] = tensors(false);
          const flat64 = scaledDotProductAttentionFlat(q, k, v, options);
          assert.ok(flat64.data instanceof Float64Array);
          assert.deepEqual(Array.from(flat64.data), flatten(steps.output));
          const [q32, k32, v32] = tensors(true);
          const flat32 = scaledDotProductAttentionFlat(q32, k32, v32, options);
          assert.ok(flat32.data instanceof Float32Array);
          assert.deepEqual(flat32.shape, expected.output.shape);
          // Its values are held to float32's budget by compare.py (test_cross_language.py).
        });
      } else if (build === "relaxed") {
        const error = c.expectedError!;
        test(`${c.id}: ${c.description}`, () => {
          assertFixtureError(() => runCase(attentionSteps, c), error);
          assertFixtureError(() => runCase(scaledDotProductAttention, c), error);
        });
      }
    }
  });
}

// ---- Agreement with the readable port on random problems. ----

/** Lengths on and around the query block and key tile edges, and small ones (0 included). */
const EDGES = [keyTile - 1, keyTile, keyTile + 1, 2 * keyTile + 3, queryBlock - 1, queryBlock + 1];
const length = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 9 }), weight: 5 },
  { arbitrary: fc.constantFrom(...EDGES), weight: 3 },
);

/** generate.ts's random problems with feature sizes around the vector widths (2 and 4 lanes) and
 * the 4-vector value blocking, now and then NaN or ±Infinity in a few cells of one input, and for
 * float32 every number rounded to float32, so that both ports start from the same inputs. (No
 * infinity in value for float32: a weight that underflows to 0 in float32 but not in float64
 * turns inf into NaN in one port only.) */
function problems(float32: boolean): fc.Arbitrary<Problem> {
  const specials = [NaN, Infinity, -Infinity];
  return fc
    .tuple(
      attentionProblems({
        length,
        keyTile,
        features: fc.oneof(fc.integer({ min: 1, max: 9 }), fc.constantFrom(15, 16, 17, 31, 33)),
        valueFeatures: fc.oneof(fc.integer({ min: 0, max: 9 }), fc.constantFrom(15, 16, 17)),
      }),
      fc.constantFrom("none", "none", "query", "key", "value"),
      fc.integer(),
    )
    .map(([p, special, seed]): Problem => {
      const random = generator(seed);
      const round = float32 ? Math.fround : (x: number) => x;
      const numbers = (name: string, t: ShapedTensor): ShapedTensor => ({
        shape: t.shape,
        data: Array.from(t.data, (x) =>
          special === name && random() < 0.03 && !(float32 && name === "value")
            ? specials[Math.floor(random() * 3)]
            : round(x),
        ),
      });
      const mask = p.options.attnMask;
      return {
        ...p,
        query: numbers("query", p.query),
        key: numbers("key", p.key),
        value: numbers("value", p.value),
        options: {
          ...p.options,
          scale:
            p.options.scale === undefined || p.options.scale === null
              ? p.options.scale
              : round(p.options.scale),
          softcap: round(p.options.softcap ?? 0),
          ...(mask === undefined
            ? {}
            : {
                attnMask: {
                  shape: mask.shape,
                  data: Array.from(mask.data, (x) => (typeof x === "number" ? round(x) : x)),
                },
              }),
        },
      };
    });
}

/** The SIMD port against attention.ts on one problem, in float64 (nested and flat entries) or
 * float32 (flat entry, Float32Array): NaN in the same places, fully-masked rows exactly +0.0, and
 * every other output within the tolerance rule's budget for the dtype, 16 u (1 + S) max|value|,
 * with S = |scale| E max|q| max|k| + the largest finite mask value (a bound on every row's S_i). */
// The readable port's answer to a problem, kept for the same problem object: each problem is held in
// float64 and then in float32 against one answer, which at the chunk tests' sizes is most of their time.
const readableAnswers = new WeakMap<object, { expectedOutput: number[]; weights: number[] }>();

function assertAgrees(p: Pick<Problem, "query" | "key" | "value" | "options">, float32: boolean): void {
  let answer = readableAnswers.get(p);
  if (answer === undefined) {
    const expected = readable.attentionSteps(p.query, p.key, p.value, p.options);
    answer = { expectedOutput: flatten(expected.output), weights: flatten(expected.weights) };
    readableAnswers.set(p, answer);
  }
  const { expectedOutput, weights } = answer;
  const mask = p.options.attnMask;
  let output: number[];
  if (float32) {
    const flat = scaledDotProductAttentionFlat(
      flatTensor(p.query, true),
      flatTensor(p.key, true),
      flatTensor(p.value, true),
      {
        ...p.options,
        attnMask: mask === undefined ? null : flatMask(mask),
      },
    );
    assert.ok(flat.data instanceof Float32Array);
    output = Array.from(flat.data);
  } else {
    output = flatten(scaledDotProductAttention(p.query, p.key, p.value, p.options));
    const flat = scaledDotProductAttentionFlat(flatTensor(p.query), flatTensor(p.key), flatTensor(p.value), {
      ...p.options,
      attnMask: mask === undefined ? null : flatMask(mask),
    });
    assert.deepEqual(Array.from(flat.data), output, "flat and nested entries differ");
  }
  assert.equal(output.length, expectedOutput.length);
  const finiteMax = (xs: ArrayLike<unknown>) =>
    Array.from(xs as ArrayLike<number>).reduce(
      (m, x) => (Number.isFinite(x) ? Math.max(m, Math.abs(x)) : m),
      0,
    );
  const E = p.query.shape.at(-1)!;
  const scale = Math.abs(p.options.scale ?? 1 / Math.sqrt(E));
  const spread = scale * E * finiteMax(p.query.data) * finiteMax(p.key.data);
  const bias = mask === undefined || typeof mask.data[0] === "boolean" ? 0 : finiteMax(mask.data);
  const budget = 16 * (float32 ? U32 : U64) * (1 + spread + bias) * Math.max(1, finiteMax(p.value.data));
  const [Lk, Ev] = [p.key.shape.at(-2)!, p.value.shape.at(-1)!];
  output.forEach((x, n) => {
    const e = expectedOutput[n];
    const row = Math.floor(n / Math.max(Ev, 1));
    const fullyMasked = weights.slice(row * Lk, (row + 1) * Lk).every((w) => Object.is(w, 0));
    if (Number.isNaN(e) || Number.isNaN(x)) {
      assert.ok(Number.isNaN(e) && Number.isNaN(x), `output[${n}]: ${x} vs ${e}`);
    } else if (fullyMasked) {
      assert.ok(Object.is(x, 0), `output[${n}] of a fully-masked row is ${x}, not +0.0`);
    } else if (!Number.isFinite(e)) {
      assert.equal(x, e, `output[${n}]`);
    } else {
      assert.ok(Math.abs(x - e) <= budget, `output[${n}]: ${x} vs ${e} (budget ${budget})`);
    }
  });
}

for (const build of BUILD_NAMES) {
  describe(`the SIMD port agrees with attention.ts, ${build} build`, () => {
    test("float64: random shapes, masks of every rank, GQA, NaN and ±inf, every edge", () => {
      selectKernelBuild(build);
      fc.assert(
        fc.property(problems(false), (p) => assertAgrees(p, false)),
        { numRuns: 120 },
      );
    });

    test("float32: the same problems in float32, at float32's budget", () => {
      selectKernelBuild(build);
      fc.assert(
        fc.property(problems(true), (p) => assertAgrees(p, true)),
        { numRuns: 120 },
      );
    });

    test("every block and tile edge for query and key, causal and not, with rows masked by tiles", () => {
      selectKernelBuild(build);
      const random = generator(7);
      for (const lq of [1, ...EDGES]) {
        for (const lk of [1, ...EDGES]) {
          for (const isCausal of [false, true]) {
            const numbers = (n: number, spread: number) =>
              Array.from({ length: n }, () => Math.fround((2 * random() - 1) * spread));
            // Rows divisible by 3: only the last key; other even rows: key tile 0 masked.
            const cells = Array.from({ length: lq * lk }, (_, n) => {
              const [i, j] = [Math.floor(n / lk), n % lk];
              return i % 3 === 0 ? j === lk - 1 : i % 2 === 0 ? j >= keyTile : true;
            });
            const problem = {
              query: { shape: [lq, 5], data: numbers(lq * 5, 3) },
              key: { shape: [lk, 5], data: numbers(lk * 5, 3) },
              value: { shape: [lk, 6], data: numbers(lk * 6, 4) },
              options: { isCausal, attnMask: { shape: [lq, lk], data: cells } },
            };
            assertAgrees(problem, false);
            assertAgrees(problem, true);
          }
        }
      }
    });
  });
}

describe("chunks: the query in, the output out and the key transposed a chunk of rows at a time", () => {
  // Two query heads on one key/value head, E = 512: float64 rows of both heads take 8 KiB, so a
  // chunk holds far fewer than Lq query rows, and a chunk of key rows (4 KiB each) fewer than Lk.
  const { chunkBytes } = kernelBlocks();
  const [Hq, Hkv, Lq, Lk, E, Ev] = [2, 1, 300, 600, 512, 7];
  const random = generator(11);
  const numbers = (n: number) => Array.from({ length: n }, () => 2 * random() - 1);
  // A float mask that differs row by row (a bias, and -inf on every fifth cell of odd rows), so a
  // chunk that read the mask or the causal limit at the wrong row would be caught.
  const cells = Array.from({ length: Lq * Lk }, (_, n) => {
    const [i, j] = [Math.floor(n / Lk), n % Lk];
    return i % 2 === 1 && j % 5 === 0 ? -Infinity : Math.sin(i + 0.5 * j);
  });
  const problem = {
    query: { shape: [Hq, Lq, E], data: numbers(Hq * Lq * E) },
    key: { shape: [Hkv, Lk, E], data: numbers(Hkv * Lk * E) },
    value: { shape: [Hkv, Lk, Ev], data: numbers(Hkv * Lk * Ev) },
  };

  test("the problem crosses chunk boundaries in both dtypes", () => {
    for (const bytes of [8, 4]) {
      assert.ok(chunkBytes / (Hq * E * bytes) < Lq, `query chunk (${bytes} bytes per number)`);
      assert.ok(chunkBytes / (E * bytes) < Lk, `key chunk (${bytes} bytes per number)`);
    }
  });

  for (const isCausal of [false, true]) {
    test(`agrees with attention.ts in float64 and float32, causal ${isCausal ? "on" : "off"}, and workers give the same bits`, () => {
      selectKernelBuild("auto");
      const options = { isCausal, enableGqa: true, attnMask: { shape: [Lq, Lk], data: cells } };
      const withOptions = { ...problem, options };
      assertAgrees(withOptions, false);
      assertAgrees(withOptions, true);
      const flatOptions = { ...options, attnMask: flatMask(options.attnMask) };
      const [q, k, v] = [problem.query, problem.key, problem.value].map((t) => flatTensor(t));
      const one = scaledDotProductAttentionFlat(q, k, v, flatOptions).data;
      assert.deepEqual(scaledDotProductAttentionFlat(q, k, v, { ...flatOptions, workers: 2 }).data, one);
    });
  }
});

describe("the nested entry's arrays kept from call to call", () => {
  test("a later call, larger or smaller, leaves an earlier result as it was, and each agrees with attention.ts", () => {
    const random = generator(13);
    const rows = (n: number, d: number) =>
      Array.from({ length: n }, () => Array.from({ length: d }, () => 2 * random() - 1));
    const calls = [
      [rows(70, 9), rows(50, 9), rows(50, 4)],
      [rows(200, 9), rows(130, 9), rows(130, 4)],
      [rows(3, 9), rows(2, 9), rows(2, 4)],
    ];
    const results: unknown[] = [];
    const copies: unknown[] = []; // each result as returned, before any later call
    for (const [q, k, v] of calls) {
      results.push(scaledDotProductAttention(q, k, v));
      copies.push(structuredClone(results.at(-1)));
    }
    calls.forEach(([q, k, v], n) => {
      assert.deepEqual(results[n], copies[n], `call ${n} changed by later calls`);
      assertAgrees({ query: shaped2(q), key: shaped2(k), value: shaped2(v), options: {} }, false);
    });
  });
});

// The special values both fast ports share are tested in special-values.test.ts; these are the
// kernel's own, where its logits in log2 units could overflow.
describe("special values near the largest double, as the readable port gives them", () => {
  const lk = 2 * keyTile + 1;
  const rows = (n: number, cols: number, f: (i: number, t: number) => number) =>
    Array.from({ length: n }, (_, i) => Array.from({ length: cols }, (_, t) => f(i, t)));

  test("logits near the largest double are numbers, not masks (the kernel's log2 units would overflow)", () => {
    // Found by the extremes property: -1.7e308 · log2 e is -Infinity, which the kernel would have
    // read as a masked cell and given the row +0.0; the row has one key, weight 1, and NaN in value.
    const tiny = scaledDotProductAttention([[2.328082048334e-311]], [[-8.567627300508e-311]], [[NaN]], {
      attnMask: [-1.7e308],
    });
    assert.ok(Number.isNaN(tiny[0][0]));
    const query = rows(3, 2, (i, t) => i - t);
    const key = rows(lk, 2, (i, t) => Math.sin(i * 3 + t));
    const value = rows(lk, 2, (i, t) => i * 2 - t);
    const attnMask = {
      shape: [lk],
      data: Array.from({ length: lk }, (_, j) => (j % 3 ? -1.5e308 : -1.6e308)),
    };
    assert.deepEqual(
      scaledDotProductAttention(query, key, value, { attnMask }),
      readable.scaledDotProductAttention(query, key, value, { attnMask }),
    );
    // NaN or an infinity in query or key: IEEE's answer cell by cell, as the readable port gives it.
    const withNaN = rows(3, 2, (i, t) => (i === 1 && t === 0 ? NaN : i + t));
    const out = scaledDotProductAttention(withNaN, key, value);
    assert.ok(out[1].every(Number.isNaN) && out[0].every(Number.isFinite) && out[2].every(Number.isFinite));
  });

  test("logits up to 1e5 do not overflow, across tiles, in float64 and float32", () => {
    const key = Array.from({ length: lk }, (_, j) => [j * 1000, -j * 800]);
    const value = Array.from({ length: lk }, (_, j) => [j]);
    const query = [
      [1, 0],
      [0, 1],
      [5, 5],
    ];
    assert.deepEqual(scaledDotProductAttention(query, key, value, { scale: 1 }), [[lk - 1], [0], [lk - 1]]);
    const f32 = (x: number[][]) => ({ shape: [x.length, x[0].length], data: Float32Array.from(x.flat()) });
    const out = scaledDotProductAttentionFlat(f32(query), f32(key), f32(value), { scale: 1 });
    assert.deepEqual(Array.from(out.data), [lk - 1, 0, lk - 1]);
  });
});

describe("exp, as the kernel computes it, against Math.exp", () => {
  // Arguments from 0 down past underflow, -inf, NaN, the most negative finite number, and the
  // values around each dtype's underflow and subnormal boundaries.
  const random = generator(3);
  const edges = [0, -0, -1e-300, -Infinity, NaN, -Number.MAX_VALUE, -1e300, -745.2, -744.4, -708.4, -708.3];
  const edges32 = [-103.97, -103.2, -87.4, -87.3, -88.7, -3.4e38];
  for (const build of BUILD_NAMES) {
    for (const float32 of [false, true]) {
      test(`${float32 ? "float32" : "float64"}, ${build} build: relative error < 2u(1 + |x|), subnormals close`, () => {
        selectKernelBuild(build);
        const u = float32 ? U32 : U64;
        const reach = float32 ? 110 : 760;
        const xs = [...edges, ...(float32 ? edges32 : [])];
        for (let n = 0; n < 50000; n++) {
          xs.push(n % 5 === 0 ? -random() * 2 : -random() * reach);
        }
        const x = float32 ? Float32Array.from(xs) : Float64Array.from(xs);
        const y = kernelExp(x);
        const smallestNormal = float32 ? 2 ** -126 : 2 ** -1022;
        const subnormalTolerance = float32 ? 2 ** -120 : 2 ** -1000;
        x.forEach((arg, n) => {
          const exact = float32 ? Math.fround(Math.exp(arg)) : Math.exp(arg);
          const got = y[n];
          if (Number.isNaN(arg)) {
            assert.ok(Number.isNaN(got), `exp(NaN) is ${got}`);
          } else if (exact === 0 && arg < -1000) {
            assert.ok(Object.is(got, 0), `exp(${arg}) is ${got}, not +0.0`);
          } else if (exact < smallestNormal) {
            assert.ok(
              got >= 0 && Math.abs(got - exact) <= subnormalTolerance,
              `exp(${arg}) = ${got} vs ${exact}`,
            );
          } else {
            const relative = Math.abs(got - exact) / exact;
            assert.ok(
              relative <= 2 * u * (1 + Math.abs(arg)),
              `exp(${arg}) = ${got} vs ${exact}: ${relative}`,
            );
          }
        });
        assert.ok(Object.is(y[3], 0) && Object.is(y[5], 0), "exp(-Infinity) and exp(-MAX_VALUE) are +0.0");
        assert.equal(y[0], 1);
      });
    }
  }
});

describe("worker threads", () => {
  test("workers: 1, 2 and 3 give the single-thread output bit for bit, float64 and float32", () => {
    selectKernelBuild("auto");
    const random = generator(5);
    const numbers = (n: number) => Array.from({ length: n }, () => 2 * random() - 1);
    const [B, Hq, Hkv, L, E, Ev] = [2, 4, 2, 3 * queryBlock + 5, 17, 9];
    const cells = Array.from({ length: L * L }, () => random() < 0.8);
    for (const float32 of [false, true]) {
      const tensor = (shape: number[]) => flatTensor({ shape, data: numbers(product(shape)) }, float32);
      const [q, k, v] = [tensor([B, Hq, L, E]), tensor([B, Hkv, L, E]), tensor([B, Hkv, L, Ev])];
      for (const options of [
        { enableGqa: true },
        { enableGqa: true, isCausal: true, softcap: 2 },
        {
          enableGqa: true,
          attnMask: { dtype: "bool", shape: [L, L], data: Uint8Array.from(cells, Number) } as FlatMask,
        },
      ]) {
        const one = Array.from(scaledDotProductAttentionFlat(q, k, v, options).data);
        for (const workers of [1, 2, 3]) {
          const many = Array.from(scaledDotProductAttentionFlat(q, k, v, { ...options, workers }).data);
          assert.deepEqual(many, one, `workers ${workers}`);
        }
      }
    }
    const nested = { shape: [L, E], data: numbers(L * E) };
    const values = { shape: [L, Ev], data: numbers(L * Ev) };
    assert.deepEqual(
      scaledDotProductAttention(nested, nested, values, { workers: 2 }),
      scaledDotProductAttention(nested, nested, values),
    );
  });

  test("workers must be an integer >= 1", () => {
    for (const workers of [0, 1.5, -1, Number.NaN]) {
      assert.throws(
        () => scaledDotProductAttention([[1]], [[1]], [[1]], { workers } as never),
        (error: unknown) => error instanceof AttentionInputError && error.kind === "value",
      );
    }
  });
});

describe("the memory limit", () => {
  const rows = (n: number, d: number) =>
    Array.from({ length: n }, (_, i) => Array.from({ length: d }, () => i));
  const [q, k, v] = [rows(64, 16), rows(64, 16), rows(64, 16)];
  const isSize = (pattern: RegExp) => (error: unknown) =>
    error instanceof AttentionInputError && error.kind === "size" && pattern.test(error.message);

  test("inputs whose kernel memory exceeds memoryLimit are refused with kind size, before any work", () => {
    assert.throws(
      () => scaledDotProductAttention(q, k, v, { memoryLimit: 20_000 }),
      isSize(
        /needs \d+ bytes for the output \[64, 16\] and its WebAssembly memory, more than memoryLimit = 20000/,
      ),
    );
    const flat = (x: number[][]) => ({ shape: [x.length, x[0].length], data: Float64Array.from(x.flat()) });
    assert.throws(
      () => scaledDotProductAttentionFlat(flat(q), flat(k), flat(v), { memoryLimit: 20_000 }),
      isSize(/more than memoryLimit = 20000/),
    );
    // The same call fits in the default limit and agrees with the readable port's shape.
    assert.equal((scaledDotProductAttention(q, k, v) as number[][]).length, 64);
  });

  test("an output larger than memoryLimit is refused with kind size, as flash.ts refuses it", () => {
    // The kernel's memory holds the query a chunk at a time, so only the output exceeds the limit.
    const query = { shape: [1, 2 ** 20, 1], data: new Float64Array(2 ** 20) };
    const one = { shape: [1, 1, 1], data: new Float64Array([1]) };
    assert.throws(
      () => scaledDotProductAttentionFlat(query, one, one, { memoryLimit: 1e6 }),
      isSize(/the output \[1, 1048576, 1\] needs 8388608 bytes, more than memoryLimit = 1000000/),
    );
    assert.throws(
      () => flash.scaledDotProductAttentionFlat(query, one, one, { memoryLimit: 1e6 }),
      isSize(/memoryLimit/),
    );
  });

  test("attentionSteps also holds its [Lq, Lk] diagnostic steps to the limit, as the readable port does", () => {
    assert.throws(
      () => attentionSteps(q, k, v, { memoryLimit: 64 * 64 * 24 - 1 }),
      isSize(/the scores \[64, 64\] need 98304 bytes/),
    );
  });
});

describe("initSimd in Node", () => {
  test("reads the builds from disk, fetching nothing, and may start the workers ahead", async () => {
    selectKernelBuild("auto");
    assert.equal(await initSimd(), "relaxed");
    assert.equal(await initSimd(undefined, { workers: 3 }), "relaxed");
    const data = Float64Array.from({ length: 300 * 8 }, (_, i) => Math.cos(i));
    const input = { shape: [300, 8], data };
    const one = scaledDotProductAttentionFlat(input, input, input);
    assert.deepEqual(scaledDotProductAttentionFlat(input, input, input, { workers: 3 }).data, one.data);
    await assert.rejects(initSimd(undefined, { workers: 0 }), AttentionInputError);
  });
});
