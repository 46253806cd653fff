// key-range.ts, which decides which keys each query row sees: held to the contract's sentences
// (docs/design.md, section 3: with isCausal, key j is allowed for query i only when
// j <= i + queryOffset; a window, sink tokens and kvSeqlen as the contract's inequalities) and to
// the two properties the tiled ports rely on, for any RowKeys.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import fc from "fast-check";
import { checkShapes, MAX_QUERY_OFFSET } from "../src/inputs.ts";
import {
  blockEnd,
  keyEnd,
  keyRange,
  keyStart,
  type RowKeys,
  rowKeys,
  seesEveryKey,
  seesKey,
  sinkKeyEnd,
  sliceKeys,
} from "../src/key-range.ts";

const lengths = fc.integer({ min: 0, max: 40 });
const offsets = fc.oneof(fc.integer({ min: 0, max: 50 }), fc.constant(MAX_QUERY_OFFSET));

/** Any RowKeys, windows and sinks included: what the coming options may make. */
const anyKeys = (Lq: number, Lk: number) =>
  fc.record({
    startShift: fc.integer({ min: -Lq, max: Lk }),
    endShift: fc.integer({ min: -Lq, max: Lk }),
    limit: fc.integer({ min: 0, max: Lk }),
    sinkEnd: fc.integer({ min: 0, max: Lk }),
  });

describe("key range", () => {
  test("row i sees key j exactly when the contract allows it: j <= i + queryOffset with isCausal", () => {
    fc.assert(
      fc.property(lengths, lengths, fc.boolean(), offsets, (Lq, Lk, isCausal, queryOffset) => {
        const keys = rowKeys({ isCausal, queryOffset }, Lq, Lk);
        for (let i = 0; i < Lq; i++) {
          for (let j = 0; j < Lk; j++) {
            assert.equal(seesKey(keys, i, j), !isCausal || j <= i + queryOffset, `row ${i}, key ${j}`);
          }
        }
      }),
    );
  });

  test("the numbers the kernels get are 32-bit integers, whatever the offset", () => {
    fc.assert(
      fc.property(lengths, lengths, fc.boolean(), offsets, (Lq, Lk, isCausal, queryOffset) => {
        const keys = rowKeys({ isCausal, queryOffset }, Lq, Lk);
        for (const x of [keys.startShift, keys.endShift, keys.limit, keys.sinkEnd]) {
          assert.ok(Number.isInteger(x) && x >= -Lq && x <= Lk, `${x} for Lq ${Lq}, Lk ${Lk}`);
        }
      }),
    );
  });

  test("for any RowKeys, bounds never shrink as the row grows, and blockEnd bounds every row before it", () => {
    const problem = fc
      .tuple(fc.integer({ min: 1, max: 30 }), fc.integer({ min: 0, max: 30 }))
      .chain(([Lq, Lk]) => fc.tuple(fc.constant(Lq), fc.constant(Lk), anyKeys(Lq, Lk)));
    fc.assert(
      fc.property(problem, ([Lq, Lk, keys]: [number, number, RowKeys]) => {
        for (let i = 0; i < Lq; i++) {
          assert.ok(keyStart(keys, i) <= keyEnd(keys, i) && keyEnd(keys, i) <= Lk);
          if (i > 0) {
            assert.ok(keyStart(keys, i - 1) <= keyStart(keys, i), "start shrank");
            assert.ok(keyEnd(keys, i - 1) <= keyEnd(keys, i), "end shrank");
          }
          // The tiled ports visit the keys below blockEnd(last row) only: every key a row up to
          // it sees must be there.
          for (let j = 0; j < Lk; j++) {
            for (let r = 0; r <= i; r++) {
              assert.ok(!seesKey(keys, r, j) || j < blockEnd(keys, i), `row ${r} sees key ${j}`);
            }
          }
        }
      }),
    );
  });

  test("seesEveryKey says whether every one of the first rows sees every key", () => {
    const problem = fc
      .tuple(fc.integer({ min: 0, max: 20 }), fc.integer({ min: 0, max: 20 }))
      .chain(([Lq, Lk]) => fc.tuple(fc.constant(Lq), fc.constant(Lk), anyKeys(Lq, Lk)));
    fc.assert(
      fc.property(problem, ([Lq, Lk, keys]: [number, number, RowKeys]) => {
        const range = { batches: [keys, keys], heads: 1, keyLength: Lk };
        for (let rows = 0; rows <= Lq; rows++) {
          let every = true;
          for (let i = 0; i < rows; i++) {
            for (let j = 0; j < Lk; j++) {
              every &&= seesKey(keys, i, j);
            }
          }
          assert.equal(seesEveryKey(range, rows), every, `rows ${rows}`);
        }
      }),
    );
  });

  test("a window, sink tokens and kvSeqlen show a row exactly the keys the contract allows", () => {
    const side = fc.oneof(fc.constant(null), fc.integer({ min: 0, max: 8 }), fc.constant(MAX_QUERY_OFFSET));
    const window = fc.oneof(fc.constant(null), fc.tuple(side, side));
    const problem = fc
      .tuple(lengths, lengths)
      .chain(([Lq, Lk]) =>
        fc.tuple(
          fc.constant(Lq),
          fc.constant(Lk),
          fc.boolean(),
          offsets,
          window,
          fc.integer({ min: 0, max: 6 }),
          fc.oneof(fc.constant(null), fc.integer({ min: 0, max: Lk })),
        ),
      );
    fc.assert(
      fc.property(problem, ([Lq, Lk, isCausal, queryOffset, window, sinkTokens, kvSeqlen]) => {
        const keys = rowKeys({ isCausal, queryOffset, window, sinkTokens, kvSeqlen }, Lq, Lk);
        const [left, right] = window ?? [null, null];
        for (let i = 0; i < Lq; i++) {
          // The contract's words, in exact integers (p may pass 2^53): row i sits at p.
          const p = BigInt(i) + BigInt(queryOffset);
          for (let j = 0; j < Lk; j++) {
            const k = BigInt(j);
            const hidden =
              j >= (kvSeqlen ?? Lk) || (isCausal && k > p) || (right !== null && k > p + BigInt(right));
            const seen = !hidden && (j < sinkTokens || left === null || k >= p - BigInt(left));
            assert.equal(seesKey(keys, i, j), seen, `row ${i}, key ${j}`);
          }
          assert.ok(sinkKeyEnd(keys, i) <= keyEnd(keys, i));
          assert.ok(i === 0 || sinkKeyEnd(keys, i - 1) <= sinkKeyEnd(keys, i), "sinks shrank");
        }
        for (const x of [keys.startShift, keys.endShift, keys.limit, keys.sinkEnd]) {
          assert.ok(Number.isInteger(x) && x >= -Lq && x <= Lk, `${x} for Lq ${Lq}, Lk ${Lk}`);
        }
      }),
    );
  });

  test("a ragged batch has the RowKeys of each sequence alone, per batch index", () => {
    const shapes = checkShapes([2, 3, 2, 1, 4], [2, 3, 2, 9, 4], [2, 3, 2, 9, 4], null, false);
    const queryOffset = [
      [8, 3, 0],
      [5, 6, 7],
    ];
    const kvSeqlen = [
      [9, 4, 1],
      [6, 7, 0],
    ];
    const options = { isCausal: true, window: [2, 0] as const, sinkTokens: 1 };
    const range = keyRange({ ...options, queryOffset, kvSeqlen }, shapes);
    const alone = queryOffset
      .flat()
      .map((o, b) => rowKeys({ ...options, queryOffset: o, kvSeqlen: kvSeqlen.flat()[b] }, 1, 9));
    assert.deepEqual(range.batches, alone);
    assert.deepEqual(
      Array.from({ length: 12 }, (_, index) => sliceKeys(range, index)),
      Array.from({ length: 12 }, (_, index) => alone[Math.floor(index / 2)]),
    );
  });

  test("one RowKeys per batch index, shared by its heads", () => {
    // query [2, 3, 4, 8] (B = 2, Hq = 3): six slices, two batch indices.
    const shapes = checkShapes([2, 3, 4, 8], [2, 3, 6, 8], [2, 3, 6, 8], null, false);
    const range = keyRange({ isCausal: true, queryOffset: 2 }, shapes);
    assert.equal(range.batches.length, 2);
    for (let index = 0; index < 6; index++) {
      assert.equal(sliceKeys(range, index), range.batches[Math.floor(index / 3)]);
    }
    // Row 0 sits at position 2: keys 0, 1 and 2; row 3 at position 5: every key.
    assert.deepEqual([keyStart(range.batches[0], 0), keyEnd(range.batches[0], 0)], [0, 3]);
    assert.deepEqual([keyStart(range.batches[1], 3), keyEnd(range.batches[1], 3)], [0, 6]);
    assert.equal(seesEveryKey(range, 1), false);
    assert.equal(seesEveryKey(keyRange({ isCausal: true, queryOffset: 5 }, shapes), 1), true);
    assert.equal(seesEveryKey(keyRange({ isCausal: false, queryOffset: 0 }, shapes), 4), true);
  });
});
