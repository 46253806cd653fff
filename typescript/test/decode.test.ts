// Decoding with queryOffset: the rows of one causal pass over n keys, computed again a block at a
// time (a prefill, then decode steps of 1, 3, 7 and 4 rows), each block against the keys up to
// its last row and with queryOffset = its first row's position, are the same rows bit for bit in
// attention.ts, flash.ts and simd.ts (float64 and float32, one thread and workers): each port
// orders a row's arithmetic the same way whatever other rows share its call, with a sliding window
// and sinks too (each row walks its band from its own first key). The lengths cross
// the tiled ports' key tiles (64) and query blocks (32 and 64), so a block's tile skipping and its
// shorter last tile are exercised. The numbers are checked against the fixtures elsewhere
// (verify); this file holds the ports to the equality alone.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as readable from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import type { FlatTensor } from "../src/inputs.ts";
import * as simd from "../src/simd-node.ts";
import { generator } from "./generate.ts";
import { product } from "./helpers.ts";

const [B, Hq, Hkv, E, Ev] = [1, 4, 2, 16, 8];
const PREFILL = 135;
const STEPS = [1, 3, 7, 4]; // decode steps after the prefill, as a generation loop takes them
const N = PREFILL + STEPS.reduce((a, n) => a + n, 0); // 150 tokens

/** The blocks of rows [start, start + rows): the prefill, then the steps. */
const BLOCKS = [PREFILL, ...STEPS].map((rows, n, all) => ({
  start: all.slice(0, n).reduce((a, r) => a + r, 0),
  rows,
}));

const random = generator(27);
const numbers = (n: number) => Array.from({ length: n }, () => 2 * random() - 1);
const QUERY = numbers(B * Hq * N * E); // [B, Hq, N, E]
const KEY = numbers(B * Hkv * N * E); // [B, Hkv, N, E]
const VALUE = numbers(B * Hkv * N * Ev); // [B, Hkv, N, Ev]

/** Rows [from, to) of every (batch, head) of a flat [B, H, N, width] tensor: [B, H, to - from, width]. */
function rowsOf(data: readonly number[], heads: number, width: number, from: number, to: number): number[] {
  const out: number[] = [];
  for (let h = 0; h < B * heads; h++) {
    out.push(...data.slice((h * N + from) * width, (h * N + to) * width));
  }
  return out;
}

type Tensor = { shape: number[]; data: number[] };
type Run = (
  query: Tensor,
  key: Tensor,
  value: Tensor,
  options: { isCausal: true; enableGqa: true; queryOffset: number } & Extra,
) => number[];

/** Options beside causality that every block takes as the whole pass does. */
type Extra = { window?: [number, number]; sinkTokens?: number; sinkLogits?: number[] };

/** A sliding window of 41 keys (shorter than the prefill, longer than a step), 3 sink tokens and a
 * sink logit per query head: the tiled ports then walk each row's band from its own first key. */
const WINDOWED: Extra = { window: [40, 0], sinkTokens: 3, sinkLogits: [0.25, -1.5, 2, 0] };

/** The whole pass's output rows [start, start + rows) of each head, and the block's own output. */
function compareBlocks(run: Run, extra: Extra = {}): void {
  const whole = run(
    { shape: [B, Hq, N, E], data: QUERY },
    { shape: [B, Hkv, N, E], data: KEY },
    { shape: [B, Hkv, N, Ev], data: VALUE },
    { ...extra, isCausal: true, enableGqa: true, queryOffset: 0 },
  ); // [B, Hq, N, Ev]
  for (const { start, rows } of BLOCKS) {
    const end = start + rows; // the block sees the keys up to its last row: the cache and itself
    const block = run(
      { shape: [B, Hq, rows, E], data: rowsOf(QUERY, Hq, E, start, end) },
      { shape: [B, Hkv, end, E], data: rowsOf(KEY, Hkv, E, 0, end) },
      { shape: [B, Hkv, end, Ev], data: rowsOf(VALUE, Hkv, Ev, 0, end) },
      { ...extra, isCausal: true, enableGqa: true, queryOffset: start },
    ); // [B, Hq, rows, Ev]
    const expected = rowsOf(whole, Hq, Ev, start, end);
    assert.equal(block.length, product([B, Hq, rows, Ev]));
    const differing = block.findIndex((x, n) => !Object.is(x, expected[n]));
    assert.equal(differing, -1, `rows ${start}..${end - 1}: element ${differing} differs`);
  }
}

const nested = (port: { scaledDotProductAttention: typeof readable.scaledDotProductAttention }): Run => {
  return (query, key, value, options) =>
    (port.scaledDotProductAttention(query, key, value, options) as number[][][][]).flat(3);
};

const flat = (
  entry: (q: FlatTensor, k: FlatTensor, v: FlatTensor, options: object) => FlatTensor,
  float32: boolean,
  workers?: number,
): Run => {
  const tensor = (t: Tensor): FlatTensor => ({
    shape: t.shape,
    data: float32 ? Float32Array.from(t.data) : Float64Array.from(t.data),
  });
  return (query, key, value, options) =>
    Array.from(
      entry(tensor(query), tensor(key), tensor(value), { ...options, ...(workers ? { workers } : {}) }).data,
    );
};

describe("a prefill and decode steps give the rows of one causal pass, bit for bit", () => {
  test("attention.ts", () => compareBlocks(nested(readable)));
  test("flash.ts, nested and flat (float64, and float32 storage)", () => {
    compareBlocks(nested(flash));
    compareBlocks(flat(flash.scaledDotProductAttentionFlat, false));
    compareBlocks(flat(flash.scaledDotProductAttentionFlat, true));
  });
  test("simd.ts, float64 and float32, one thread and two workers", () => {
    compareBlocks(nested(simd));
    for (const float32 of [false, true]) {
      compareBlocks(flat(simd.scaledDotProductAttentionFlat, float32));
      compareBlocks(flat(simd.scaledDotProductAttentionFlat, float32, 2));
    }
  });
  test("with a sliding window, sink tokens and sink logits: attention.ts, flash.ts, simd.ts", () => {
    compareBlocks(nested(readable), WINDOWED);
    compareBlocks(nested(flash), WINDOWED);
    compareBlocks(flat(flash.scaledDotProductAttentionFlat, true), WINDOWED);
    compareBlocks(nested(simd), WINDOWED);
    for (const float32 of [false, true]) {
      compareBlocks(flat(simd.scaledDotProductAttentionFlat, float32), WINDOWED);
      compareBlocks(flat(simd.scaledDotProductAttentionFlat, float32, 2), WINDOWED);
    }
  });
  test("the blocks are not trivially equal: queryOffset 0 (top-left) gives other rows", () => {
    // The same block with the top-left rule sees only keys j <= i - start: a different output, so
    // the equality above rests on the offset.
    const { start, rows } = BLOCKS[2];
    const end = start + rows;
    const run = nested(flash);
    const args = [
      { shape: [B, Hq, rows, E], data: rowsOf(QUERY, Hq, E, start, end) },
      { shape: [B, Hkv, end, E], data: rowsOf(KEY, Hkv, E, 0, end) },
      { shape: [B, Hkv, end, Ev], data: rowsOf(VALUE, Hkv, Ev, 0, end) },
    ] as [Tensor, Tensor, Tensor];
    const offset = run(...args, { isCausal: true, enableGqa: true, queryOffset: start });
    const topLeft = run(...args, { isCausal: true, enableGqa: true, queryOffset: 0 });
    assert.notDeepEqual(offset, topLeft);
  });
});
