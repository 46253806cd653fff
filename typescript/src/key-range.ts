/**
 * Which keys each query row may see: decided here, once, and read by every port.
 *
 * Row i of batch index b (the B... dims flattened) sees the keys
 *
 *     [0, sinkKeyEnd(i))  and  [start(i), end(i)),   end(i)   = clamp(i + endShift, 0, limit)
 *                                                    start(i) = clamp(i + startShift, 0, end(i))
 *                                                    sinkKeyEnd(i) = min(sinkEnd, end(i))
 *
 * from four integers per batch index (RowKeys), which keyRange derives from the checked options.
 * Row i sits at position p = i + o_b (o_b: queryOffset, or queryOffset[b] for a ragged batch).
 * With window [L, R], isCausal c, kvSeqlen n_b (Lk without it) and sinkTokens S:
 *  - endShift = o_b + 1 + min(R, 0 if c else inf): key j <= p + R, and j <= p with isCausal;
 *    with neither bound, every key (the shift clamps to Lk);
 *  - startShift = o_b - L: key j >= p - L; -Lq (every row from key 0) without a left side;
 *  - limit = n_b: no key from kvSeqlen[b] on;
 *  - sinkEnd = min(S, limit): keys 0..S-1 whatever the window's left side says, but a row sees a
 *    sink only where it sees up to it (sinkKeyEnd): isCausal, the window's right side and kvSeqlen
 *    still apply to sinks.
 * Without these options (isCausal and queryOffset alone), no row starts late, no key is a sink and
 * limit is Lk. Its twin is python/attention_port/key_range.py: the same record and the same names,
 * in snake_case.
 *
 * Why this shape:
 *  - A few numbers per batch index, not an interval per row: a row's bounds are one addition and
 *    two clamps, cheap enough for a kernel's inner loop, and nothing of size B... x Lq is made, even
 *    for a decode step over a long cache. The WebAssembly and WGSL kernels, which cannot import
 *    this module, are handed the four numbers of each (batch, head) slice and evaluate the formula
 *    above (keyStart, keyEnd and sinkKeyEnd); no kernel knows what isCausal or a window means.
 *  - Monotone: start(i), end(i) and sinkKeyEnd(i) never decrease as i grows, so the keys any row of
 *    a block of rows may see end at blockEnd(its last row), and begin, sinks aside, at the block's
 *    first start. A tiled port walks two segments, each tiled from its own first key: the sinks
 *    [0, sinkKeyEnd(last row)) and the band [keyStart(first row), blockEnd(last row)), masking the
 *    rest cell by cell; so its arithmetic depends only on the keys a row sees and their order.
 *    A skipped key still reaches a row through 0 · NaN, which the ports keep by noting each value
 *    column's non-finite keys.
 *  - Every per-sequence option lives here alone: a sliding window is the two shifts, sink tokens
 *    sinkEnd, per-batch key counts limit, a query offset per batch one pair of shifts per batch
 *    index. The kernels read the four numbers per slice and never the options.
 *  - Shifts are clamped to [-Lq, Lk]. That changes no row's bounds (i is in [0, Lq) and the bounds
 *    in [0, Lk]), and keeps every number, and i + shift, a 32-bit integer for the kernels.
 *
 * The oracle (python/attention_port/golden/oracle.py) decides the same thing on its own: it is
 * the truth the ports are held to, so it shares no code with them.
 */

import type { Integers } from "./generated/options.ts";

/** The sizes a key range is laid against: inputs.ts's AttentionShapes has them (and imports this
 * module, to hand every port its key range, so this one names them itself). */
export interface KeyRangeShapes {
  readonly batch: readonly number[]; // B...
  readonly queryHeads: number; // Hq
  readonly queryLength: number; // Lq
  readonly keyLength: number; // Lk
}

/** The keys the query rows of one batch index see (see the header for the formula). */
export interface RowKeys {
  readonly startShift: number; // start(i) = clamp(i + startShift, 0, end(i))
  readonly endShift: number; // end(i) = clamp(i + endShift, 0, limit)
  readonly limit: number; // no row sees a key from here on: kvSeqlen[b], or Lk
  readonly sinkEnd: number; // keys [0, sinkEnd) are sinks, seen up to sinkKeyEnd(i) (0: no sinks)
}

/** Each batch index's RowKeys, and how many (batch, head) slices share one. */
export interface KeyRange {
  readonly batches: readonly RowKeys[]; // [B...] flattened (one entry without batch dims)
  readonly heads: number; // Hq: consecutive slices of one batch index
  readonly keyLength: number; // Lk
}

export type { Integers };

/** The options that decide the key range, as the checks leave them. */
export interface KeyRangeOptions {
  readonly isCausal: boolean;
  readonly queryOffset?: Integers; // an integer from 0 to 2^53 - 1, or [B...] of them (default 0)
  readonly window?: readonly [number | null, number | null] | null; // [left, right]; null: no window
  readonly sinkTokens?: number; // an integer >= 0 (default 0)
  readonly kvSeqlen?: Integers | null; // each 0..Lk, or [B...] of them; null: Lk
}

/** The options of one batch index (queryOffset and kvSeqlen its own integers). */
export interface BatchKeyOptions extends Omit<KeyRangeOptions, "queryOffset" | "kvSeqlen"> {
  readonly queryOffset: number;
  readonly kvSeqlen?: number | null;
}

/** The key range of a call, from its checked options (inputs.ts's readOptions and the checks of
 * their shapes: queryOffset and kvSeqlen an integer or [B...] of them) and shapes. */
export function keyRange(options: KeyRangeOptions, shapes: KeyRangeShapes): KeyRange {
  const count = shapes.batch.reduce((a, n) => a * n, 1);
  const offsets = perBatch(options.queryOffset ?? 0, count); // o_b
  const lengths = perBatch(options.kvSeqlen ?? shapes.keyLength, count); // n_b
  return {
    batches: offsets.map((queryOffset, b) =>
      rowKeys({ ...options, queryOffset, kvSeqlen: lengths[b] }, shapes.queryLength, shapes.keyLength),
    ),
    heads: shapes.queryHeads,
    keyLength: shapes.keyLength,
  };
}

/** One integer per batch index (row-major over [B...]): one integer stands for every one. */
function perBatch(x: Integers, count: number): number[] {
  if (typeof x === "number") {
    return new Array<number>(count).fill(x);
  }
  const flat: number[] = [];
  const walk = (node: Integers): void => {
    if (typeof node === "number") {
      flat.push(node);
    } else {
      node.forEach(walk);
    }
  };
  walk(x);
  return flat;
}

/** The RowKeys of Lq query rows against Lk keys, from one batch index's checked options. */
export function rowKeys(options: BatchKeyOptions, Lq: number, Lk: number): RowKeys {
  const shift = (x: number) => Math.max(-Lq, Math.min(Lk, x)); // see the header: no bound changes
  const { isCausal, queryOffset, window = null, sinkTokens = 0, kvSeqlen = null } = options;
  const [left, right] = window ?? [null, null];
  // The last key row i may see is p + right, and p itself with isCausal (right >= 0 or unbounded).
  const ahead = [right, isCausal ? 0 : null].filter((bound) => bound !== null);
  const limit = kvSeqlen ?? Lk;
  return {
    startShift: left === null ? -Lq : shift(queryOffset - left), // keys j >= p - left
    endShift: ahead.length > 0 ? shift(queryOffset + 1 + Math.min(...ahead)) : Lk, // keys j <= p + min(ahead)
    limit,
    sinkEnd: Math.min(sinkTokens, limit),
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

/** Where the sinks row i sees end: min(sinkEnd, end(i)), since isCausal, the window's right side
 * and kvSeqlen hide a sink as they hide any key. Kernels read this, never sinkEnd alone. */
export function sinkKeyEnd(keys: RowKeys, i: number): number {
  return Math.min(keys.sinkEnd, keyEnd(keys, i));
}

/** Whether row i sees key j. */
export function seesKey(keys: RowKeys, i: number, j: number): boolean {
  return j < sinkKeyEnd(keys, i) || (keyStart(keys, i) <= j && j < keyEnd(keys, i));
}

/** Where the keys that rows up to `last` may see end (the bounds grow with the row; a row's sinks
 * end by its end(i)): a tiled port's block of rows, whose last row is `last`, need visit no key
 * from here on. */
export function blockEnd(keys: RowKeys, last: number): number {
  return keyEnd(keys, last);
}

/** Whether rows 0 .. rows - 1 of every batch index see every key: then no port skips a key, and a
 * decode step's rows (rows = 1) may be folded together (batching.ts's foldDecodeHeads). */
export function seesEveryKey(range: KeyRange, rows: number): boolean {
  const Lk = range.keyLength;
  return (
    rows === 0 ||
    range.batches.every(
      // The earliest end is row 0's, the latest start the last row's; the sinks may cover the start.
      (keys) => keyEnd(keys, 0) >= Lk && keyStart(keys, rows - 1) <= sinkKeyEnd(keys, rows - 1),
    )
  );
}
