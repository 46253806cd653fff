import assert from "node:assert/strict";
import { test } from "node:test";
import { declaredParameterCount, takesPast, thrownOnPurpose, unchanged } from "../learner/worker.ts";
import { scaledDotProductAttention } from "../src/attention.ts";
import { multiHeadAttention } from "../src/layer.ts";

// `attention-port check` gives a learner's function its options only when it declares a 4th
// parameter. function.length stops at the first parameter with a default, so the source counts too.

test("a parameter with a default value is counted (function.length is not enough)", () => {
  function withDefault(_q: unknown, _k: unknown, _v: unknown, _options = {}) {}
  assert.equal(withDefault.length, 3);
  assert.equal(declaredParameterCount(withDefault), 4);
});

test("three parameters mean no options", () => {
  assert.equal(
    declaredParameterCount((_q: unknown, _k: unknown, _v: unknown) => 0),
    3,
  );
  assert.equal(
    declaredParameterCount(function attention(_q: unknown, _k: unknown, _v: unknown) {}),
    3,
  );
});

test("destructured options, defaults holding commas and brackets, and a rest parameter", () => {
  function destructured(_q: unknown, _k: unknown, _v: unknown, { isCausal = false, scale = [1, 2] } = {}) {
    return [isCausal, scale];
  }
  assert.equal(declaredParameterCount(destructured), 4);
  function quoted(_q: unknown, _k = "a, b)", _v = ")") {}
  assert.equal(declaredParameterCount(quoted), 3);
  assert.equal(
    declaredParameterCount((..._args: unknown[]) => 0),
    Number.POSITIVE_INFINITY,
  );
  assert.equal(
    declaredParameterCount((_q: unknown) => 0),
    1,
  );
});

test("commas and brackets inside comments in the parameter list are not parameters", () => {
  function blockComment(_q: unknown, _k: unknown, _v: unknown /*, options (a later version) */) {}
  assert.equal(declaredParameterCount(blockComment), 3);
  function lineComments(
    _q: unknown, // [Lq, E], (rows)
    _k: unknown, // [Lk, E]
    _v: unknown, // [Lk, Ev], no options yet
  ) {}
  assert.equal(declaredParameterCount(lineComments), 3);
  function commentedOptions(_q: unknown, _k: unknown, _v: unknown, /* { isCausal } */ _options = {}) {}
  assert.equal(declaredParameterCount(commentedOptions), 4);
});

// On the invalid-input level, an error the learner's code throws itself is a refusal; one the engine
// raises inside its math (query.map is not a function) is a crash, and check says which.

function caught(f: () => unknown): unknown {
  try {
    f();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

class ShapeError extends Error {}

function shapeError(message: string): Error {
  return new RangeError(message);
}

test("an error made by the learner's code is thrown on purpose, whatever its class", () => {
  const refusals = [
    caught(() => {
      throw new Error("query must be rank 2");
    }),
    caught(() => {
      throw new TypeError("query must be an array");
    }),
    caught(() => {
      throw Error("without new");
    }),
    caught(() => {
      throw shapeError("made in a helper");
    }),
    caught(() => {
      throw new ShapeError("a class of its own");
    }),
    caught(() => {
      throw "a string";
    }),
    caught(() => scaledDotProductAttention([[1, 2]], [[1, "x" as unknown as number]], [[1]])),
  ];
  for (const error of refusals) {
    assert.equal(thrownOnPurpose(error).deliberate, true, String(error));
  }
  assert.match(thrownOnPurpose(refusals[0]).where ?? "", /^line \d+ of check\.test\.ts$/);
});

test("an error the engine raises in the learner's math is a crash", () => {
  const query: unknown = 3;
  const crashes = [
    caught(() => (query as number[]).map((x) => x)),
    caught(() => (query as number[][])[1]![0]),
    caught(() => ([] as number[]).reduce((a, b) => a + b)),
    caught(() => new Array(-1)),
    caught(() => {
      const deep = (n: number): number => deep(n + 1) + 1;
      return deep(0);
    }),
  ];
  for (const error of crashes) {
    assert.equal(thrownOnPurpose(error).deliberate, false, String(error));
    assert.match(thrownOnPurpose(error).where ?? "", /^line \d+ of check\.test\.ts$/);
  }
});

// check keeps a copy of every argument before the call and compares it after: a function that
// writes into the caller's arrays is told so, though its answer may be right.

test("an argument written into is changed; one left alone is not, NaN and -0 included", () => {
  const query = [
    [1, Number.NaN],
    [-0, 3],
  ];
  const copy = structuredClone(query);
  assert.equal(unchanged(copy, query), true);
  query[1]![1] = 3; // the same number written back: still as it was
  assert.equal(unchanged(copy, query), true);
  query[0]![0] = 0.5;
  assert.equal(unchanged(copy, query), false);
  assert.equal(unchanged([[0]], [[-0]]), false); // the sign of a zero is a change
  assert.equal(unchanged([[1, 2]], [[1, 2, 3]]), false); // a row grown by push
  const shaped = { shape: [2, 0, 8], data: [] as number[] };
  assert.equal(unchanged(structuredClone(shaped), shaped), true);
  shaped.data.push(1);
  assert.equal(unchanged({ shape: [2, 0, 8], data: [] }, shaped), false);
  assert.equal(unchanged([true, false], [true, true]), false); // a boolean mask flipped
});

// A learner's layer takes its KV cache in its options object, which has no names to read: check asks
// it once, with a past and returnCache, and offers the cache's level only when presentKey comes back.

test("a layer that keeps a cache is told from one that does not, or that throws", async () => {
  assert.equal(await takesPast(multiHeadAttention as (...args: unknown[]) => unknown), true);
  const keeps = (_x: unknown, _kv: unknown, _p: unknown, o: { returnCache?: boolean }) =>
    o.returnCache ? { output: [[0, 0]], presentKey: [], presentValue: [] } : [[0, 0]];
  assert.equal(await takesPast(keeps as (...args: unknown[]) => unknown), true);
  assert.equal(
    await takesPast(async (...args: unknown[]) => keeps(...(args as Parameters<typeof keeps>))),
    true,
  );
  assert.equal(await takesPast(() => [[0, 0]]), false); // the output alone: pastKey unread
  assert.equal(await takesPast(() => ({ output: [[0, 0]], weights: [] })), false);
  assert.equal(
    await takesPast(() => {
      throw new Error("unknown option pastKey");
    }),
    false,
  );
  assert.equal(await takesPast(async () => Promise.reject(new Error("no cache"))), false);
});
