import assert from "node:assert/strict";
import { describe, test } from "node:test";

import fc from "fast-check";

import {
  type AttentionOptions,
  attentionSteps,
  matMul,
  scaledDotProductAttention,
  softmax,
  TUTORIAL_EXAMPLE,
  transpose,
} from "../src/attention.ts";
import type { ShapedMask, ShapedTensor } from "../src/inputs.ts";
import { attentionProblems, type Problem } from "./generate.ts";
import { broadcast, close, flatten, product, strides } from "./helpers.ts";

describe("the tutorial's example", () => {
  // The tutorial's inputs, as attention.ts keeps them for every port's `node` demo.
  const { query: Q, key: K, value: V } = TUTORIAL_EXAMPLE;

  test("runs unchanged and gives the 3 x 2 result worked out by hand", () => {
    const out = scaledDotProductAttention(Q, K, V); // number[][]
    // By hand: Q = K, so the scores are Q·Qᵀ = [[2, 0, 1], [0, 2, 1], [1, 1, 2]]; divided by
    // sqrt(4) = 2 they are [[1, 0, .5], [0, 1, .5], [.5, .5, 1]]. Row 0's weights are
    // [e, 1, √e] / (e + 1 + √e), so its first output is (1·e + 3·1 + 5·√e) / (e + 1 + √e); and
    // since V's second column is its first plus 1 and the weights sum to 1, the second output is
    // the first plus 1.
    const e = Math.E;
    const r = Math.sqrt(Math.E);
    const col0 = [
      (1 * e + 3 * 1 + 5 * r) / (e + 1 + r),
      (1 * 1 + 3 * e + 5 * r) / (1 + e + r),
      (1 * r + 3 * r + 5 * e) / (r + r + e),
    ];
    assert.equal(out.length, 3);
    for (let i = 0; i < 3; i++) {
      assert.equal(out[i].length, 2);
      assert.ok(Math.abs(out[i][0] - col0[i]) <= 1e-14 * col0[i], `row ${i}: ${out[i][0]} vs ${col0[i]}`);
      assert.ok(Math.abs(out[i][1] - (col0[i] + 1)) <= 1e-14 * col0[i], `row ${i}: ${out[i][1]}`);
    }
  });

  test("its helpers keep their tutorial meaning", () => {
    assert.deepEqual(
      transpose([
        [1, 2, 3],
        [4, 5, 6],
      ]),
      [
        [1, 4],
        [2, 5],
        [3, 6],
      ],
    );
    assert.deepEqual(
      matMul(
        [
          [1, 2],
          [3, 4],
        ],
        [
          [5, 6],
          [7, 8],
        ],
      ),
      [
        [19, 22],
        [43, 50],
      ],
    );
    const w = softmax([0, Math.log(3)]);
    assert.ok(Math.abs(w[0] - 0.25) < 1e-15 && Math.abs(w[1] - 0.75) < 1e-15);
    // The tutorial's softmax gave NaN for a fully masked row; this one gives +0.0.
    assert.deepEqual(softmax([-Infinity, -Infinity]), [0, 0]);
    assert.ok(softmax([-Infinity, -Infinity]).every((x) => Object.is(x, 0)));
    assert.deepEqual(softmax([]), []);
    // Without subtracting the max, exp(1000) would overflow to Infinity and give NaN.
    assert.deepEqual(softmax([1000, 1000]), [0.5, 0.5]);
  });
});

describe("the contract, case by case", () => {
  test("attentionSteps returns every step with its shape", () => {
    const steps = attentionSteps(
      [[1, 0]],
      [
        [1, 0],
        [0, 1],
      ],
      [[10], [20]],
      {
        attnMask: [[true, true]],
        scale: 2,
        softcap: 1,
      },
    );
    assert.deepEqual(steps.scores, [[1, 0]]);
    // logits = softcap * tanh(scores * scale / softcap): after softcap and mask, softmax's input.
    assert.deepEqual(steps.logits, [[Math.tanh(2), 0]]);
    const w0 = Math.exp(Math.tanh(2)) / (Math.exp(Math.tanh(2)) + 1);
    assert.ok(close((steps.weights as number[][])[0][0], w0, 1e-15));
    assert.ok(close((steps.output as number[][])[0][0], 10 * w0 + 20 * (1 - w0), 1e-13));
    assert.deepEqual(steps.scoresShape, [1, 2]);
    assert.deepEqual(steps.outputShape, [1, 1]);
  });

  test("causal is top-left aligned and combines with a mask (both must allow)", () => {
    const q = [
      [1, 0],
      [0, 1],
      [1, 1],
    ];
    const k = [
      [1, 0],
      [0, 1],
    ];
    const v = [[1], [2]];
    const steps = attentionSteps(q, k, v, { isCausal: true, attnMask: [false, true] });
    // number[][] inputs give number[][] steps (an overload): no cast needed under strict tsc.
    // Row 0: causal allows key 0 only, the mask forbids it: fully masked.
    assert.deepEqual(steps.logits[0], [-Infinity, -Infinity]);
    assert.deepEqual(steps.output, [[0], [2], [2]]);
    assert.ok(Object.is(steps.output[0][0], 0) && Object.is(steps.weights[0][0], 0));
  });

  test("a float mask is added; -1e30 is a number, -Infinity masks", () => {
    const steps = attentionSteps([[0]], [[0], [0], [0]], [[1], [2], [4]], {
      attnMask: [[-1e30, 0, -Infinity]],
    });
    assert.deepEqual(steps.logits, [[-1e30, 0, -Infinity]]);
    assert.deepEqual(steps.output, [[2]]);
    // A row of -1e30 only is still a distribution (uniform), not masked.
    const all = scaledDotProductAttention([[0]], [[0], [0]], [[1], [3]], { attnMask: [-1e30, -1e30] });
    assert.deepEqual(all, [[2]]);
  });

  test("a fully masked row gives exactly +0.0 even when value holds NaN or Infinity", () => {
    const out = scaledDotProductAttention(
      [
        [1, 2],
        [3, 4],
      ],
      [
        [1, 1],
        [2, 2],
      ],
      [
        [NaN, Infinity],
        [1, -Infinity],
      ],
      {
        attnMask: [
          [false, false],
          [true, false],
        ],
      },
    );
    assert.ok(Object.is(out[0][0], 0) && Object.is(out[0][1], 0));
    assert.ok(Number.isNaN(out[1][0]));
  });

  test("NaN propagates to the rows it touches and no other", () => {
    const out = scaledDotProductAttention(
      [
        [1, 0],
        [NaN, 1],
        [0, 1],
      ],
      [
        [1, 0],
        [0, 1],
      ],
      [
        [1, 2],
        [3, 4],
      ],
    );
    assert.ok(out[1].every(Number.isNaN));
    assert.ok(out[0].every(Number.isFinite) && out[2].every(Number.isFinite));
    // NaN in value row 1 reaches every output row through its (non-zero) weight.
    const out2 = scaledDotProductAttention(
      [
        [1, 0],
        [0, 1],
      ],
      [
        [1, 0],
        [0, 1],
      ],
      [
        [1, 2],
        [NaN, 4],
      ],
    );
    assert.ok(out2.every((row) => Number.isNaN(row[0]) && Number.isFinite(row[1])));
    // A NaN logit next to -Infinity cells makes the row NaN (its max is NaN), as in numpy.
    const steps = attentionSteps(
      [[NaN, 0]],
      [
        [1, 0],
        [0, 1],
      ],
      [[1], [2]],
      { attnMask: [[true, false]] },
    );
    assert.ok(flatten(steps.weights).every(Number.isNaN));
    assert.ok(Number.isNaN(flatten(steps.output)[0]));
  });

  test("empty tensors through the shaped form", () => {
    // Lq = 0: empty output [2, 0, 4].
    const noQueries = attentionSteps(
      { shape: [2, 0, 8], data: [] },
      { shape: [2, 5, 8], data: new Float64Array(80) },
      { shape: [2, 5, 4], data: new Float64Array(40) },
    );
    assert.deepEqual(noQueries.outputShape, [2, 0, 4]);
    assert.deepEqual(noQueries.output, [[], []]);
    // Lk = 0: every row fully masked, output +0.0 [2, 3, 4].
    const noKeys = scaledDotProductAttention(
      { shape: [2, 3, 8], data: new Float64Array(48).fill(1) },
      { shape: [2, 0, 8], data: [] },
      { shape: [2, 0, 4], data: [] },
    );
    assert.deepEqual(noKeys, [
      [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [0, 0, 0, 0],
      ],
      [
        [0, 0, 0, 0],
        [0, 0, 0, 0],
        [0, 0, 0, 0],
      ],
    ]);
    // Ev = 0 and zero heads.
    assert.deepEqual(scaledDotProductAttention([[1]], [[1]], { shape: [1, 0], data: [] }), [[]]);
    const noHeads = attentionSteps(
      { shape: [0, 3, 4], data: [] },
      { shape: [0, 5, 4], data: [] },
      {
        shape: [0, 5, 2],
        data: [],
      },
    );
    assert.deepEqual(noHeads.outputShape, [0, 3, 2]);
    assert.deepEqual(noHeads.output, []);
  });

  test("nested and shaped inputs give the same result", () => {
    const q = [
      [
        [0.5, -1],
        [2, 0.25],
      ],
    ];
    const k = [
      [
        [1, 1],
        [-1, 0.5],
        [0, 2],
      ],
    ];
    const v = [
      [
        [1, 2, 3],
        [4, 5, 6],
        [7, 8, 9],
      ],
    ];
    const nested = attentionSteps(q, k, v, { isCausal: true });
    const shaped = attentionSteps(
      { shape: [1, 2, 2], data: q.flat(2) },
      { shape: [1, 3, 2], data: new Float64Array(k.flat(2)) },
      { shape: [1, 3, 3], data: v.flat(2) },
      { isCausal: true, attnMask: { shape: [1, 3], data: [true, true, true] } },
    );
    assert.deepEqual(shaped, nested);
  });
});

// ---- Property tests on random shapes, masks and options. ----

const problems = attentionProblems();

/** The `count` rows of a flat [..., rows, cols] tensor (count is needed when cols is 0). */
function rows(data: readonly number[], cols: number, count: number): number[][] {
  return Array.from({ length: count }, (_, r) => data.slice(r * cols, (r + 1) * cols));
}

const RUNS = { numRuns: 150 };

describe("properties", () => {
  test("weight rows sum to 1, or are all +0.0 with an output row of +0.0 when fully masked", () => {
    fc.assert(
      fc.property(problems, (p) => {
        const steps = attentionSteps(p.query, p.key, p.value, p.options);
        const count = product(p.outer) * p.lq;
        const logits = rows(flatten(steps.logits), p.lk, count);
        const weights = rows(flatten(steps.weights), p.lk, count);
        const output = rows(flatten(steps.output), p.ev, count);
        assert.equal(flatten(steps.weights).length, count * p.lk);
        assert.equal(flatten(steps.output).length, count * p.ev);
        weights.forEach((row, r) => {
          if (logits[r].every((s) => s === -Infinity)) {
            assert.ok(row.every((w) => Object.is(w, 0)));
            if (p.ev > 0) {
              assert.ok(output[r].every((o) => Object.is(o, 0)));
            }
          } else {
            const sum = row.reduce((a, w) => a + w, 0);
            assert.ok(Math.abs(sum - 1) <= 1e-14, `row ${r} sums to ${sum}`);
            assert.ok(row.every((w) => w >= 0 && w <= 1));
          }
        });
        // Masked cells (logits -Infinity) get weight exactly 0.
        logits.flat().forEach((s, n) => s === -Infinity && assert.ok(Object.is(weights.flat()[n], 0)));
      }),
      RUNS,
    );
  });

  test("each output lies within the min and max of the value rows it attends to (per column)", () => {
    fc.assert(
      fc.property(problems, (p) => {
        const steps = attentionSteps(p.query, p.key, p.value, p.options);
        const count = product(p.outer) * p.lq;
        const weights = rows(flatten(steps.weights), p.lk, count);
        const output = rows(flatten(steps.output), p.ev, count);
        const value = rows(Array.from(p.value.data), p.ev, (product(p.outer) / p.hq) * p.hkv * p.lk); // [B... * Hkv * Lk, Ev]
        const group = p.hq / p.hkv;
        weights.forEach((row, r) => {
          const slice = Math.floor(r / Math.max(p.lq, 1)); // (b, h) of this row
          const b = Math.floor(slice / p.hq);
          const kvHead = Math.floor((slice % p.hq) / group);
          for (let c = 0; c < p.ev; c++) {
            const seen = row.flatMap((w, j) => (w > 0 ? [value[(b * p.hkv + kvHead) * p.lk + j][c]] : []));
            if (seen.length === 0) {
              assert.ok(Object.is(output[r][c], 0));
              continue;
            }
            const [lo, hi] = [Math.min(...seen), Math.max(...seen)];
            // Relative slack for rounding, plus one subnormal step per key: near 1e-323 each
            // product w * v rounds to a multiple of Number.MIN_VALUE, however small w is.
            const slack = 1e-14 * Math.max(Math.abs(lo), Math.abs(hi)) + p.lk * Number.MIN_VALUE;
            assert.ok(
              output[r][c] >= lo - slack && output[r][c] <= hi + slack,
              `${output[r][c]} not in [${lo}, ${hi}]`,
            );
          }
        });
      }),
      RUNS,
    );
  });

  test("permuting keys and values together leaves the output unchanged", () => {
    fc.assert(
      fc.property(problems, fc.infiniteStream(fc.nat()), (p, randoms) => {
        // Causal masking depends on key positions, so here it is spelled out as a boolean mask,
        // which moves with its keys like any mask.
        const options = withCausalAsMask(p);
        const permutation = shuffle(p.lk, randoms);
        const permuted = {
          key: permuteAxis(p.key, permutation, -2),
          value: permuteAxis(p.value, permutation, -2),
          mask:
            options.attnMask && options.attnMask.shape.at(-1) === p.lk
              ? permuteAxis(options.attnMask, permutation, -1)
              : options.attnMask,
        };
        const before = flatten(scaledDotProductAttention(p.query, p.key, p.value, options));
        const after = flatten(
          scaledDotProductAttention(p.query, permuted.key, permuted.value, {
            ...options,
            attnMask: permuted.mask,
          }),
        );
        const big = Math.max(1, ...Array.from(p.value.data, Math.abs));
        after.forEach((x, n) => assert.ok(close(x, before[n], 1e-13 * big), `${x} vs ${before[n]}`));
      }),
      RUNS,
    );
  });

  test("GQA equals the same call with key/value heads repeated (repeat_interleave)", () => {
    fc.assert(
      fc.property(problems, (p) => {
        if (p.outer.length === 0) {
          return;
        }
        const group = p.hq / p.hkv;
        const repeat = (t: ShapedTensor): ShapedTensor => {
          const [hkv, l, f] = t.shape.slice(-3);
          const data: number[] = [];
          for (let s = 0; s < product(t.shape.slice(0, -3)); s++) {
            for (let h = 0; h < hkv * group; h++) {
              const from = (s * hkv + Math.floor(h / group)) * l * f; // head h reads head h / group
              for (let x = 0; x < l * f; x++) {
                data.push(t.data[from + x]);
              }
            }
          }
          return { shape: [...t.shape.slice(0, -3), hkv * group, l, f], data };
        };
        const gqa = attentionSteps(p.query, p.key, p.value, p.options);
        const plain = attentionSteps(p.query, repeat(p.key), repeat(p.value), {
          ...p.options,
          enableGqa: false,
        });
        assert.deepEqual(gqa, plain);
      }),
      RUNS,
    );
  });

  test("a broadcast mask and causal give the same result as the full mask they stand for", () => {
    fc.assert(
      fc.property(problems, (p) => {
        const full = withCausalAsMask(p);
        const direct = attentionSteps(p.query, p.key, p.value, p.options);
        const spelled = attentionSteps(p.query, p.key, p.value, full);
        assert.deepEqual(flatten(spelled.output), flatten(direct.output));
        assert.deepEqual(flatten(spelled.weights), flatten(direct.weights));
      }),
      RUNS,
    );
  });
});

/** The options with isCausal and any mask folded into one full-size boolean or float mask. */
function withCausalAsMask(p: Problem): AttentionOptions & { attnMask?: ShapedMask } {
  const scoresShape = [...p.outer, p.lq, p.lk];
  const size = product(scoresShape);
  const mask = p.options.attnMask;
  const cells: (number | boolean)[] = mask
    ? broadcast(Array.from(mask.data), mask.shape, scoresShape)
    : new Array<boolean>(size).fill(true);
  if (p.options.isCausal) {
    for (let n = 0; n < size; n++) {
      const [i, j] = [Math.floor(n / p.lk) % p.lq, n % p.lk];
      if (j > i) {
        cells[n] = typeof cells[n] === "boolean" ? false : -Infinity;
      }
    }
  }
  if (!mask && !p.options.isCausal) {
    return { ...p.options, attnMask: undefined };
  }
  return { ...p.options, isCausal: false, attnMask: { shape: scoresShape, data: cells } };
}

/** A permutation of 0..n-1 from a stream of random naturals (Fisher-Yates). */
function shuffle(n: number, randoms: Iterable<number>): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  const source = randoms[Symbol.iterator]();
  for (let i = n - 1; i > 0; i--) {
    const j = source.next().value! % (i + 1);
    [order[i], order[j]] = [order[j], order[i]];
  }
  return order;
}

/** Reorder one axis of a shaped tensor: new index n takes old index permutation[n]. */
function permuteAxis<T extends number | boolean>(
  t: { shape: readonly number[]; data: ArrayLike<T> },
  permutation: readonly number[],
  axis: number,
): { shape: readonly number[]; data: T[] } {
  const d = t.shape.length + axis;
  const stride = strides(t.shape)[d];
  const data = Array.from(t.data);
  const out = data.slice();
  for (let flat = 0; flat < data.length; flat++) {
    const index = Math.floor(flat / stride) % t.shape[d];
    out[flat] = data[flat + (permutation[index] - index) * stride];
  }
  return { shape: t.shape, data: out };
}
