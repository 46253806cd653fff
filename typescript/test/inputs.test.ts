import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";

import {
  AttentionInputError,
  type AttentionOptions,
  attentionSteps,
  scaledDotProductAttention,
} from "../src/attention.ts";
import {
  scaledDotProductAttentionFlat as flashFlat,
  scaledDotProductAttention as flashSdpa,
  attentionSteps as flashSteps,
  KEY_TILE,
  QUERY_BLOCK,
} from "../src/flash.ts";
import {
  DEFAULT_MEMORY_LIMIT,
  describeValue,
  ERROR_KINDS,
  type ErrorKind,
  formatShape,
  inferShape,
} from "../src/inputs.ts";
import { checkHeads, checkReturnCache, checkRope } from "../src/layer-inputs.ts";
import {
  scaledDotProductAttentionFlat as simdFlat,
  scaledDotProductAttention as simdSdpa,
} from "../src/simd-node.ts";
import { expectError } from "./helpers.ts";

/** A tensor of the given shape (nested arrays; every dim > 0), filled with small numbers. */
function tensor(...shape: number[]): unknown {
  if (shape.length === 1) {
    return Array.from({ length: shape[0] }, (_, i) => (i % 3) - 1);
  }
  return Array.from({ length: shape[0] }, () => tensor(...shape.slice(1)));
}

/** scaledDotProductAttention on untyped input, as a JavaScript caller (or a fixture) may give it. */
function call(query: unknown, key: unknown, value: unknown, options: Record<string, unknown> = {}): unknown {
  const sdpa = scaledDotProductAttention as (
    q: unknown,
    k: unknown,
    v: unknown,
    o: AttentionOptions,
  ) => unknown;
  return sdpa(query, key, value, options as AttentionOptions);
}

describe("AttentionInputError", () => {
  test("is an Error with a kind from the shared list", () => {
    const error = new AttentionInputError("rank", "r");
    assert.ok(error instanceof Error);
    assert.equal(error.name, "AttentionInputError");
    assert.deepEqual([...ERROR_KINDS], ["ragged", "type", "rank", "shape", "heads", "mask", "value", "size"]);
    assert.throws(() => new AttentionInputError("nope" as ErrorKind, "m"), /unknown error kind "nope"/);
  });

  test("formatShape and describeValue write what Python writes", () => {
    assert.equal(formatShape([2, 4, 8]), "[2, 4, 8]");
    assert.equal(formatShape([]), "[]");
    const described = [NaN, Infinity, -Infinity, -1, 0.1, 1e21, 1e-7, -0, null, undefined, true, "x", {}];
    assert.deepEqual(described.map(describeValue), [
      "NaN",
      "Infinity",
      "-Infinity",
      "-1",
      "0.1",
      "1e+21",
      "1e-7",
      "0",
      "null",
      "null",
      "a boolean",
      "a string",
      "an object",
    ]);
  });

  test("inferShape reads the first elements, then checks every element", () => {
    assert.deepEqual(
      inferShape("query", [
        [1, 2],
        [3, 4],
        [5, 6],
      ]),
      [3, 2],
    );
    assert.deepEqual(inferShape("query", [[], []]), [2, 0]);
    assert.deepEqual(inferShape("query", 3), []);
    expectError(
      () => inferShape("query", [[], [1]]),
      "ragged",
      "query is ragged: query[1] has length 1, expected 0 (shape from the first elements: [2, 0])",
    );
  });
});

describe("each error kind, with the message Python writes (argument names in TypeScript spelling)", () => {
  const q = tensor(2, 4);
  const k = tensor(3, 4);
  const v = tensor(3, 4);

  test("value: options are checked first, in the order isCausal, enableGqa, scale, softcap", () => {
    expectError(
      () => call(q, k, v, { isCausal: "yes" }),
      "value",
      "isCausal must be a boolean, got a string",
    );
    expectError(() => call(q, k, v, { isCausal: null }), "value", "isCausal must be a boolean, got null");
    expectError(() => call(q, k, v, { enableGqa: 1 }), "value", "enableGqa must be a boolean, got 1");
    expectError(() => call(q, k, v, { scale: NaN }), "value", "scale must be a finite number, got NaN");
    expectError(
      () => call(q, k, v, { scale: Infinity }),
      "value",
      "scale must be a finite number, got Infinity",
    );
    expectError(() => call(q, k, v, { scale: "1" }), "value", "scale must be a finite number, got a string");
    expectError(
      () => call(q, k, v, { softcap: -1 }),
      "value",
      "softcap must be a finite number >= 0, got -1",
    );
    expectError(
      () => call(q, k, v, { softcap: null }),
      "value",
      "softcap must be a finite number >= 0, got null",
    );
    // Options before tensors, and isCausal before softcap.
    expectError(
      () => call([[1], [2, 3]], k, v, { isCausal: 0, softcap: -1 }),
      "value",
      "isCausal must be a boolean, got 0",
    );
  });

  test("ragged: the first element (depth first) that disagrees with the first elements", () => {
    expectError(
      () =>
        call(
          [
            [1, 2, 3],
            [4, 5],
          ],
          tensor(4, 3),
          tensor(4, 3),
        ),
      "ragged",
      "query is ragged: query[1] has length 2, expected 3 (shape from the first elements: [2, 3])",
    );
    expectError(
      () =>
        call(
          tensor(2, 2),
          [
            [1, 2],
            [3, [4]],
          ],
          tensor(2, 2),
        ),
      "ragged",
      "key is ragged: key[1][1] is an array, expected a scalar (shape from the first elements: [2, 2])",
    );
    expectError(
      () => call(tensor(2, 2), tensor(3, 2), [[1, 2], 3, [4, 5]]),
      "ragged",
      "value is ragged: value[1] is not an array, expected length 2 (shape from the first elements: [3, 2])",
    );
    expectError(
      () =>
        call(tensor(2, 4), k, v, {
          attnMask: [
            [true, false, true],
            [true, true],
          ],
        }),
      "ragged",
      "attnMask is ragged: attnMask[1] has length 2, expected 3 (shape from the first elements: [2, 3])",
    );
  });

  test("every row is checked, not only the first one the shape is read from", () => {
    const rows = () => tensor(9, 3) as unknown[][];
    for (let p = 0; p < 9; p++) {
      const leaf = rows();
      leaf[p][1] = "x";
      expectError(
        () => call(leaf, tensor(4, 3), tensor(4, 3)),
        "type",
        `query[${p}][1] is a string, expected a number`,
      );
      const short = rows();
      short[p] = [1, 2];
      const shape = p === 0 ? "[9, 2]" : "[9, 3]"; // row 0 is where the shape is read from
      expectError(
        () => call(tensor(4, p === 0 ? 2 : 3), short, tensor(9, 3)),
        "ragged",
        p === 0
          ? `key is ragged: key[1] has length 3, expected 2 (shape from the first elements: ${shape})`
          : `key is ragged: key[${p}] has length 2, expected 3 (shape from the first elements: ${shape})`,
      );
      const mask = Array.from({ length: 9 }, () => [true, true, true, true]) as unknown[][];
      mask[p][3] = 1;
      expectError(
        () => call(tensor(9, 3), tensor(4, 3), tensor(4, 3), { attnMask: mask }),
        "type",
        `attnMask mixes booleans and numbers: attnMask[0][0] is a boolean but attnMask[${p}][3] is a number`,
      );
    }
  });

  test("type: a leaf that is not a number (or, in a mask, not a boolean or a number)", () => {
    expectError(
      () =>
        call(
          [
            [1, "two"],
            [3, 4],
          ],
          tensor(3, 2),
          tensor(3, 2),
        ),
      "type",
      "query[0][1] is a string, expected a number",
    );
    expectError(
      () =>
        call(tensor(2, 2), tensor(2, 2), [
          [1, 2],
          [null, 4],
        ]),
      "type",
      "value[1][0] is null, expected a number",
    );
    expectError(
      () =>
        call(
          tensor(2, 2),
          [
            [true, 1],
            [0, 1],
          ],
          tensor(2, 2),
        ),
      "type",
      "key[0][0] is a boolean, expected a number",
    );
    expectError(
      () => call([[1, {}]], tensor(1, 2), tensor(1, 2)),
      "type",
      "query[0][1] is an object, expected a number",
    );
    expectError(
      () =>
        call(q, k, v, {
          attnMask: [
            [true, 0, true],
            [true, true, false],
          ],
        }),
      "type",
      "attnMask mixes booleans and numbers: attnMask[0][0] is a boolean but attnMask[0][1] is a number",
    );
    expectError(
      () =>
        call(q, k, v, {
          attnMask: [
            ["yes", true, true],
            [true, true, false],
          ],
        }),
      "type",
      "attnMask[0][0] is a string, expected a boolean or a number",
    );
    // query is checked whole (ragged, then type) before key is looked at.
    expectError(
      () => call([[1, "x"]], [[1], [2, 3]], v),
      "type",
      "query[0][1] is a string, expected a number",
    );
  });

  test("rank", () => {
    expectError(
      () => call([1, 2, 3], tensor(4, 3), tensor(4, 3)),
      "rank",
      "query must have at least 2 dimensions ([L, E]), got shape [3]",
    );
    expectError(
      () => call(tensor(2, 3, 4), tensor(3, 4), tensor(3, 4)),
      "rank",
      "query, key and value must have the same rank, got query [2, 3, 4], key [3, 4], value [3, 4]",
    );
  });

  test("shape", () => {
    expectError(
      () => call(tensor(2, 4, 8), tensor(2, 5, 6), tensor(2, 5, 6)),
      "shape",
      "key has feature size 6 but query has 8 (query [2, 4, 8], key [2, 5, 6])",
    );
    expectError(
      () => call(tensor(3, 4), tensor(5, 4), tensor(4, 4)),
      "shape",
      "value has length 4 but key has 5 (key [5, 4], value [4, 4])",
    );
    expectError(
      () => call(tensor(2, 2, 3, 4), tensor(3, 2, 5, 4), tensor(3, 2, 5, 4)),
      "shape",
      "key has batch dims [3] but query has [2] (query [2, 2, 3, 4], key [3, 2, 5, 4])",
    );
    expectError(
      () => call(tensor(2, 2, 3, 4), tensor(2, 2, 5, 4), tensor(1, 2, 5, 4)),
      "shape",
      "value has batch dims [1] but query has [2] (query [2, 2, 3, 4], value [1, 2, 5, 4])",
    );
    expectError(
      () => call([[], [], []], [[], [], []], [[1], [2], [3]]),
      "shape",
      "query has feature size 0; attention needs at least one feature (query [3, 0])",
    );
  });

  test("heads", () => {
    expectError(
      () => call(tensor(4, 3, 8), tensor(2, 5, 8), tensor(2, 5, 8)),
      "heads",
      "query has head count 4 but key and value have 2; set enableGqa to share key/value heads across" +
        " query heads (query [4, 3, 8], key [2, 5, 8])",
    );
    expectError(
      () => call(tensor(3, 2, 4), tensor(2, 5, 4), tensor(2, 5, 4), { enableGqa: true }),
      "heads",
      "with enableGqa, query heads (3) must be a multiple of key/value heads (2) (query [3, 2, 4], key [2, 5, 4])",
    );
    expectError(
      () => call(tensor(2, 3, 4), tensor(2, 5, 4), tensor(1, 5, 4)),
      "heads",
      "value has head count 1 but key has 2 (key [2, 5, 4], value [1, 5, 4])",
    );
  });

  test("mask: it must broadcast to the scores", () => {
    expectError(
      () => call(tensor(2, 3, 4), tensor(2, 5, 4), tensor(2, 5, 4), { attnMask: tensor(3, 4) }),
      "mask",
      "attnMask [3, 4] does not broadcast to the scores [2, 3, 5]: mask dimension 1 is 4, expected 1 or 5",
    );
    expectError(
      () => call(tensor(3, 4), tensor(5, 4), tensor(5, 4), { attnMask: tensor(1, 1, 3, 5) }),
      "mask",
      "attnMask has rank 4 but the scores [3, 5] have rank 2 (attnMask [1, 1, 3, 5])",
    );
    expectError(
      () => call(tensor(3, 4), tensor(5, 4), tensor(5, 4), { attnMask: true }),
      "mask",
      "attnMask must have at least 1 dimension, got shape []",
    );
  });
});

describe("the shaped form { shape, data }", () => {
  test("its data must fill its shape, with numbers", () => {
    expectError(
      () => call({ shape: [2, 3], data: [1, 2, 3, 4, 5] }, tensor(3, 3), tensor(3, 3)),
      "shape",
      "query has 5 values but its shape [2, 3] needs 6",
    );
    expectError(
      () => call({ shape: [2, -3], data: [] }, tensor(3, 3), tensor(3, 3)),
      "shape",
      "query.shape must be an array of non-negative integers, got [2, -3]",
    );
    expectError(
      () => call({ shape: 6, data: [] }, tensor(3, 3), tensor(3, 3)),
      "shape",
      "query.shape must be an array of non-negative integers, got 6",
    );
    expectError(
      () => call(tensor(2, 3), { shape: [3, 3], data: "abc" }, tensor(3, 3)),
      "type",
      "key.data must be an array of numbers, got a string",
    );
    expectError(
      () => call(tensor(2, 2), tensor(2, 2), { shape: [2, 2], data: [1, 2, 3, "4"] }),
      "type",
      "value[1][1] is a string, expected a number",
    );
  });

  test("a shaped mask follows the nested mask's rules", () => {
    const [q, k, v] = [tensor(2, 3), tensor(3, 3), tensor(3, 3)];
    expectError(
      () => call(q, k, v, { attnMask: { shape: [2, 3], data: [true, true, 1, true, true, true] } }),
      "type",
      "attnMask mixes booleans and numbers: attnMask[0][0] is a boolean but attnMask[0][2] is a number",
    );
    expectError(
      () => call(q, k, v, { attnMask: { shape: [3], data: [true, null, true] } }),
      "type",
      "attnMask[1] is null, expected a boolean or a number",
    );
    expectError(
      () => call(q, k, v, { attnMask: { shape: [2, 2], data: [true, true, true, true] } }),
      "mask",
      "attnMask [2, 2] does not broadcast to the scores [2, 3]: mask dimension 1 is 2, expected 1 or 3",
    );
    expectError(
      () => call(q, k, v, { attnMask: { shape: [2, 3], data: [true] } }),
      "shape",
      "attnMask has 1 values but its shape [2, 3] needs 6",
    );
  });
});

interface DeclaredOption {
  readonly python: string;
  readonly javascript: string;
  readonly error: { readonly kind: string; readonly message: string };
}
const DECLARED = JSON.parse(
  readFileSync(new URL("../../contract/options.json", import.meta.url), "utf8"),
) as { readonly core: readonly DeclaredOption[]; readonly checkOrder: { readonly core: readonly string[] } };
/** The core's scalar options in the contract's order of checks. */
const CHECK_ORDER = DECLARED.checkOrder.core.map((name) => DECLARED.core.find((o) => o.python === name)!);

describe("the options object and the size limit, as in the Python ports", () => {
  const Q = [
    [1, 0],
    [0.5, 2],
  ];
  const K = [
    [1, -1],
    [0.25, 0.5],
    [2, 0],
  ];
  const V = [[1], [2], [3]];
  const ports = [
    ["attention.ts", scaledDotProductAttention],
    ["attention.ts attentionSteps", attentionSteps],
    ["flash.ts attentionSteps", flashSteps],
  ] as const;

  for (const [name, port] of ports) {
    const run = port as (q: unknown, k: unknown, v: unknown, o?: unknown) => unknown;
    test(`${name}: the first wrong option in the contract's order of checks is the one refused`, () => {
      // contract/options.json read here, not the generated table the checks walk: a string is no
      // value of any scalar option, so with the options from the i-th on all wrong, the i-th is named.
      CHECK_ORDER.forEach((first, i) => {
        const wrong = Object.fromEntries(CHECK_ORDER.slice(i).map((option) => [option.javascript, "yes"]));
        const message = first.error.message
          .replace("{name}", first.javascript)
          .replace("{value}", "a string");
        expectError(() => run(Q, K, V, wrong), first.error.kind as ErrorKind, message);
      });
    });
    test(`${name}: options must be an object`, () => {
      expectError(() => run(Q, K, V, null), "value", "options must be an object, got null");
      expectError(() => run(Q, K, V, "fast"), "value", "options must be an object, got a string");
      assert.ok(run(Q, K, V, undefined));
    });
    test(`${name}: memoryLimit is a number of bytes > 0, and the steps must fit in it`, () => {
      expectError(
        () => run(Q, K, V, { memoryLimit: 0 }),
        "value",
        "memoryLimit must be a number of bytes > 0, got 0",
      );
      expectError(
        () => run(Q, K, V, { memoryLimit: null }),
        "value",
        "memoryLimit must be a number of bytes > 0, got null",
      );
      expectError(
        () => run(Q, K, V, { memoryLimit: 100 }),
        "size",
        "the scores [2, 3] need 144 bytes for scores, logits and weights, more than memoryLimit = 100;" +
          " pass a larger memoryLimit to compute them",
      );
      assert.ok(run(Q, K, V, { memoryLimit: 144 })); // exactly enough
    });
  }

  test("the default limit refuses 1e5 x 1e5 scores at once, before allocating them", () => {
    assert.equal(DEFAULT_MEMORY_LIMIT, 2 ** 31);
    const big = { shape: [100000, 1], data: new Float64Array(100000) };
    expectError(
      () => call(big, big, big),
      "size",
      "the scores [100000, 100000] need 240000000000 bytes for scores, logits and weights, more than" +
        " memoryLimit = 2147483648; pass a larger memoryLimit to compute them",
    );
  });

  test("flash.ts's fast path needs only the output and one tile", () => {
    const big = { shape: [100000, 1], data: new Float64Array(100000) };
    const out = flashSdpa(
      big,
      { shape: [3, 1], data: new Float64Array(3) },
      { shape: [3, 1], data: new Float64Array(3) },
    );
    assert.equal((out as number[][]).length, 100000);
    const run = flashSdpa as (q: unknown, k: unknown, v: unknown, o?: unknown) => unknown;
    expectError(() => run(Q, K, V, null), "value", "options must be an object, got null");
    expectError(
      () => run(Q, K, V, { memoryLimit: 1000 }),
      "size",
      `the output [2, 1] and one tile need ${8 * (2 + QUERY_BLOCK * (KEY_TILE + 2 + 1))} bytes, more than` +
        " memoryLimit = 1000; pass a larger memoryLimit to compute them",
    );
    const flat = { shape: [2, 2], data: new Float64Array([1, 0, 0.5, 2]) };
    const keys = { shape: [3, 2], data: new Float64Array(K.flat()) };
    const values = { shape: [3, 1], data: new Float64Array([1, 2, 3]) };
    expectError(() => flashFlat(flat, keys, values, { memoryLimit: 8 }), "size", /need/);
  });
});

describe("a tensor too large or too deep is refused from its lengths, before its elements are read", () => {
  const ports = { attention: scaledDotProductAttention, flash: flashSdpa, simd: simdSdpa } as Record<
    string,
    (q: unknown, k: unknown, v: unknown, o?: unknown) => unknown
  >;
  const valid = [
    [1, 0],
    [0.5, 2],
  ];
  /** An array that claims `length` but holds nothing (`r = []; r.length = n`). */
  const sparse = (length: number) => Object.assign([] as unknown[], { length });

  test("a sparse array claiming 2 ** 31 values is kind size (or ragged, in a later row), at once", () => {
    for (const port of Object.values(ports)) {
      const rows = 2 ** 31;
      expectError(
        () => port(valid, [sparse(rows), [1, 2]], valid),
        "size",
        `key of shape [2, ${rows}] needs ${8 * 2 * rows} bytes as float64, more than memoryLimit = 2147483648;` +
          " pass a larger memoryLimit to read it",
      );
      expectError(
        () => port(valid, [[1, 2], sparse(rows)], valid),
        "ragged",
        `key is ragged: key[1] has length ${rows}, expected 2 (shape from the first elements: [2, 2])`,
      );
      expectError(
        () => port({ shape: [1, rows], data: sparse(rows) }, valid, valid),
        "size",
        `query of shape [1, ${rows}] needs ${8 * rows} bytes as float64, more than memoryLimit = 2147483648;` +
          " pass a larger memoryLimit to read it",
      );
    }
  });

  test("nesting deeper than 64 arrays, or a cycle, is kind rank; a shape of 2 ** 31 dimensions too", () => {
    let deep: unknown = 1;
    for (let d = 0; d < 65; d++) {
      deep = [deep];
    }
    const cycle: unknown[] = [];
    cycle.push(cycle);
    for (const port of Object.values(ports)) {
      for (const input of [deep, cycle]) {
        expectError(
          () => port(valid, valid, input),
          "rank",
          "value is nested more than 64 arrays deep; at most 64 dimensions are supported",
        );
      }
    }
    const flat = { shape: sparse(2 ** 31), data: new Float64Array(4) };
    const two = { shape: [2, 2], data: new Float64Array(4) };
    for (const port of [flashFlat, simdFlat]) {
      expectError(
        () => port(flat as never, two, two),
        "rank",
        "query.shape has 2147483648 dimensions; at most 64 dimensions are supported",
      );
    }
  });
});

describe("the layer's and RoPE's options, in the words Python writes (TypeScript spelling)", () => {
  const cases: [() => unknown, string][] = [
    [() => checkHeads(0, null), "numHeads must be a positive integer, got 0"],
    [() => checkHeads(2, true), "numKvHeads must be a positive integer, got a boolean"],
    [() => checkRope(3, 4), "rope must be an object of theta, rotaryDim and interleaved, got 3"],
    [() => checkRope({ theta: 0 }, 4), "theta must be a finite number > 0, got 0"],
    [() => checkRope({ theta: 1, interleaved: 1 }, 4), "interleaved must be a boolean, got 1"],
    // null is no number and no boolean: refused as Python refuses None, not taken as the default.
    [() => checkRope({ theta: null }, 4), "theta must be a finite number > 0, got null"],
    [() => checkRope({ interleaved: null }, 4), "interleaved must be a boolean, got null"],
    [
      () => checkRope({ rotaryDim: 3 }, 4),
      "rotaryDim must be an even integer from 2 to the feature size 4, got 3",
    ],
    [() => checkReturnCache("yes"), "returnCache must be a boolean, got a string"],
  ];
  for (const [check, message] of cases) {
    test(message, () => expectError(check, "value", message));
  }
  test("rope takes exactly RoPE's declared options, with their defaults", () => {
    assert.deepEqual(checkRope({}, 4), { theta: 10000, rotaryDim: 4, interleaved: false });
    expectError(() => checkRope({ base: 10 }, 4), "value", "rope has an unknown option 'base'");
  });
});

describe("a window, sinks and key counts", () => {
  const q = tensor(2, 2, 3, 4); // [B, Hq, Lq, E]
  const k = tensor(2, 2, 5, 4); // [B, Hkv, Lk, E]

  test("sinkLogits may be a Float64Array or a Float32Array; one integer stands for every batch index", () => {
    const plain = call(q, k, k, { sinkLogits: [0.5, -1] });
    assert.deepEqual(call(q, k, k, { sinkLogits: Float64Array.of(0.5, -1) }), plain);
    assert.deepEqual(call(q, k, k, { sinkLogits: Float32Array.of(0.5, -1) }), plain);
    assert.deepEqual(call(q, k, k, { kvSeqlen: 3 }), call(q, k, k, { kvSeqlen: [3, 3] }));
    assert.deepEqual(
      call(q, k, k, { isCausal: true, queryOffset: 2 }),
      call(q, k, k, { isCausal: true, queryOffset: [2, 2] }),
    );
    assert.deepEqual(call(q, k, k, { window: [null, null] }), call(q, k, k));
  });

  test("each wrong number is named by its path, in Python's words", () => {
    const side = "an integer from 0 to 2^53 - 1, or null (unbounded)";
    expectError(
      () => call(q, k, k, { window: [true, 0] }),
      "value",
      `window[0] must be ${side}, got a boolean`,
    );
    expectError(() => call(q, k, k, { window: [0, NaN] }), "value", `window[1] must be ${side}, got NaN`);
    expectError(
      () => call(q, k, k, { sinkLogits: [[1], [2]] }),
      "value",
      "sinkLogits[0] must be a number, got an array",
    );
    expectError(
      () => call(q, k, k, { sinkLogits: "0.5" }),
      "value",
      "sinkLogits must be an array of numbers, one per query head, or null, got a string",
    );
    expectError(
      () => call(q, k, k, { queryOffset: [2, 2 ** 53] }),
      "value",
      "queryOffset[1] must be an integer from 0 to 2^53 - 1, got 9007199254740992",
    );
    expectError(
      () => call(q, k, k, { kvSeqlen: 6 }),
      "value",
      "kvSeqlen is 6, more than key's length Lk = 5: it counts the valid keys (key [2, 2, 5, 4])",
    );
    // The options before the tensors: a bad window before a ragged query.
    expectError(
      () => call([[1], [2, 3]], k, k, { window: [-1, 0] }),
      "value",
      `window[0] must be ${side}, got -1`,
    );
  });
});
