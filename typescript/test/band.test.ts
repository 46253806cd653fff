// The tiled ports' band: with a sliding window (and sinks), a row's keys are the sinks and a band
// of at most left + 1 + right keys, and flash.ts and simd.ts compute those tiles alone. Two things
// are held here, neither of which the fixtures can see:
//  - the work: the scores each port computes (flash.ts's scoredCells, the kernel's scored tiles)
//    are O(Lq x window) for a windowed prefill and O(window) for a decode step, counted against
//    bounds that follow from the window alone (not from the ports);
//  - the order: a row's arithmetic depends only on the keys it sees and their order, so a row
//    computed against a key tensor holding only those keys (the sinks, then its band), as a
//    bounded cache holds them, gives the same bits as against every key.
// The numbers themselves are the fixtures' business (verify, --tag window / sinks / ragged).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as flash from "../src/flash.ts";
import type { FlatTensor } from "../src/inputs.ts";
import * as simd from "../src/simd-node.ts";
import { generator } from "./generate.ts";

const random = generator(41);
const numbers = (n: number) => Float64Array.from({ length: n }, () => 2 * random() - 1);

/** Flat [H, L, width] tensor of random numbers, in float64 or float32. */
function tensor(shape: number[], float32 = false): FlatTensor {
  const data = numbers(shape.reduce((a, n) => a * n, 1));
  return { shape, data: float32 ? Float32Array.from(data) : data };
}

/** How many keys row i (at position i + offset) sees with window [left, 0], isCausal, sinkTokens S,
 * Lk keys: counted from the contract's words, key by key. */
function visibleKeys(i: number, offset: number, left: number, S: number, Lk: number): number {
  let n = 0;
  const p = i + offset;
  for (let j = 0; j < Lk; j++) {
    n += j <= p && (j < S || j >= p - left) ? 1 : 0;
  }
  return n;
}

describe("a windowed pass computes the band's tiles alone", () => {
  const [Lq, E, Ev] = [2048, 8, 8];
  const left = 127;
  const [q, k, v] = [tensor([Lq, E]), tensor([Lq, E]), tensor([Lq, Ev])];

  test("flash.ts: a windowed prefill scores each row's keys once, a causal one about Lq^2 / 2", () => {
    const visible = Array.from({ length: Lq }, (_, i) => visibleKeys(i, 0, left, 0, Lq)).reduce(
      (a, n) => a + n,
    );
    flash.scaledDotProductAttentionFlat(q, k, v, { isCausal: true, window: [left, 0] });
    const windowed = flash.scoredCells();
    // Rows whose bands start together share tiles (the first `left` rows start at key 0): the
    // cells past a row's end in its block's last tile are the only extra ones.
    assert.ok(windowed >= visible, `${windowed} scores for ${visible} visible cells`);
    assert.ok(
      windowed <= visible + Lq * flash.QUERY_BLOCK,
      `${windowed} scores for ${visible} visible cells`,
    );
    flash.scaledDotProductAttentionFlat(q, k, v, { isCausal: true });
    const causal = flash.scoredCells();
    assert.ok(causal >= (Lq * Lq) / 2, `causal: ${causal}`);
    assert.ok(causal > 6 * windowed, `causal ${causal} against windowed ${windowed}`);
  });

  test("flash.ts: sinks add their own segment, a decode step scores its window alone", () => {
    flash.scaledDotProductAttentionFlat(q, k, v, { isCausal: true, window: [left, 0], sinkTokens: 4 });
    const visible = Array.from({ length: Lq }, (_, i) => visibleKeys(i, 0, left, 4, Lq)).reduce(
      (a, n) => a + n,
    );
    const sinks = flash.scoredCells();
    assert.ok(sinks >= visible && sinks <= visible + Lq * flash.QUERY_BLOCK, `${sinks} for ${visible}`);
    const step = tensor([1, E]);
    flash.scaledDotProductAttentionFlat(step, k, v, {
      isCausal: true,
      queryOffset: Lq - 1,
      window: [left, 0],
    });
    assert.equal(flash.scoredCells(), left + 1); // one row, its left + 1 keys: one tile and a part
    flash.scaledDotProductAttentionFlat(step, k, v, { isCausal: true, queryOffset: Lq - 1 });
    assert.equal(flash.scoredCells(), Lq);
  });

  for (const float32 of [false, true]) {
    test(`simd.ts (${float32 ? "float32" : "float64"}): a windowed prefill scores O(Lq x window) tiles`, () => {
      const { queryBlock: BR, keyTile: BC } = simd.kernelBlocks();
      const [qf, kf, vf] = [q, k, v].map((t) => ({
        shape: t.shape,
        data: float32 ? Float32Array.from(t.data) : t.data,
      }));
      const blocks = Math.ceil(Lq / BR);
      simd.kernelScoredTiles(true);
      simd.scaledDotProductAttentionFlat(qf, kf, vf, { isCausal: true, window: [left, 0] });
      const windowed = simd.kernelScoredTiles(true);
      // A block's rows see keys from its first row's start to its last row's end: at most
      // left + BR keys, which lie in ceil((left + BR) / BC) + 1 tiles.
      assert.ok(windowed <= blocks * (Math.ceil((left + BR) / BC) + 1), `windowed: ${windowed} tiles`);
      simd.scaledDotProductAttentionFlat(qf, kf, vf, { isCausal: true });
      const causal = simd.kernelScoredTiles(true);
      let expected = 0; // each block: the tiles up to its last row's key
      for (let i0 = 0; i0 < Lq; i0 += BR) {
        expected += Math.ceil(Math.min(Lq, i0 + BR) / BC);
      }
      assert.equal(causal, expected);
      assert.ok(causal > 3 * windowed, `causal ${causal} against windowed ${windowed}`);
      // A decode step at position Lq - 1 with the window's left + 1 keys: those tiles alone.
      const step = { shape: [1, E], data: qf.data.subarray(0, E) };
      simd.scaledDotProductAttentionFlat(step, kf, vf, {
        isCausal: true,
        queryOffset: Lq - 1,
        window: [left, 0],
      });
      const first = Lq - 1 - left;
      assert.equal(simd.kernelScoredTiles(true), Math.floor((Lq - 1) / BC) - Math.floor(first / BC) + 1);
    });
  }
});

describe("a row's bits depend only on the keys it sees and their order", () => {
  // Rows at positions p of a long sequence, window [left, 0], S sink tokens and a sink logit per
  // head: against every key, and against a key tensor of only the sinks and the row's band (as a
  // bounded cache keeps them), where the row sits at position S + left.
  const [Hq, N, E, Ev, S, left] = [2, 700, 16, 8, 3, 150];
  const sinkLogits = [0.5, -1.25];
  const q = tensor([Hq, N, E]);
  const k = tensor([1, N, E]);
  const v = tensor([1, N, Ev]);
  const rows = (t: FlatTensor, heads: number, width: number, ranges: [number, number][]) => {
    const out: number[] = [];
    for (let h = 0; h < heads; h++) {
      for (const [from, to] of ranges) {
        out.push(...t.data.subarray((h * N + from) * width, (h * N + to) * width));
      }
    }
    return out;
  };
  const ports: [string, (q: FlatTensor, k: FlatTensor, v: FlatTensor, o: object) => FlatTensor, boolean][] = [
    ["flash.ts", flash.scaledDotProductAttentionFlat, false],
    ["simd.ts float64", simd.scaledDotProductAttentionFlat, false],
    ["simd.ts float32", simd.scaledDotProductAttentionFlat, true],
  ];
  for (const [name, run, float32] of ports) {
    test(name, () => {
      const as = (data: number[]) => (float32 ? Float32Array.from(data) : Float64Array.from(data));
      const options = { isCausal: true, enableGqa: true, window: [left, 0], sinkTokens: S, sinkLogits };
      for (const p of [S + left, 200, 333, 640, N - 1]) {
        const query = { shape: [Hq, 1, E], data: as(rows(q, Hq, E, [[p, p + 1]])) };
        const full = run(
          query,
          { shape: [1, p + 1, E], data: as(rows(k, 1, E, [[0, p + 1]])) },
          { shape: [1, p + 1, Ev], data: as(rows(v, 1, Ev, [[0, p + 1]])) },
          { ...options, queryOffset: p },
        ).data;
        const kept: [number, number][] = [
          [0, S],
          [p - left, p + 1],
        ];
        const compact = run(
          query,
          { shape: [1, S + left + 1, E], data: as(rows(k, 1, E, kept)) },
          { shape: [1, S + left + 1, Ev], data: as(rows(v, 1, Ev, kept)) },
          { ...options, queryOffset: S + left },
        ).data;
        assert.deepEqual(Array.from(compact), Array.from(full), `position ${p}`);
      }
    });
  }
});

describe("a ragged batch's decode step with grouped-query heads folds them, with the same bits", () => {
  // Two sequences of 30 and 47 valid keys in a cache of 64, each decoding its next token at its own
  // position: every query head of a group sees the same prefix of keys, so the group's heads become
  // the rows of one block (batching.ts's foldDecodeHeads) and each key tile is scored once per
  // key/value head. Each head computed alone (one head, no grouping: never folded) gives the bits.
  const [Hq, Hkv, Lk, E, Ev] = [4, 2, 64, 16, 8];
  const lengths = [30, 47];
  const options = {
    isCausal: true,
    enableGqa: true,
    kvSeqlen: lengths,
    queryOffset: lengths.map((n) => n - 1),
  };
  for (const float32 of [false, true]) {
    test(`simd.ts ${float32 ? "float32" : "float64"} (and flash.ts in float64)`, () => {
      const [q, k, v] = [
        tensor([2, Hq, 1, E], float32),
        tensor([2, Hkv, Lk, E], float32),
        tensor([2, Hkv, Lk, Ev], float32),
      ];
      const ports = float32
        ? [simd.scaledDotProductAttentionFlat]
        : [simd.scaledDotProductAttentionFlat, flash.scaledDotProductAttentionFlat];
      for (const run of ports) {
        simd.kernelScoredTiles(true);
        const together = run(q, k, v, options).data; // [2, Hq, 1, Ev]
        if (run === simd.scaledDotProductAttentionFlat) {
          assert.equal(simd.kernelScoredTiles(true), 2 * Hkv); // one tile per (sequence, kv head)
        }
        for (let b = 0; b < 2; b++) {
          for (let h = 0; h < Hq; h++) {
            const kv = b * Hkv + Math.floor(h / (Hq / Hkv));
            const part = (t: FlatTensor, at: number, size: number, shape: number[]) => ({
              shape,
              data: t.data.subarray(at * size, (at + 1) * size),
            });
            const alone = run(
              part(q, b * Hq + h, E, [1, E]),
              part(k, kv, Lk * E, [Lk, E]),
              part(v, kv, Lk * Ev, [Lk, Ev]),
              { isCausal: true, kvSeqlen: lengths[b], queryOffset: lengths[b] - 1 },
            ).data;
            assert.deepEqual(
              Array.from(together.subarray((b * Hq + h) * Ev, (b * Hq + h + 1) * Ev)),
              Array.from(alone),
              `sequence ${b}, head ${h}`,
            );
          }
        }
      }
    });
  }
});
