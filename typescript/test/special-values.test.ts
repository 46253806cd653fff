// Special values in the two fast ports, flash.ts and simd.ts, as the readable port gives them: NaN
// and infinities in cells that causal tile skipping never visits, NaN logits in a later tile, an
// accumulator that underflows to -0.0, fully-masked rows and Lk = 0. Each test runs on each port,
// with shapes that cross that port's key tiles.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as readable from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import * as simd from "../src/simd-node.ts";
import { close } from "./helpers.ts";

const PORTS: { name: string; sdpa: typeof readable.scaledDotProductAttention; keyTile: number }[] = [
  { name: "flash.ts", sdpa: flash.scaledDotProductAttention, keyTile: flash.KEY_TILE },
  { name: "simd.ts", sdpa: simd.scaledDotProductAttention, keyTile: simd.kernelBlocks().keyTile },
];

const rows = (n: number, cols: number, f: (i: number, t: number) => number) =>
  Array.from({ length: n }, (_, i) => Array.from({ length: cols }, (_, t) => f(i, t)));

for (const { name, sdpa, keyTile } of PORTS) {
  describe(`${name}: special values, as the readable port gives them`, () => {
    const lk = 2 * keyTile + 1;

    test("NaN in a value row a causal block skips still reaches every row that is not fully masked", () => {
      // Row lk - 1 of value is NaN in column 0; with isCausal and Lq = Lk, the first query blocks skip
      // that key (masked: weight 0), but 0 * NaN is NaN in the readable port, so column 0 is NaN in
      // every row, and column 1 is finite.
      const query = rows(lk, 2, (i, t) => Math.sin(i + t));
      const key = rows(lk, 2, (i, t) => Math.cos(i * t));
      const value = rows(lk, 2, (i, t) => (i === lk - 1 && t === 0 ? NaN : i + t));
      const mask = {
        shape: [lk, lk],
        data: Array.from({ length: lk * lk }, (_, n) => Math.floor(n / lk) !== 5),
      }; // row 5 fully masked
      for (const options of [{ isCausal: true }, { isCausal: true, attnMask: mask }]) {
        const expected = readable.scaledDotProductAttention(query, key, value, options);
        const out = sdpa(query, key, value, options);
        out.forEach((row, i) => {
          const fullyMasked = "attnMask" in options && i === 5;
          assert.equal(Number.isNaN(row[0]), !fullyMasked, `row ${i}`);
          assert.ok(fullyMasked ? Object.is(row[1], 0) : Number.isFinite(row[1]), `row ${i}`);
          assert.ok(close(row[1], expected[i][1], 1e-12 * lk), `row ${i}`);
          assert.equal(Number.isNaN(expected[i][0]), Number.isNaN(row[0]));
        });
      }
      // An infinity there does the same (0 * Infinity is NaN) in the rows that cannot see it; the last
      // row sees it, and its output is Infinity.
      const infinite = rows(lk, 1, (i) => (i === lk - 1 ? Infinity : 1));
      const withInfinity = sdpa(query, key, infinite, { isCausal: true });
      assert.ok(withInfinity.slice(0, -1).every((r) => Number.isNaN(r[0])));
      assert.equal(withInfinity[lk - 1][0], Infinity);
    });

    test("NaN in a key the causal mask hides changes nothing; NaN in a visible key makes its rows NaN", () => {
      const query = rows(lk, 2, (i, t) => Math.sin(i + t));
      const value = rows(lk, 1, (i) => i);
      const hidden = rows(lk, 2, (i, t) => (i === lk - 1 ? NaN : Math.cos(i * t)));
      const out = sdpa(query, hidden, value, { isCausal: true });
      assert.ok(out.slice(0, -1).every((r) => Number.isFinite(r[0])));
      assert.ok(Number.isNaN(out[lk - 1][0]));
      assert.deepEqual(
        out.map((r) => Number.isNaN(r[0])),
        readable
          .scaledDotProductAttention(query, hidden, value, { isCausal: true })
          .map((r) => Number.isNaN(r[0])),
      );
    });

    test("a NaN logit in a later tile makes the whole row NaN, after finite tiles; masked, it is nothing", () => {
      const query = [
        [1, 0],
        [0, 1],
      ];
      const key = rows(lk, 2, (i, t) => (i === lk - 1 && t === 0 ? NaN : 1)); // the last key's score is NaN
      const value = rows(lk, 1, () => 1);
      const attnMask = [
        rows(1, lk, () => 1)[0].map(() => true),
        rows(1, lk, (_, j) => (j === lk - 1 ? 0 : 1))[0].map(Boolean),
      ];
      const out = sdpa(query, key, value, { attnMask });
      assert.ok(Number.isNaN(out[0][0]));
      assert.equal(out[1][0], 1);
      assert.deepEqual(readable.scaledDotProductAttention(query, key, value, { attnMask }), out);
    });

    test("an accumulator that underflows to -0.0 when rescaled still gives +0.0, as the readable port", () => {
      // Key 0 (tile 0): logit 0, value -1e-300. Key keyTile (tile 1): logit 700, value -0.0. The
      // rescale multiplies acc = -1e-300 by exp(-700): -0.0, and the tile adds 1 * -0.0.
      const n = keyTile + 1;
      const key = rows(n, 1, (j) => (j === keyTile ? 700 : 0));
      const value = rows(n, 1, (j) => (j === 0 ? -1e-300 : -0));
      const attnMask = [rows(1, n, (_, j) => j)[0].map((j) => j === 0 || j === keyTile)];
      const expected = readable.scaledDotProductAttention([[1]], key, value, { attnMask, scale: 1 });
      assert.ok(Object.is(expected[0][0], 0));
      assert.ok(Object.is(sdpa([[1]], key, value, { attnMask, scale: 1 })[0][0], 0));
    });

    test("fully-masked rows are exactly +0.0, with NaN and infinities in value", () => {
      const value = rows(lk, 2, (i) => (i % 2 ? NaN : -Infinity));
      const query = rows(3, 2, () => 1);
      const key = rows(lk, 2, () => 1);
      for (const attnMask of [
        { shape: [3, lk], data: new Array<boolean>(3 * lk).fill(false) },
        { shape: [1], data: [-Infinity] },
      ]) {
        const out = sdpa(query, key, value, { attnMask });
        assert.ok(out.flat().every((x) => Object.is(x, 0)));
      }
      const none = sdpa(query, { shape: [0, 2], data: [] }, { shape: [0, 2], data: [] });
      assert.ok(none.flat().every((x) => Object.is(x, 0)) && none.flat().length === 6);
    });
  });
}
