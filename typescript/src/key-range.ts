/**
 * Which keys each query row may see: decided here, once, and read by every port.
 *
 * Row i of batch index b (the B... dims flattened) sees the keys
 *
 *     [0, sinkEnd)  and  [start(i), end(i)),   end(i)   = clamp(i + endShift, 0, limit)
 *                                              start(i) = clamp(i + startShift, 0, end(i))
 *
 * from four integers per batch index (RowKeys), which keyRange derives from the checked options.
 * Today: with isCausal, query i sits at position i + queryOffset and sees the keys
 * j <= i + queryOffset, so endShift = queryOffset + 1; without it every row sees every key. No row
 * starts late (startShift = -Lq), no key is a sink (sinkEnd = 0) and limit is Lk. Its twin is
 * python/attention_port/key_range.py: the same record and the same names, in snake_case.
 *
 * Why this shape:
 *  - A few numbers per batch index, not an interval per row: a row's bounds are one addition and
 *    two clamps, cheap enough for a kernel's inner loop, and nothing of size B... x Lq is made, even
 *    for a decode step over a long cache. The WebAssembly and WGSL kernels, which cannot import
 *    this module, are handed the four numbers of each (batch, head) slice and evaluate the formula
 *    above (keyStart and keyEnd); no kernel knows what isCausal means.
 *  - Monotone: start(i) and end(i) never decrease as i grows, so the keys any row of a block of
 *    rows may see end at blockEnd(its last row). The tiled ports walk their key tiles from 0 to
 *    there and mask the rest cell by cell; a skipped key still reaches a row through 0 · NaN, which
 *    the ports keep by noting each value column's last non-finite key. (Skipping the tiles before a
 *    block's first start too would need each column's first non-finite key as well.)
 *  - Room for what comes next, in this module alone: a sliding window (left, right) is
 *    startShift = queryOffset - left and endShift = queryOffset + right + 1; sink tokens are
 *    sinkEnd; per-batch key counts kv_seqlen[b] are limit; a query offset per batch is one pair of
 *    shifts per batch index. The ports already read all four, per slice.
 *  - Shifts are clamped to [-Lq, Lk]. That changes no row's bounds (i is in [0, Lq) and the bounds
 *    in [0, Lk]), and keeps every number, and i + shift, a 32-bit integer for the kernels.
 *
 * The oracle (python/attention_port/golden/oracle.py) decides the same thing on its own: it is
 * the truth the ports are held to, so it shares no code with them.
 */

import type { AttentionShapes } from "./inputs.ts";
import { product } from "./inputs.ts";

/** The keys the query rows of one batch index see (see the header for the formula). */
export interface RowKeys {
  readonly startShift: number; // start(i) = clamp(i + startShift, 0, end(i))
  readonly endShift: number; // end(i) = clamp(i + endShift, 0, limit)
  readonly limit: number; // no row sees a key from here on, sinks aside (Lk today)
  readonly sinkEnd: number; // every row sees keys [0, sinkEnd) (0 today: no sinks)
}

/** Each batch index's RowKeys, and how many (batch, head) slices share one. */
export interface KeyRange {
  readonly batches: readonly RowKeys[]; // [B...] flattened (one entry without batch dims)
  readonly heads: number; // Hq: consecutive slices of one batch index
  readonly keyLength: number; // Lk
}

/** The options that decide the key range, as the checks leave them. */
export interface KeyRangeOptions {
  readonly isCausal: boolean;
  readonly queryOffset: number; // an integer from 0 to 2^53 - 1
}

/** The key range of a call, from its checked options and shapes. */
export function keyRange(options: KeyRangeOptions, shapes: AttentionShapes): KeyRange {
  const keys = rowKeys(options, shapes.queryLength, shapes.keyLength); // the same for every batch index
  return {
    batches: new Array<RowKeys>(product(shapes.batch)).fill(keys),
    heads: shapes.queryHeads,
    keyLength: shapes.keyLength,
  };
}

/** The RowKeys of Lq query rows against Lk keys, from the checked options. */
export function rowKeys(options: KeyRangeOptions, Lq: number, Lk: number): RowKeys {
  const shift = (x: number) => Math.max(-Lq, Math.min(Lk, x)); // see the header: no bound changes
  return {
    startShift: -Lq, // start(i) = 0 for every row
    endShift: options.isCausal ? shift(options.queryOffset + 1) : Lk, // causal: keys j <= i + queryOffset
    limit: Lk,
    sinkEnd: 0,
  };
}

/** The RowKeys of (batch, head) slice `index` (row-major over [B..., Hq], batching.ts's Slice.index). */
export function sliceKeys(range: KeyRange, index: number): RowKeys {
  return range.batches[Math.floor(index / range.heads)];
}

/** end(i): row i sees no key from here on, sinks aside. */
export function keyEnd(keys: RowKeys, i: number): number {
  return Math.min(keys.limit, Math.max(0, i + keys.endShift));
}

/** start(i): row i sees no key before it, sinks aside. */
export function keyStart(keys: RowKeys, i: number): number {
  return Math.min(keyEnd(keys, i), Math.max(0, i + keys.startShift));
}

/** Whether row i sees key j. */
export function seesKey(keys: RowKeys, i: number, j: number): boolean {
  return j < keys.sinkEnd || (keyStart(keys, i) <= j && j < keyEnd(keys, i));
}

/** Where the keys that rows up to `last` may see end (the bounds grow with the row): a tiled port's
 * block of rows, whose last row is `last`, need visit no key from here on. */
export function blockEnd(keys: RowKeys, last: number): number {
  return Math.max(keys.sinkEnd, keyEnd(keys, last));
}

/** Whether rows 0 .. rows - 1 of every batch index see every key: then no port skips a key, and a
 * decode step's rows (rows = 1) may be folded together (batching.ts's foldDecodeHeads). */
export function seesEveryKey(range: KeyRange, rows: number): boolean {
  const Lk = range.keyLength;
  return (
    rows === 0 ||
    range.batches.every(
      // The latest start is the last row's, the earliest end row 0's; the sinks may cover the start.
      (keys) => keys.sinkEnd >= Lk || (keyStart(keys, rows - 1) <= keys.sinkEnd && keyEnd(keys, 0) >= Lk),
    )
  );
}
