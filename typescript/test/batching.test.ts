// The shared bookkeeping of both TypeScript ports, on small shapes worked out by hand. (Every
// fixture also runs through it: broadcast masks, grouped-query heads and batch dims.)

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { broadcastStrides, nest, slices } from "../src/batching.ts";
import { checkShapes } from "../src/inputs.ts";

describe("batching", () => {
  test("broadcastStrides: right-aligned, stride 0 along a missing or size-1 dim", () => {
    // scores [2, 3, 4, 5]; a mask [3, 1, 5] repeats along the batch dim and along Lq.
    assert.deepEqual(broadcastStrides([3, 1, 5], [2, 3, 4, 5]), [0, 5, 0, 1]);
    assert.deepEqual(broadcastStrides([5], [4, 5]), [0, 1]);
    assert.deepEqual(broadcastStrides([2, 3, 4, 5], [2, 3, 4, 5]), [60, 20, 5, 1]);
  });

  test("slices: grouped-query heads read consecutive key/value heads; mask offsets per slice", () => {
    // query [2, 4, 3, 8] (B = 2, Hq = 4), key/value [2, 2, 5, 8]: groups of 2 query heads.
    const shapes = checkShapes([2, 4, 3, 8], [2, 2, 5, 8], [2, 2, 5, 8], [4, 1, 5], true);
    const all = slices(shapes, [4, 1, 5]);
    assert.equal(all.length, 8);
    const kvHeads = all.map((s) => s.key / (5 * 8)); // which [Lk, E] block each slice reads
    assert.deepEqual(kvHeads, [0, 0, 1, 1, 2, 2, 3, 3]);
    assert.deepEqual(
      all.map((s) => s.mask),
      [0, 5, 10, 15, 0, 5, 10, 15], // the mask [4, 1, 5] varies by head, repeats over the batch
    );
    assert.ok(all.every((s) => s.maskI === 0 && s.maskJ === 1));
    assert.deepEqual(
      all.map((s) => s.output),
      all.map((_, n) => n * 3 * 8),
    );
  });

  test("nest: flat row-major numbers to nested arrays, empty dims included", () => {
    assert.deepEqual(nest([1, 2, 3, 4, 5, 6], [2, 3]), [
      [1, 2, 3],
      [4, 5, 6],
    ]);
    assert.deepEqual(nest([1, 2, 3, 4], [2, 1, 2]), [[[1, 2]], [[3, 4]]]);
    assert.deepEqual(nest([], [3, 0]), [[], [], []]);
    assert.deepEqual(nest([], [0, 4]), []);
  });

  test("nest: one matrix per (batch, head) under the outer shape; no outer dims gives it uncopied", () => {
    const a = [[1], [2]];
    const b = [[3], [4]];
    assert.deepEqual(nest([a, b], [2]), [a, b]);
    assert.equal(nest([a], []), a);
    assert.deepEqual(nest([a, b, a, b], [2, 2]), [
      [a, b],
      [a, b],
    ]);
  });
});
