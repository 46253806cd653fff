// The fast port (flash.ts): every fixture under the readable port's rule, agreement with the
// readable port on random problems (tile boundaries included), and the flat entry point.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import fc from "fast-check";
import { type FixtureTensor, loadFixtures } from "../golden/reader.ts";
import * as readable from "../src/attention.ts";
import {
  AttentionInputError,
  attentionSteps,
  type FlatMask,
  type FlatTensor,
  KEY_TILE,
  QUERY_BLOCK,
  scaledDotProductAttention,
  scaledDotProductAttentionFlat,
} from "../src/flash.ts";
import {
  type FlatAttentionOptions,
  type ShapedMask,
  type ShapedTensor,
  toArray,
  toMaskArray,
} from "../src/inputs.ts";
import { atTheEdges, attentionProblems, generator, type Problem } from "./generate.ts";
import { assertFixtureError, broadcast, close, expectError, flatten, product, runCase } from "./helpers.ts";

const cases = loadFixtures();

/** A shaped tensor (numbers) -> the flat form with Float64Array or Float32Array storage. */
function flatTensor(t: ShapedTensor, storage: "f64" | "f32" = "f64"): FlatTensor {
  return { shape: t.shape, data: storage === "f64" ? Float64Array.from(t.data) : Float32Array.from(t.data) };
}

/** A shaped mask (booleans or numbers) -> the flat form: Uint8Array for bool, floats for float. */
function flatMaskOf(m: ShapedMask, storage: "f64" | "f32" = "f64"): FlatMask {
  const values = Array.from(m.data);
  if (values.length > 0 && typeof values[0] === "boolean") {
    return { dtype: "bool", shape: m.shape, data: Uint8Array.from(values, Number) };
  }
  if (values.length === 0) {
    return { dtype: "float", shape: m.shape, data: new Float64Array(0) };
  }
  const numbers = values as number[];
  return {
    dtype: "float",
    shape: m.shape,
    data: storage === "f64" ? Float64Array.from(numbers) : Float32Array.from(numbers),
  };
}

/** A fixture tensor (valid case) as a shaped tensor. */
const shaped = (t: FixtureTensor) => ({ shape: t.shape, data: t.data }) as ShapedTensor & ShapedMask;

// flash.ts's attentionSteps on every fixture, under compare.py's rule, is checked by
// python/tests/test_cross_language.py; here, its other two entry points against it.
describe("flash.ts's entry points on every fixture", () => {
  for (const c of cases) {
    if (c.expected !== null) {
      test(`${c.id}: ${c.description}`, () => {
        const steps = runCase(attentionSteps, c);
        assert.deepEqual(steps.outputShape, c.expected!.output.shape);
        // The fast path gives the diagnostic path's output, bit for bit, through both entry points.
        assert.deepEqual(flatten(runCase(scaledDotProductAttention, c)), flatten(steps.output));
        const input = c.inputs as Record<string, FixtureTensor | null>;
        const flat = scaledDotProductAttentionFlat(
          flatTensor(shaped(input.query!)),
          flatTensor(shaped(input.key!)),
          flatTensor(shaped(input.value!)),
          {
            attnMask: input.attnMask === null ? null : flatMaskOf(shaped(input.attnMask)),
            ...(c.params as FlatAttentionOptions),
          },
        );
        assert.deepEqual(flat.shape, c.expected!.output.shape);
        assert.ok(flat.data instanceof Float64Array);
        assert.deepEqual(Array.from(flat.data), flatten(steps.output));
      });
    } else {
      const error = c.expectedError!;
      test(`${c.id}: ${c.description}`, () => {
        assertFixtureError(() => runCase(scaledDotProductAttention, c), error);
        // Where the inputs are rectangular, the flat entry point throws the same error.
        const flat = flatFixtureInputs(c.inputs);
        if (flat !== null) {
          const options = { ...c.params, attnMask: flat.attnMask } as never;
          assertFixtureError(
            () => scaledDotProductAttentionFlat(flat.query, flat.key, flat.value, options),
            error,
          );
        }
      });
    }
  }

  test("some invalid fixtures do reach the flat entry point", () => {
    const reached = cases.filter((c) => c.expectedError !== null && flatFixtureInputs(c.inputs) !== null);
    assert.ok(reached.length >= 10, `${reached.length} cases`);
  });
});

/** An invalid case's raw inputs in flat form, or null when they are not rectangular arrays of
 * numbers (ragged or typed wrongly: errors the flat form cannot even express). */
function flatFixtureInputs(
  inputs: Record<string, unknown>,
): { query: FlatTensor; key: FlatTensor; value: FlatTensor; attnMask: FlatMask | null } | null {
  try {
    const [q, k, v] = (["query", "key", "value"] as const).map((name) => toArray(name, inputs[name]));
    const mask = inputs.attnMask === null ? null : toMaskArray(inputs.attnMask);
    const attnMask: FlatMask | null =
      mask === null
        ? null
        : mask.dtype === "bool"
          ? { dtype: "bool", shape: mask.shape, data: Uint8Array.from(mask.data, Number) }
          : { dtype: "float", shape: mask.shape, data: mask.data };
    return { query: q, key: k, value: v, attnMask };
  } catch (error) {
    if (error instanceof AttentionInputError) {
      return null;
    }
    throw error;
  }
}

// ---- Agreement with the readable port on random problems. ----

/** Lengths that land on and around the tile and block edges, and small ones (0 included). */
const EDGES = [KEY_TILE - 1, KEY_TILE, KEY_TILE + 1, 2 * KEY_TILE + 1, QUERY_BLOCK - 1, QUERY_BLOCK + 1];
const length = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 6 }), weight: 5 },
  { arbitrary: fc.constantFrom(...EDGES), weight: 3 },
);

const problems = attentionProblems({ length, keyTile: KEY_TILE });

/** flash.ts against attention.ts on one problem: scores and logits bitwise, weights and output
 * within a tight tolerance, NaN in the same places, fully-masked rows +0.0 in both. */
function assertAgrees(p: Pick<Problem, "query" | "key" | "value" | "options">): void {
  const expected = readable.attentionSteps(p.query, p.key, p.value, p.options);
  const actual = attentionSteps(p.query, p.key, p.value, p.options);
  assert.deepEqual(actual.scoresShape, expected.scoresShape);
  assert.deepEqual(actual.outputShape, expected.outputShape);
  assert.deepEqual(flatten(actual.scores), flatten(expected.scores));
  assert.deepEqual(flatten(actual.logits), flatten(expected.logits));
  const [weights, expectedWeights] = [flatten(actual.weights), flatten(expected.weights)];
  weights.forEach((w, n) =>
    assert.ok(close(w, expectedWeights[n], 1e-13), `weights[${n}]: ${w} vs ${expectedWeights[n]}`),
  );
  const [output, expectedOutput] = [flatten(actual.output), flatten(expected.output)];
  const big = Math.max(1, ...Array.from(p.value.data, Math.abs));
  output.forEach((x, n) => {
    assert.ok(close(x, expectedOutput[n], 1e-12 * big), `output[${n}]: ${x} vs ${expectedOutput[n]}`);
    if (expectedOutput[n] === 0 && x === 0) {
      assert.ok(Object.is(x, 0) && Object.is(expectedOutput[n], 0), `output[${n}] is -0`);
    }
  });
  // The fast path (no recording) gives the same output, through both entry points.
  assert.deepEqual(flatten(scaledDotProductAttention(p.query, p.key, p.value, p.options)), output);
  const mask = p.options.attnMask;
  const flat = scaledDotProductAttentionFlat(flatTensor(p.query), flatTensor(p.key), flatTensor(p.value), {
    ...p.options,
    attnMask: mask === undefined ? null : flatMaskOf(mask),
  });
  assert.deepEqual(Array.from(flat.data), output);
}

// ---- At float64's edges: the same answer wherever the contract defines one. ----

/** Whether the contract may leave the problem undefined: a score or logit that can exceed the
 * largest double. Bounded from above (every query against every key, E terms of the largest
 * sizes), so it leaves out more than the rule in compare.py does, never less. */
function mayOverflow(p: Problem): boolean {
  const largest = (data: ArrayLike<number | boolean>) =>
    Array.from(data as ArrayLike<number>).reduce(
      (m, x) => (Number.isFinite(x) ? Math.max(m, Math.abs(x)) : m),
      0,
    );
  const e = p.query.shape.at(-1) ?? 1;
  const dot = largest(p.query.data) * largest(p.key.data) * e;
  const mask = p.options.attnMask === undefined ? 0 : largest(p.options.attnMask.data);
  return !Number.isFinite(dot * Math.max(1, Math.abs(p.options.scale ?? 1)) + mask);
}

/** flash.ts against attention.ts where the contract defines the answer: scores and logits
 * bitwise; the outputs NaN and infinite in the same places, +0.0 in fully-masked rows, and
 * otherwise within both ports' budgets of compare.py's rule (its spread bounded from above). */
function assertAgreesWhereDefined(p: Problem): void {
  if (mayOverflow(p)) {
    return;
  }
  const expected = readable.attentionSteps(p.query, p.key, p.value, p.options);
  const actual = attentionSteps(p.query, p.key, p.value, p.options);
  assert.deepEqual(flatten(actual.scores), flatten(expected.scores));
  assert.deepEqual(flatten(actual.logits), flatten(expected.logits));
  const [output, expectedOutput] = [flatten(actual.output), flatten(expected.output)];
  assert.deepEqual(flatten(scaledDotProductAttention(p.query, p.key, p.value, p.options)), output);
  const weights = flatten(expected.weights);
  const logits = flatten(expected.logits);
  const [Lk, Ev] = [expected.scoresShape.at(-1) ?? 0, expected.outputShape.at(-1) ?? 0];
  const valueHeads = p.value.shape.length >= 3 ? (p.value.shape.at(-3) ?? 1) : 1;
  const heads = expected.outputShape.length >= 3 ? (expected.outputShape.at(-3) ?? 1) : 1;
  const Lq = expected.outputShape.at(-2) ?? 0;
  const e = p.query.shape.at(-1) ?? 1;
  const sizes = (data: ArrayLike<number | boolean>) =>
    Array.from(data as ArrayLike<number>).reduce(
      (m, x) => (Number.isFinite(x) ? Math.max(m, Math.abs(x)) : m),
      0,
    );
  const mask = p.options.attnMask === undefined ? 0 : sizes(p.options.attnMask.data);
  const spread = Math.abs(p.options.scale ?? 1 / Math.sqrt(e)) * sizes(p.query.data) * sizes(p.key.data) * e;
  const S = spread + mask + (p.options.softcap ?? 0);
  for (let n = 0; n < output.length; n++) {
    const [a, b] = [output[n], expectedOutput[n]];
    const row = Math.floor(n / Ev);
    const [i, t] = [row % Lq, n % Ev];
    const head = Math.floor(row / Lq);
    const valueHead =
      Math.floor(head / heads) * valueHeads + Math.floor(((head % heads) * valueHeads) / heads);
    let [magnitude, floor, reach, fullyMasked] = [0, 0, 0, true];
    for (let j = 0; j < Lk; j++) {
      const v = p.value.data[(valueHead * Lk + j) * Ev + t] as number;
      const w = weights[row * Lk + j];
      fullyMasked &&= logits[row * Lk + j] === -Infinity;
      if (Number.isFinite(v) && Number.isFinite(w)) {
        magnitude += Math.abs(w) * Math.abs(v);
        floor += (1 + Math.abs(v)) * 2 ** -1074;
        reach = Math.max(reach, Math.abs(v));
      }
    }
    const where = `output[${n}] (row ${i}): ${a} vs ${b}`;
    if (fullyMasked) {
      assert.ok(Object.is(a, 0) && Object.is(b, 0), `${where}: a fully-masked row is +0.0`);
      continue;
    }
    if (Number.isNaN(a) || Number.isNaN(b) || !Number.isFinite(a) || !Number.isFinite(b)) {
      assert.ok(Object.is(a, b), where);
      continue;
    }
    const budget = 2 * (16 * 2 ** -53 * (1 + S) * magnitude + 16 * floor);
    if (Number.isFinite(budget)) {
      assert.ok(Math.abs(a - b) <= budget, `${where}, budget ${budget}`);
    } else {
      assert.ok(Math.abs(a) <= reach && Math.abs(b) <= reach, `${where}, beyond ${reach}`);
    }
  }
}

describe("flash.ts agrees with attention.ts at float64's edges", () => {
  test("sizes from subnormal to 1e307, NaN and infinities, every mask rank, GQA, empty dims", () => {
    fc.assert(fc.property(atTheEdges(problems), assertAgreesWhereDefined), { numRuns: 300 });
  });
});

describe("flash.ts agrees with attention.ts", () => {
  test("the tile sizes are exported and fit the register blocking", () => {
    assert.ok(KEY_TILE >= 4 && KEY_TILE % 4 === 0, `KEY_TILE ${KEY_TILE}`);
    assert.ok(QUERY_BLOCK >= 2 && QUERY_BLOCK % 2 === 0, `QUERY_BLOCK ${QUERY_BLOCK}`);
  });

  test("random shapes, masks and options, tile edges included", () => {
    fc.assert(fc.property(problems, assertAgrees), { numRuns: 150 });
  });

  test("every tile-edge length for query and key, causal and not, with a mask that blocks tiles", () => {
    const random = generator(7);
    for (const lq of [1, ...EDGES]) {
      for (const lk of [1, ...EDGES]) {
        for (const isCausal of [false, true]) {
          const numbers = (n: number, spread: number) =>
            Array.from({ length: n }, () => (2 * random() - 1) * spread);
          // Even rows: key tile 0 masked (the running max starts at -Infinity and stays there for
          // a whole tile); rows divisible by 3: only the last key allowed.
          const mask = Array.from({ length: lq * lk }, (_, n) => {
            const [i, j] = [Math.floor(n / lk), n % lk];
            return i % 3 === 0 ? j === lk - 1 : i % 2 === 0 ? j >= KEY_TILE : true;
          });
          assertAgrees({
            query: { shape: [lq, 3], data: numbers(lq * 3, 3) },
            key: { shape: [lk, 3], data: numbers(lk * 3, 3) },
            value: { shape: [lk, 2], data: numbers(lk * 2, 4) },
            options: { isCausal, attnMask: { shape: [lq, lk], data: mask } },
          });
        }
      }
    }
  });

  test("a max that grows in every tile (rescaling each time) and one that never grows", () => {
    const lk = 3 * KEY_TILE + 2;
    for (const direction of [1, -1]) {
      // Key j = direction * j/8 along every feature: query · key grows (or shrinks) with j.
      const key = Array.from({ length: lk }, (_, j) => [(direction * j) / 8, (direction * j) / 8]);
      const value = Array.from({ length: lk }, (_, j) => [Math.sin(j), Math.cos(j), j]);
      const query = [
        [1, 1],
        [0.5, 2],
        [0, 0],
        [3, -1],
      ];
      assertAgrees({
        query: { shape: [4, 2], data: query.flat() },
        key: { shape: [lk, 2], data: key.flat() },
        value: { shape: [lk, 3], data: value.flat() },
        options: { scale: 1 },
      });
    }
  });

  test("logits up to 1e5 do not overflow, across tiles", () => {
    const lk = 2 * KEY_TILE + 1;
    const key = Array.from({ length: lk }, (_, j) => [j * 1000, -j * 800]); // logits up to 1e5, 800 apart or more
    const value = Array.from({ length: lk }, (_, j) => [j]);
    const out = scaledDotProductAttention(
      [
        [1, 0],
        [0, 1],
        [5, 5],
      ],
      key,
      value,
      { scale: 1 },
    );
    assert.deepEqual(out, [[lk - 1], [0], [lk - 1]]); // one key wins outright: its value exactly
  });
});

describe("the flat entry point", () => {
  const random = generator(11);
  const lq = KEY_TILE + 3;
  const lk = 2 * KEY_TILE + 1;
  const numbers = (n: number) => Array.from({ length: n }, () => Math.fround(8 * random() - 4)); // float32-exact
  const query = { shape: [2, lq, 5], data: numbers(2 * lq * 5) };
  const key = { shape: [1, lk, 5], data: numbers(lk * 5) };
  const value = { shape: [1, lk, 3], data: numbers(lk * 3) };
  const options = { enableGqa: true, isCausal: true, softcap: 3 };

  test("Float64Array storage gives the nested entry point's output, bit for bit", () => {
    const out = scaledDotProductAttentionFlat(flatTensor(query), flatTensor(key), flatTensor(value), options);
    assert.ok(out.data instanceof Float64Array);
    assert.deepEqual(out.shape, [2, lq, 3]);
    assert.deepEqual(Array.from(out.data), flatten(scaledDotProductAttention(query, key, value, options)));
  });

  test("Float32Array storage: computed in doubles, rounded once into a Float32Array", () => {
    const out = scaledDotProductAttentionFlat(
      flatTensor(query, "f32"),
      flatTensor(key, "f32"),
      flatTensor(value, "f32"),
      options,
    );
    assert.ok(out.data instanceof Float32Array);
    assert.deepEqual(out.shape, [2, lq, 3]);
    const doubles = flatten(readable.scaledDotProductAttention(query, key, value, options));
    out.data.forEach((x, n) =>
      assert.ok(
        Math.abs(x - doubles[n]) <= 2 ** -23 * Math.abs(doubles[n]) + 1e-300,
        `${x} vs ${doubles[n]}`,
      ),
    );
    const fast = flatten(scaledDotProductAttention(query, key, value, options));
    assert.deepEqual(Array.from(out.data), fast.map(Math.fround));
    // Storage follows query: Float32 query with Float64 key and value gives Float32.
    const mixed = scaledDotProductAttentionFlat(
      flatTensor(query, "f32"),
      flatTensor(key),
      flatTensor(value),
      options,
    );
    assert.ok(mixed.data instanceof Float32Array);
  });

  test("masks: Uint8Array bool (any nonzero attends) and Float32/Float64 float, broadcast by strides", () => {
    const cells = Array.from({ length: lq * lk }, () => random() < 0.7);
    const bool = { shape: [lq, lk], data: cells };
    const expected = flatten(
      readable.scaledDotProductAttention(query, key, value, { ...options, attnMask: bool }),
    );
    const asBytes = Uint8Array.from(cells, (c) => (c ? 1 + Math.floor(random() * 255) : 0)); // 1..255 = true
    const out = scaledDotProductAttentionFlat(flatTensor(query), flatTensor(key), flatTensor(value), {
      ...options,
      attnMask: { dtype: "bool", shape: [lq, lk], data: asBytes },
    });
    out.data.forEach((x, n) => assert.ok(close(x, expected[n], 1e-12), `${x} vs ${expected[n]}`));
    for (const shape of [[lk], [lq, 1], [2, 1, lk], [2, lq, lk]]) {
      const bias = numbers(product(shape)).map((x) => (x < -3 ? -Infinity : x));
      const nested = flatten(
        readable.scaledDotProductAttention(query, key, value, {
          ...options,
          attnMask: { shape, data: bias },
        }),
      );
      for (const storage of ["f32", "f64"] as const) {
        const mask = flatMaskOf({ shape, data: bias }, storage);
        const result = scaledDotProductAttentionFlat(flatTensor(query), flatTensor(key), flatTensor(value), {
          ...options,
          attnMask: mask,
        });
        result.data.forEach((x, n) =>
          assert.ok(close(x, nested[n], 1e-12), `mask ${JSON.stringify(shape)}: ${x} vs ${nested[n]}`),
        );
      }
    }
    // The bool mask agrees with a float mask of 0 and -Infinity.
    const asFloat = broadcast(cells, [lq, lk], [lq, lk]).map((c) => (c ? 0 : -Infinity));
    const viaFloat = scaledDotProductAttentionFlat(flatTensor(query), flatTensor(key), flatTensor(value), {
      ...options,
      attnMask: { dtype: "float", shape: [lq, lk], data: Float64Array.from(asFloat) },
    });
    assert.deepEqual(Array.from(viaFloat.data), Array.from(out.data));
  });

  test("bad flat input: the kinds and messages of inputs.ts", () => {
    const call =
      (q: unknown, k: unknown, v: unknown, o: unknown = {}) =>
      () =>
        scaledDotProductAttentionFlat(q as FlatTensor, k as FlatTensor, v as FlatTensor, o as never);
    const f64 = (shape: number[], n = product(shape)) => ({ shape, data: new Float64Array(n) });
    const [q, k, v] = [f64([2, 4]), f64([3, 4]), f64([3, 2])];
    expectError(call(q, k, v, { isCausal: 1 }), "value", "isCausal must be a boolean, got 1");
    expectError(
      call({ shape: [2, 4], data: [1, 2, 3, 4, 5, 6, 7, 8] }, k, v),
      "type",
      "query.data must be a Float64Array or a Float32Array, got an array",
    );
    expectError(call([[1, 2]], k, v), "type", "query must be a flat tensor { shape, data }, got an array");
    expectError(
      call(q, { data: new Float64Array(12) }, v),
      "type",
      "key must be a flat tensor { shape, data }, got an object",
    );
    expectError(
      call(q, k, v, { attnMask: { shape: [3], data: new Uint8Array(3) } }),
      "type",
      "attnMask must be a flat mask { dtype, shape, data }, got an object",
    );
    expectError(
      call(q, { shape: [3, 4], data: new Float32Array(11) }, v),
      "shape",
      "key has 11 values but its shape [3, 4] needs 12",
    );
    expectError(
      call(q, k, { shape: [3, -2], data: new Float64Array(0) }),
      "shape",
      "value.shape must be an array of non-negative integers, got [3, -2]",
    );
    // The shaped form of the readable port says the same.
    assert.throws(
      () => readable.scaledDotProductAttention(q, { shape: [3, 4], data: new Float64Array(11) }, v),
      {
        message: "key has 11 values but its shape [3, 4] needs 12",
      },
    );
    expectError(
      call(q, f64([3, 5]), v),
      "shape",
      "key has feature size 5 but query has 4 (query [2, 4], key [3, 5])",
    );
    expectError(
      call(q, k, v, { attnMask: { dtype: "bool", shape: [3], data: new Float64Array(3) } }),
      "type",
      /attnMask\.data must be a Uint8Array for dtype "bool", got a Float64Array/,
    );
    expectError(
      call(q, k, v, { attnMask: { dtype: "float", shape: [3], data: new Uint8Array(3) } }),
      "type",
      /attnMask\.data must be a Float64Array or a Float32Array for dtype "float"/,
    );
    expectError(
      call(q, k, v, { attnMask: { dtype: "int", shape: [3], data: new Uint8Array(3) } }),
      "type",
      'attnMask.dtype must be "bool" or "float", got a string',
    );
    expectError(
      call(q, k, v, { attnMask: { dtype: "bool", shape: [4], data: new Uint8Array(3) } }),
      "shape",
      "attnMask has 3 values but its shape [4] needs 4",
    );
    expectError(
      call(q, k, v, { attnMask: { dtype: "bool", shape: [4], data: new Uint8Array(4) } }),
      "mask",
      /attnMask \[4\] does not broadcast to the scores \[2, 3\]/,
    );
  });
});
