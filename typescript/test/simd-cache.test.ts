// simd.ts's resident key/value cache (SimdKeyValueCache): a prefill then decode steps of 1, 3, 7
// and 4 tokens appended to it, each attended, give the flat entry's answer on every key and value
// so far bit for bit (float32 and float64, grouped-query heads, batch dims, causal with the offset
// and not, a mask, softcap and scale, two workers); truncating gives the shorter cache's answers;
// NaN and ±Infinity take the flat entry's paths; the decode fixtures, filled in two appends, are
// held to the oracle's outputs under the tolerance rule; and a person's mistakes throw
// AttentionInputError with a kind, naming the argument and the shapes.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";

import { checkOutput, outsideContract } from "../conformance/judge.ts";
import { loadCases, type TestCase } from "../conformance/kit.ts";
import type { FlatMask, FlatTensor } from "../src/inputs.ts";
import {
  createSimdKeyValueCache,
  type SimdCacheDtype,
  type SimdCacheOptions,
  type SimdFlatAttentionOptions,
  type SimdKeyValueCache,
  scaledDotProductAttentionFlat,
} from "../src/simd-node.ts";
import { generator } from "./generate.ts";
import { expectError, product } from "./helpers.ts";

const [B, Hq, Hkv, E, Ev] = [2, 4, 2, 16, 9];
const PREFILL = 135; // past two key tiles of 64, so steps start inside a tile and cross into the next
const STEPS = [1, 3, 7, 4];

const random = generator(61);
const numbers = (n: number) => Array.from({ length: n }, () => 2 * random() - 1);

/** Rows [from, to) of every (batch, head) slice of a flat [slices, N, width] tensor. */
function rowsOf(data: readonly number[], slices: number, n: number, width: number, from: number, to: number) {
  const out: number[] = [];
  for (let s = 0; s < slices; s++) {
    out.push(...data.slice((s * n + from) * width, (s * n + to) * width));
  }
  return out;
}

function tensor(shape: number[], data: ArrayLike<number>, dtype: SimdCacheDtype): FlatTensor {
  return { shape, data: dtype === "float32" ? Float32Array.from(data) : Float64Array.from(data) };
}

/** The same bits (Object.is: -0 and NaN told apart and matched). */
function assertSameBits(actual: FlatTensor, expected: FlatTensor, what: string): void {
  assert.deepEqual(actual.shape, expected.shape, what);
  assert.equal(actual.data.constructor, expected.data.constructor, what);
  const differing = Array.from(actual.data).findIndex((x, n) => !Object.is(x, expected.data[n]));
  assert.equal(differing, -1, `${what}: element ${differing} differs`);
}

/** A generation loop over `lengths` blocks of tokens: each block's keys and values appended, then
 * its queries attended with `options(start, rows)`, against the flat entry on every key so far. */
function generate(
  dtype: SimdCacheDtype,
  lengths: readonly number[],
  options: (start: number, rows: number) => SimdFlatAttentionOptions,
  cacheOptions: SimdCacheOptions = {},
  afterEach: (cache: SimdKeyValueCache) => void = () => {},
): SimdKeyValueCache {
  const n = lengths.reduce((a, x) => a + x, 0);
  const [key, value, query] = [numbers(B * Hkv * n * E), numbers(B * Hkv * n * Ev), numbers(B * Hq * n * E)];
  const cache = createSimdKeyValueCache([B, Hkv, E], Ev, dtype, cacheOptions);
  let start = 0;
  for (const rows of lengths) {
    const end = start + rows;
    cache.append(
      tensor([B, Hkv, rows, E], rowsOf(key, B * Hkv, n, E, start, end), dtype),
      tensor([B, Hkv, rows, Ev], rowsOf(value, B * Hkv, n, Ev, start, end), dtype),
    );
    assert.equal(cache.length, end);
    assert.deepEqual(cache.keyShape, [B, Hkv, end, E]);
    assert.deepEqual(cache.valueShape, [B, Hkv, end, Ev]);
    const q = tensor([B, Hq, rows, E], rowsOf(query, B * Hq, n, E, start, end), dtype);
    const opts = options(start, rows);
    const got = cache.attend(q, opts);
    const expected = scaledDotProductAttentionFlat(
      q,
      tensor([B, Hkv, end, E], rowsOf(key, B * Hkv, n, E, 0, end), dtype),
      tensor([B, Hkv, end, Ev], rowsOf(value, B * Hkv, n, Ev, 0, end), dtype),
      opts,
    );
    assertSameBits(got, expected, `${dtype}, rows ${start}..${end - 1}`);
    afterEach(cache);
    start = end;
  }
  return cache;
}

const DTYPES: SimdCacheDtype[] = ["float32", "float64"];
const GENERATION = [PREFILL, ...STEPS];

describe("a prefill then decode steps of 1, 3, 7 and 4 tokens: the flat entry's answers, bit for bit", () => {
  for (const dtype of DTYPES) {
    test(`${dtype}, grouped-query heads, causal with the offset at each block's first row`, () => {
      generate(dtype, GENERATION, (start) => ({ isCausal: true, queryOffset: start, enableGqa: true }));
    });
    test(`${dtype}, grouped-query heads, not causal (one new row sees every key)`, () => {
      generate(dtype, GENERATION, () => ({ enableGqa: true }));
    });
    test(`${dtype}, a float mask over every key so far, softcap and scale, two workers`, () => {
      const cache = generate(dtype, GENERATION, (start, rows) => {
        const keys = start + rows;
        const mask: FlatMask = {
          dtype: "float",
          shape: [rows, keys],
          data: Float64Array.from(numbers(rows * keys)),
        };
        return { enableGqa: true, attnMask: mask, softcap: 2.5, scale: 0.3, workers: 2 };
      });
      cache.close();
    });
  }

  test("the answers rest on every key: the same query without the last step's keys differs", () => {
    const cache = generate("float64", [PREFILL, 4], () => ({ enableGqa: true }));
    const query = tensor([B, Hq, 1, E], numbers(B * Hq * E), "float64");
    const all = cache.attend(query, { enableGqa: true });
    cache.truncate(PREFILL + 3);
    assert.notDeepEqual(Array.from(cache.attend(query, { enableGqa: true }).data), Array.from(all.data));
  });
});

describe("truncate", () => {
  for (const dtype of DTYPES) {
    test(`${dtype}: back to a shorter cache, and on again, the flat entry's answers on what is left`, () => {
      const n = PREFILL + 20;
      const [key, value] = [numbers(Hkv * n * E), numbers(Hkv * n * Ev)];
      key[(1 * n + 140) * E + 3] = 1e30; // a large key in the rows dropped: the bound is found again
      value[(0 * n + 141) * Ev + 2] = Number.NaN; // a NaN value dropped: its column is clean again
      value[(0 * n + 20) * Ev + 2] = Number.POSITIVE_INFINITY; // ... but for this earlier one
      const cache = createSimdKeyValueCache([Hkv, E], Ev, dtype);
      const append = (from: number, to: number) =>
        cache.append(
          tensor([Hkv, to - from, E], rowsOf(key, Hkv, n, E, from, to), dtype),
          tensor([Hkv, to - from, Ev], rowsOf(value, Hkv, n, Ev, from, to), dtype),
        );
      const check = (keys: number, what: string) => {
        const query = tensor([Hq, 2, E], numbers(Hq * 2 * E), dtype);
        const options = { enableGqa: true, isCausal: true, queryOffset: keys - 2 };
        const expected = scaledDotProductAttentionFlat(
          query,
          tensor([Hkv, keys, E], rowsOf(key, Hkv, n, E, 0, keys), dtype),
          tensor([Hkv, keys, Ev], rowsOf(value, Hkv, n, Ev, 0, keys), dtype),
          options,
        );
        assertSameBits(cache.attend(query, options), expected, what);
      };
      append(0, n);
      check(n, "the whole cache");
      for (const keys of [139, 128, 70]) {
        cache.truncate(keys);
        assert.equal(cache.length, keys);
        check(keys, `truncated to ${keys}`);
      }
      append(70, 150);
      check(150, "appended again after truncating");
      cache.truncate(0);
      append(0, 2);
      check(2, "emptied, then two keys");
    });
  }
});

describe("special values take the flat entry's paths", () => {
  for (const dtype of DTYPES) {
    test(`${dtype}: NaN and ±Infinity in key or value, a key near the largest number`, () => {
      const specials: [string, number, number][] = [
        ["key", 3, Number.NaN],
        ["key", 70, Number.POSITIVE_INFINITY],
        ["key", 5, dtype === "float32" ? 3e38 : 1e308],
        ["value", 100, Number.NaN],
        ["value", 2, Number.NEGATIVE_INFINITY],
      ];
      for (const [which, row, x] of specials) {
        const n = 140;
        const [key, value] = [numbers(Hkv * n * E), numbers(Hkv * n * Ev)];
        (which === "key" ? key : value)[row * (which === "key" ? E : Ev) + 1] = x;
        const cache = createSimdKeyValueCache([Hkv, E], Ev, dtype);
        cache.append(tensor([Hkv, n, E], key, dtype), tensor([Hkv, n, Ev], value, dtype));
        const query = tensor([Hq, 3, E], numbers(Hq * 3 * E), dtype);
        for (const options of [{ enableGqa: true }, { enableGqa: true, isCausal: true, queryOffset: 50 }]) {
          const expected = scaledDotProductAttentionFlat(
            query,
            tensor([Hkv, n, E], key, dtype),
            tensor([Hkv, n, Ev], value, dtype),
            options,
          );
          assertSameBits(cache.attend(query, options), expected, `${which}[${row}] = ${x}`);
        }
      }
    });
  }
});

/** A fixture case's options as the flat entry takes them: the case's own (window, sinks, kvSeqlen,
 * a per-batch queryOffset among them), with the rule's mask, scale and softcap. */
function caseOptions(c: TestCase): SimdFlatAttentionOptions {
  const { attnMask, scale, softcap } = c.rule!;
  return {
    ...(c.options as SimdFlatAttentionOptions),
    attnMask:
      attnMask === null
        ? null
        : attnMask.dtype === "bool"
          ? { dtype: "bool", shape: attnMask.shape, data: Uint8Array.from(attnMask.data, Number) }
          : { dtype: "float", shape: attnMask.shape, data: Float64Array.from(attnMask.data) },
    scale,
    softcap,
  };
}

/** An integer or nested arrays of them, flat. */
function integers(x: unknown): number[] {
  return Array.isArray(x) ? x.flatMap(integers) : [x as number];
}

describe("the decode fixtures, the cache filled in two appends, against the oracle", () => {
  const cases = loadCases({ tags: ["decode"] }).filter((c) => c.rule !== null);
  assert.ok(cases.length >= 8, `${cases.length} decode cases`);
  for (const c of cases) {
    test(c.id, () => {
      const rule = c.rule!;
      const { query, key, value } = rule;
      const Lk = key.shape.at(-2)!;
      const split = Math.floor(Lk / 2);
      for (const dtype of DTYPES) {
        const cache = createSimdKeyValueCache(
          [...key.shape.slice(0, -2), key.shape.at(-1)!],
          value.shape.at(-1)!,
          dtype,
        );
        for (const [from, to] of [
          [0, split],
          [split, Lk],
        ]) {
          const part = (t: { shape: readonly number[]; data: ArrayLike<number> }) => {
            const slices = product(t.shape.slice(0, -2));
            const width = t.shape.at(-1)!;
            return tensor(
              [...t.shape.slice(0, -2), to - from, width],
              rowsOf(Array.from(t.data), slices, Lk, width, from, to),
              dtype,
            );
          };
          cache.append(part(key), part(value));
        }
        const options = caseOptions(c);
        const q = tensor(query.shape.slice(), Array.from(query.data), dtype);
        const got = cache.attend(q, options);
        if (outsideContract(rule.expected, dtype) === null) {
          const check = checkOutput(got, rule, dtype);
          assert.ok(check.passed, `${dtype}: ${check.problem ?? `${check.budgetUsed} of the budget`}`);
        }
        const flat = scaledDotProductAttentionFlat(
          q,
          tensor(key.shape.slice(), Array.from(key.data), dtype),
          tensor(value.shape.slice(), Array.from(value.data), dtype),
          options,
        );
        assertSameBits(got, flat, dtype);
      }
    });
  }
});

describe("a person's mistakes: AttentionInputError with a kind, naming the argument and the shapes", () => {
  const cache = createSimdKeyValueCache([2, Hkv, E], Ev, "float32");
  const rows = (shape: number[]) => tensor(shape, numbers(product(shape)), "float32");
  cache.append(rows([2, Hkv, 5, E]), rows([2, Hkv, 5, Ev]));

  test("appended keys or values whose heads, features, batch, rank or length disagree", () => {
    expectError(
      () => cache.append(rows([2, 3, 1, E]), rows([2, 3, 1, Ev])),
      "heads",
      "key has head count 3 but the cache has 2 (key [2, 3, 1, 16], the cache's keys [2, 2, 5, 16])",
    );
    expectError(
      () => cache.append(rows([2, Hkv, 1, 8]), rows([2, Hkv, 1, Ev])),
      "shape",
      "key has feature size 8 but the cache has 16 (key [2, 2, 1, 8], the cache's keys [2, 2, 5, 16])",
    );
    expectError(
      () => cache.append(rows([2, Hkv, 1, E]), rows([2, Hkv, 1, 4])),
      "shape",
      "value has feature size 4 but the cache has 9 (value [2, 2, 1, 4], the cache's values [2, 2, 5, 9])",
    );
    expectError(
      () => cache.append(rows([3, Hkv, 1, E]), rows([3, Hkv, 1, Ev])),
      "shape",
      "key has batch dims [3] but the cache has [2] (key [3, 2, 1, 16], the cache's keys [2, 2, 5, 16])",
    );
    expectError(
      () => cache.append(rows([Hkv, 1, E]), rows([Hkv, 1, Ev])),
      "rank",
      "key must have 4 dimensions, [B..., Hkv, L, E] as the cache's keys [2, 2, 5, 16], got shape [2, 1, 16]",
    );
    expectError(
      () => cache.append(rows([2, Hkv, 2, E]), rows([2, Hkv, 1, Ev])),
      "shape",
      "value has length 1 but key has 2 (key [2, 2, 2, 16], value [2, 2, 1, 9])",
    );
    expectError(
      () =>
        cache.append({ shape: [2, Hkv, 1, E], data: numbers(2 * Hkv * E) as never }, rows([2, Hkv, 1, Ev])),
      "type",
      /^key must be a flat tensor \{ shape, data \} with a Float64Array or a Float32Array, got/,
    );
    expectError(
      () => cache.append({ shape: [2, Hkv, 1, E], data: new Float32Array(3) }, rows([2, Hkv, 1, Ev])),
      "shape",
      "key has 3 values but its shape [2, 2, 1, 16] needs 64",
    );
    assert.equal(cache.length, 5, "a refused append leaves the cache as it was");
  });

  test("a query that disagrees with the cache: the flat entry's checks, with the cache's shapes", () => {
    expectError(
      () => cache.attend(rows([2, 4, 1, 8]), { enableGqa: true }),
      "shape",
      "key has feature size 16 but query has 8 (query [2, 4, 1, 8], key [2, 2, 5, 16])",
    );
    expectError(
      () => cache.attend(rows([2, 4, 1, E])),
      "heads",
      "query has head count 4 but key and value have 2; set enableGqa to share key/value heads across" +
        " query heads (query [2, 4, 1, 16], key [2, 2, 5, 16])",
    );
    expectError(
      () => cache.attend(tensor([2, 4, 1, E], numbers(8 * E), "float64"), { enableGqa: true }),
      "type",
      "query.data must be a Float32Array for this float32 cache, got a Float64Array",
    );
    expectError(() => cache.attend(rows([2, 4, 1, E]), { queryOffset: -1 }), "value", /queryOffset/);
  });

  test("a bad cache shape, value features, dtype or truncate length", () => {
    expectError(
      () => createSimdKeyValueCache([], Ev),
      "shape",
      /^a cache's shape must be \[B\.\.\., Hkv, E\]/,
    );
    expectError(() => createSimdKeyValueCache([2, 0], Ev), "shape", /^a cache's shape must be/);
    expectError(() => createSimdKeyValueCache([2, E], -1), "shape", /^a cache's valueFeatures must be/);
    expectError(
      () => createSimdKeyValueCache([2, E], Ev, "float16" as SimdCacheDtype),
      "value",
      /^a cache's dtype must be "float32" or "float64"/,
    );
    expectError(
      () => cache.truncate(6),
      "value",
      /^truncate's length must be an integer from 0 to the cache's length 5/,
    );
  });
});

// ---- A bounded cache: a window and sinks, its keys a ring that drops the oldest past the sinks. ----

const [SINKS, LEFT, STEP] = [4, 100, 3]; // sinkTokens, the window's left side, the most rows a step has
const RING = { capacity: SINKS + LEFT + STEP, window: [LEFT, 0] as [number, number], sinkTokens: SINKS };

/** Keys and values appended so far, per (batch, kv head) slice, and the full tensors of them. */
class History {
  #key = new Float64Array(B * Hkv * 1024 * E); // [slices, room, E]
  #value = new Float64Array(B * Hkv * 1024 * Ev);
  #room = 1024;
  length = 0;

  /** `rows` new random keys and values (`special` may change the values), as the step's tensors. */
  step(rows: number, dtype: SimdCacheDtype, special?: (value: number[]) => void): [FlatTensor, FlatTensor] {
    const [k, v] = [numbers(B * Hkv * rows * E), numbers(B * Hkv * rows * Ev)];
    special?.(v);
    if (this.length + rows > this.#room) {
      const room = 2 * (this.length + rows);
      [this.#key, this.#value] = [this.#moved(this.#key, E, room), this.#moved(this.#value, Ev, room)];
      this.#room = room;
    }
    for (let s = 0; s < B * Hkv; s++) {
      this.#key.set(k.slice(s * rows * E, (s + 1) * rows * E), (s * this.#room + this.length) * E);
      this.#value.set(v.slice(s * rows * Ev, (s + 1) * rows * Ev), (s * this.#room + this.length) * Ev);
    }
    this.length += rows;
    return [tensor([B, Hkv, rows, E], k, dtype), tensor([B, Hkv, rows, Ev], v, dtype)];
  }

  /** Every key and value so far, [B, Hkv, length, E] and [..., Ev]. */
  all(dtype: SimdCacheDtype): [FlatTensor, FlatTensor] {
    return [
      tensor([B, Hkv, this.length, E], this.#moved(this.#key, E, this.length), dtype),
      tensor([B, Hkv, this.length, Ev], this.#moved(this.#value, Ev, this.length), dtype),
    ];
  }

  /** The first `length` rows of each slice, in slices of `room` rows. */
  #moved(data: Float64Array, width: number, room: number): Float64Array<ArrayBuffer> {
    const out = new Float64Array(B * Hkv * room * width);
    const rows = Math.min(this.length, room);
    for (let s = 0; s < B * Hkv; s++) {
      out.set(data.subarray(s * this.#room * width, (s * this.#room + rows) * width), s * room * width);
    }
    return out;
  }

  /** Back to the first `length` keys (truncate's twin). */
  truncate(length: number): void {
    this.length = length;
  }
}

/** A mask that hides no key (it broadcasts over every query head, row and key). */
const EVERY_KEY: FlatMask = { dtype: "bool", shape: [1, 1], data: Uint8Array.of(1) };

/** `steps` decode steps of 1 to STEP rows after a prefill, on a ring cache and, each, the full pass
 * over every key appended so far with the same options (window and sinks given to the cache and
 * left out of attend's options half the time): the same bits. `kvSeqlen` per step and batch. */
function ringSteps(
  dtype: SimdCacheDtype,
  steps: number,
  kvSeqlen: (length: number, step: number) => number[],
  special: (step: number) => ((value: number[]) => void) | undefined = () => undefined,
): SimdKeyValueCache {
  const cache = createSimdKeyValueCache([B, Hkv, E], Ev, dtype, RING);
  const history = new History();
  for (let n = 0; n <= steps; n++) {
    const rows = n === 0 ? 60 : 1 + (n % STEP);
    const start = history.length;
    cache.append(...history.step(rows, dtype, special(n)));
    const query = tensor([B, Hq, rows, E], numbers(B * Hq * rows * E), dtype);
    const options = {
      isCausal: true,
      queryOffset: start,
      enableGqa: true,
      kvSeqlen: kvSeqlen(history.length, n),
      workers: n % 97 === 0 ? 2 : 1,
    };
    const full = { ...options, window: RING.window, sinkTokens: SINKS };
    const expected = scaledDotProductAttentionFlat(query, ...history.all(dtype), full);
    const answer = cache.attend(query, n % 2 === 0 ? options : full);
    assertSameBits(answer, expected, `${dtype}, step ${n}`);
    if (rows === 1) {
      // A one-row step folds each group's query heads into the rows of one block, in the cache and
      // in the full pass alike; a mask (all true, over every key) keeps the full pass unfolded, each
      // head its own slice, and changes no logit: the fold across the wrap is still those bits.
      const unfolded = scaledDotProductAttentionFlat(query, ...history.all(dtype), {
        ...full,
        attnMask: EVERY_KEY,
      });
      assertSameBits(answer, unfolded, `${dtype}, step ${n}, unfolded`);
    }
  }
  assert.equal(cache.length, history.length);
  return cache;
}

describe("a bounded cache: window and sinks, a ring across its wrap, the full pass's answers bit for bit", () => {
  for (const dtype of DTYPES) {
    test(`${dtype}: 2,000 decode steps past a prefill, grouped-query heads, kvSeqlen per batch`, () => {
      // Batch 0 sees every key; batch 1 all but its newest now and then, and, for a stretch,
      // only its first three keys (its rows see sinks alone).
      const lengths = (length: number, step: number) => [
        length,
        step > 900 && step < 950 ? 3 : step % 5 === 0 ? length - 1 : length,
      ];
      const cache = ringSteps(dtype, 2000, lengths);
      assert.equal(cache.memoryBytes, cache.memoryBytes); // read once more below, after the wrap
      const held = cache.memoryBytes;
      ringSteps(dtype, 10, lengths).close();
      assert.ok(held < 2 * tileBytes(SINKS + 2 * (LEFT + STEP)) + 4 * 2 ** 20 + 2 * PAGE, `${held} bytes`);
      cache.close();
    });
  }

  test("NaN and ±Infinity in values dropped from the ring still reach every row, as in the full pass", () => {
    const at = (step: number) =>
      step === 30 || step === 400
        ? (v: number[]) => {
            v[2] = step === 30 ? Number.NaN : Number.POSITIVE_INFINITY; // slice 0, its first new row, column 2
          }
        : undefined;
    ringSteps("float64", 600, (length) => [length, length], at).close();
  });

  test("truncate goes back over the keys it holds, and on again: the full pass on what is left", () => {
    const cache = createSimdKeyValueCache([B, Hkv, E], Ev, "float32", RING);
    const history = new History();
    for (let n = 0; n < 300; n++) {
      cache.append(...history.step(3, "float32"));
    }
    cache.truncate(history.length - 2);
    history.truncate(history.length - 2);
    cache.append(...history.step(1, "float32"));
    const query = tensor([B, Hq, 1, E], numbers(B * Hq * E), "float32");
    const options = { isCausal: true, queryOffset: history.length - 1, enableGqa: true };
    const full = { ...options, window: RING.window, sinkTokens: SINKS };
    assertSameBits(
      cache.attend(query, options),
      scaledDotProductAttentionFlat(query, ...history.all("float32"), full),
      "truncated",
    );
    expectError(
      () => cache.truncate(50),
      "value",
      `truncate's length must be at least ${900 - (LEFT + STEP)} or at most 4: this cache dropped keys 4 to ${899 - (LEFT + STEP)}, got 50`,
    );
    cache.close();
  });

  test("what a ring cannot answer: kind value or size, naming the keys it holds", () => {
    expectError(
      () => createSimdKeyValueCache([B, Hkv, E], Ev, "float32", { ...RING, capacity: SINKS + LEFT }),
      "value",
      "a cache's capacity must hold sinkTokens + the window's left side + the rows of a step, at least 105 (4 + 100 + 1), got 104",
    );
    expectError(
      () =>
        createSimdKeyValueCache([B, Hkv, E], Ev, "float32", { ...RING, window: [-1, 0] as [number, number] }),
      "value",
      /^a cache's window must be \[left, right\], each an integer >= 0 or null, got /,
    );
    expectError(
      () => createSimdKeyValueCache([B, Hkv, E], Ev, "float32", { ...RING, sinkTokens: 1.5 }),
      "value",
      /^a cache's sinkTokens must be an integer >= 0, got /,
    );
    const cache = createSimdKeyValueCache([B, Hkv, E], Ev, "float32", RING);
    const history = new History();
    expectError(
      () => cache.append(...history.step(104, "float32")),
      "size",
      "appending 104 keys at once to a cache whose ring holds 103 (its capacity 107 less 4 sinks): append them in steps of at most 103 (key [2, 2, 104, 16])",
    );
    for (let n = 0; n < 100; n++) {
      cache.append(...new History().step(2, "float32"));
    }
    const query = tensor([B, Hq, 1, E], numbers(B * Hq * E), "float32");
    expectError(
      () => cache.attend(query, { enableGqa: true, isCausal: true, queryOffset: 150 }),
      "value",
      "query row 0 of batch index 0 sees keys 50..150, but this cache holds only keys 0..3 and 97..199 (capacity 107): give the cache a larger capacity, or attend fewer rows at a time",
    );
    expectError(
      () => cache.attend(query, { enableGqa: true, window: null }),
      "value",
      /^query row 0 of batch index 0 sees keys 4\.\.199, but this cache holds only keys 0\.\.3 and 97\.\.199/,
    );
    const mask: FlatMask = { dtype: "bool", shape: [1, 200], data: new Uint8Array(200).fill(1) };
    expectError(
      () => cache.attend(query, { enableGqa: true, isCausal: true, queryOffset: 199, attnMask: mask }),
      "value",
      "attnMask [1, 200] has a column per key, but this cache dropped keys 4 to 96: a mask needs the cache unwrapped (or broadcast over the keys)",
    );
    cache.close();
  });
});

describe("the window, sinks and ragged fixtures through a cache, and through a ring, against the oracle", () => {
  const seen = new Set<string>();
  const cases = loadCases({ tags: ["window", "sinks", "ragged"] }).filter(
    (c) => c.rule !== null && !c.tags.includes("layer") && !seen.has(c.id) && seen.add(c.id),
  );
  assert.ok(cases.length >= 25, `${cases.length} cases`);
  let wrapped = 0;
  for (const c of cases) {
    test(c.id, () => {
      const rule = c.rule!;
      const { query, key, value } = rule;
      const [Lk, E, Ev] = [key.shape.at(-2)!, key.shape.at(-1)!, value.shape.at(-1)!];
      const heads = key.shape.slice(0, -2);
      const options = caseOptions(c);
      // A ring where the case's window has a left side: sinks + left + the keys from the first
      // row's position on, so that no row sees a key it drops; its keys appended one at a time.
      const left = options.window?.[0] ?? null;
      const sinkTokens = options.sinkTokens ?? 0;
      const offsets = integers(options.queryOffset ?? 0);
      const ring = left === null ? null : sinkTokens + left + Math.max(1, Lk - Math.min(...offsets));
      for (const dtype of DTYPES) {
        const q = tensor(query.shape.slice(), Array.from(query.data), dtype);
        const flat = scaledDotProductAttentionFlat(
          q,
          tensor(key.shape.slice(), Array.from(key.data), dtype),
          tensor(value.shape.slice(), Array.from(value.data), dtype),
          options,
        );
        const bounded = ring === null ? [{}] : [{}, { capacity: ring, window: options.window, sinkTokens }];
        for (const cacheOptions of bounded) {
          const cache = createSimdKeyValueCache([...heads, E], Ev, dtype, cacheOptions);
          const step = "capacity" in cacheOptions ? 1 : Math.ceil(Lk / 2);
          for (let from = 0; from < Lk; from += step) {
            const to = Math.min(Lk, from + step);
            const part = (t: { shape: readonly number[]; data: ArrayLike<number> }) =>
              tensor(
                [...heads, to - from, t.shape.at(-1)!],
                rowsOf(Array.from(t.data), product(heads), Lk, t.shape.at(-1)!, from, to),
                dtype,
              );
            cache.append(part(key), part(value));
          }
          const got = cache.attend(q, options);
          if (outsideContract(rule.expected, dtype) === null) {
            const check = checkOutput(got, rule, dtype);
            assert.ok(check.passed, `${dtype}: ${check.problem ?? `${check.budgetUsed} of the budget`}`);
          }
          assertSameBits(got, flat, `${dtype}, ${JSON.stringify(cacheOptions)}`);
          wrapped += "capacity" in cacheOptions && Lk > ring! ? 1 : 0;
          cache.close();
        }
      }
    });
  }
  test("some of those rings dropped keys before they answered", () => {
    assert.ok(wrapped >= 4, `${wrapped} rings wrapped`);
  });
});

// ---- Memory: what a cache reserves, how it grows, what close() frees, and what happens when the
// engine has no more to give. ----

const PAGE = 65536;
const SLICES = B * Hkv;
/** The bytes of `keys` keys' tiles in the cache's layout: whole tiles of 64 keys, each with its
 * keys and values for every slice (float32). */
const tileBytes = (keys: number) => Math.ceil(keys / 64) * 64 * SLICES * (E + Ev) * 4;

describe("memory: a capacity sizes it once, without one it doubles, close() lets it go", () => {
  test("a capacity of 1,000 keys: its memory holds their tiles from the start, and a call's regions beside", () => {
    const fresh = createSimdKeyValueCache([B, Hkv, E], Ev, "float32", { capacity: 1000 });
    const made = fresh.memoryBytes;
    assert.ok(made >= tileBytes(1000) && made < tileBytes(1000) + 2 * PAGE, `${made} bytes at creation`);
    fresh.close();
    const cache = generate(
      "float32",
      [100, 1, 63, 300, 7, 529],
      (start) => ({ isCausal: true, queryOffset: start, enableGqa: true }),
      { capacity: 1000 },
      (c) => assert.ok(c.memoryBytes < made + 4 * 2 ** 20, `${c.memoryBytes} bytes`), // the 4 MiB it reserves for calls
    );
    assert.deepEqual([cache.capacity, cache.length], [1000, 1000]);
    const held = cache.memoryBytes;
    for (let n = 0; n < 10; n++) {
      cache.attend(tensor([B, Hq, 1, E], numbers(B * Hq * E), "float32"), { enableGqa: true });
    }
    assert.equal(cache.memoryBytes, held, "decode steps on a full cache take no more memory");
    const step = tensor([B, Hkv, 1, E], numbers(SLICES * E), "float32");
    expectError(
      () => cache.append(step, tensor([B, Hkv, 1, Ev], numbers(SLICES * Ev), "float32")),
      "size",
      "appending 1 keys to the cache's 1000 would hold 1001, more than its capacity 1000 (key [2, 2, 1, 16])",
    );
    assert.equal(cache.length, 1000, "a refused append leaves the cache as it was");
    cache.close();
  });

  test("without a capacity: it grows (moving to larger memories), never past twice what its keys and a call need", () => {
    const sizes = new Set<number>();
    const cache = generate(
      "float64",
      Array.from({ length: 48 }, () => 50),
      () => ({ enableGqa: true }),
      {},
      (c) => {
        sizes.add(c.memoryBytes);
        const needed = 2 * tileBytes(c.length) + 4 * PAGE; // float64 tiles, and a call's regions
        assert.ok(c.memoryBytes <= 2 * needed, `${c.memoryBytes} bytes for ${c.length} keys`);
      },
    );
    assert.equal(cache.capacity, null);
    assert.ok(sizes.size >= 4, `it grew only to ${[...sizes].join(", ")}`);
    cache.close();
  });

  test("close() lets its memory go: the cache refuses every use after, and the port goes on", () => {
    const cache = generate("float32", [70, 1], () => ({ enableGqa: true }), { capacity: 80 });
    const query = tensor([B, Hq, 1, E], numbers(B * Hq * E), "float32");
    cache.attend(query, { enableGqa: true, workers: 2 }); // with worker threads, which close() ends
    cache.close();
    cache.close(); // a second time does nothing
    assert.equal(cache.memoryBytes, 0);
    const closed = "this resident cache was closed: close() let its memory go; create another cache to go on";
    expectError(() => cache.attend(query, { enableGqa: true }), "value", closed);
    expectError(() => cache.truncate(0), "value", closed);
    const rows = (n: number, width: number) =>
      tensor([B, Hkv, n, width], numbers(SLICES * n * width), "float32");
    expectError(() => cache.append(rows(1, E), rows(1, Ev)), "value", closed);
    const flat = scaledDotProductAttentionFlat(query, rows(3, E), rows(3, Ev), { enableGqa: true });
    assert.deepEqual(flat.shape, [B, Hq, 1, Ev]);
  });

  test("a bad capacity: kind value", () => {
    for (const capacity of [0, -1, 1.5, Number.NaN, "8"]) {
      expectError(
        () =>
          createSimdKeyValueCache([B, Hkv, E], Ev, "float32", { capacity } as unknown as SimdCacheOptions),
        "value",
        /^a cache's capacity must be an integer >= 1 \(keys per kv head\), got /,
      );
    }
  });

  test("keys past the 4 GiB a WebAssembly memory holds: kind size, before any memory is taken", () => {
    expectError(
      () => createSimdKeyValueCache([8, 128], 128, "float64", { capacity: 1 << 20 }),
      "size",
      /^the resident cache needs \d+ bytes of WebAssembly memory, more than the 4294967296 bytes a WebAssembly memory can hold$/,
    );
  });
});

/** simd-cache-pressure.ts run under `ulimit -v` (KiB): what it reports. */
function underLimit(kib: number, scenario: string): Record<string, unknown> {
  const child = new URL("./simd-cache-pressure.ts", import.meta.url).pathname;
  const run = spawnSync(
    "bash",
    [
      "-c",
      'ulimit -v "$1" && exec "$2" "$3" "$4" "$1"',
      "bash",
      String(kib),
      process.execPath,
      child,
      scenario,
    ],
    { encoding: "utf8", timeout: 120_000 },
  );
  assert.equal(run.status, 0, `the child failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as Record<string, unknown>;
}

// V8 on 64-bit Linux guards each WebAssembly memory with 8 GiB of address space; Node turns the
// guards off where the limit leaves room for fewer than two such reservations, and each memory
// then reserves its maximum. The two tests put a child process on each side of that line.
const LIMITS =
  process.platform === "linux" && process.arch === "x64" ? false : "needs ulimit -v on 64-bit Linux";

describe("memory under a limit on address space (ulimit -v, a child process)", { skip: LIMITS }, () => {
  const refusedWith = (refusal: unknown, message: RegExp) => {
    const { name, kind, message: text } = refusal as { name: string; kind: string; message: string };
    assert.deepEqual([name, kind], ["AttentionInputError", "size"], text);
    assert.match(text, message);
  };

  test("64 GiB (8 GiB per memory): more caches made and closed than fit, refusals with the figures, the port unharmed", () => {
    const report = underLimit(64 * 1024 * 1024, "guarded");
    assert.equal(report.madeAndClosed, 24);
    const open = report.openAtOnce as number;
    assert.ok(open >= 1 && open < 8, `${open} caches open at once`);
    const spent = "but the engine could allocate no WebAssembly memory at all now: this process's memory or";
    refusedWith(
      report.refusal,
      new RegExp(`^the resident cache needs a WebAssembly memory of \\d+ bytes, ${spent}`),
    );
    // A cache without a capacity that must move to grow, when no memory is left: refused, and as it was.
    refusedWith(
      report.growth,
      /^the resident cache needs a WebAssembly memory of \d+ bytes \(it holds \d+ now\), but/,
    );
    const [holds, after, length] = report.growingHolds as number[];
    assert.deepEqual([after, length], [holds, 5], "the refused cache holds what it held");
    assert.equal(report.growingSame, true, "the refused cache's answer changed");
    assert.deepEqual(
      [report.portWhileFull, report.afterClosing, report.portAfter],
      [true, true, true],
      "the port's call (the same bits as before) and a new cache once the others were closed",
    );
  });

  test("8 GiB (each memory reserves its maximum): a cache past 1 GiB, a second refused, the port unharmed", () => {
    const report = underLimit(8 * 1024 * 1024, "unguarded");
    const first = report.firstBytes as number;
    assert.ok(first > 2 ** 30, `the first cache holds ${first} bytes`);
    assert.equal(report.second, 0);
    const figures =
      /^the resident cache needs a WebAssembly memory of (\d+) bytes, but the largest the engine could allocate now is (\d+) bytes/;
    refusedWith(report.refusal, figures);
    const [, wanted, had] = figures.exec((report.refusal as { message: string }).message)!.map(Number);
    assert.equal(wanted, first);
    assert.ok(had > 0 && had < wanted, `${had} of ${wanted}`);
    assert.deepEqual([report.portWhileFull, report.afterClosing, report.portAfter], [true, first, true]);
  });
});
