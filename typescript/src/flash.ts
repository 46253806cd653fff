/**
 * The fast TypeScript port of scaled dot-product attention, built the way FlashAttention is.
 *
 *     output = softmax(query · keyᵀ · scale [+ mask]) · value
 *
 * Same contract, same public API and same errors as the readable port (attention.ts); read that
 * file first. This one computes the same numbers in a different order, and each difference is
 * there to make it faster or smaller:
 *
 *  1. Flat Float64Array storage, row-major, instead of number[][]: one contiguous block per tensor,
 *     no per-row objects to chase, and loads V8 compiles to plain machine loads.
 *  2. No transpose: scores[i][j] is the dot product of query row i and key row j, and both rows lie
 *     contiguous in memory as given, so the key matrix is never copied into [E, Lk].
 *  3. Online softmax: the [Lq, Lk] scores and weights matrices are never made. Keys are visited
 *     once, in tiles, and each query row keeps only a running max m, a running sum l and an
 *     accumulator acc [Ev] (see `softmaxTile`). Memory is O(Lq x Ev + tile), not O(Lq x Lk), and
 *     the output needs one pass over the keys instead of three (scores, softmax, weights · value).
 *  4. Tiles: QUERY_BLOCK query rows are processed against one tile of KEY_TILE keys at a time, so a
 *     key tile and its value tile (KEY_TILE x E and KEY_TILE x Ev doubles, 64 KiB for E = Ev = 64)
 *     are loaded from memory once and then reused by every row of the block from cache.
 *  5. Register blocking: the inner loops take 2 query rows x 4 keys at a time with 8 separate
 *     accumulators. Each loaded number is used 2 or 4 times (fewer loads per multiply-add), and the
 *     8 sums do not wait on each other, so the CPU overlaps them.
 *  6. Tile skipping: a row sees its sinks [0, sinkKeyEnd) and its band [keyStart, keyEnd)
 *     (key-range.ts; with isCausal, up to its position i + queryOffset; with a window, from
 *     i + queryOffset - left). A block walks those two segments alone, each a tile at a time from
 *     its own first key; every other tile is masked for every row of the block and never computed
 *     (about half the work for causal self-attention; a windowed prefill costs O(Lq x window), a
 *     windowed decode step O(window)).
 *  7. The mask is read in place through strides (a broadcast dim has stride 0): no [B..., Hq, Lq,
 *     Lk] copy is made. Grouped-query heads are index arithmetic too: no repeated key/value.
 *  8. Normalisation once per row: acc / l at the end, instead of dividing every weight by the sum.
 *     acc can overflow where the readable port's sums do not (|value| near the largest double);
 *     such a row is computed again the readable port's way (`normalisedRow`), so both ports give
 *     the answer the contract defines.
 *  9. Monomorphic kernels: every kernel sees Float64Array only (Float32Array inputs of the flat
 *     entry point are widened once), so V8 compiles one fast version of each loop.
 *
 * Row independence: the order of each row's arithmetic depends only on the keys it sees and their
 * order, not on which other rows share its call or its block, nor on where its keys sit. Its sinks
 * are tiled from key 0 and its band from its own first key (rows of a block whose bands start
 * apart, as a sliding window's do, walk them apart), the weighted sum adds keys in groups of 4
 * from the tile's start whatever the tile's length (a short last group is summed as a whole one
 * whose missing keys weigh 0), and the keys a tile holds that a row may not see (key-range.ts) are
 * masked for that row: they add exactly 0 to its running sums. So the rows of one causal pass and
 * the same rows computed a few at a time with queryOffset set to their first row's position (a
 * prefill, then decode steps) are bit for bit equal, and so is a row against a key tensor holding
 * only its sinks and its band.
 *
 * Sink logits: a head's sink logit s is one more logit without a value. The online softmax starts
 * with it (m = s, l = exp(s - m) = 1, acc = 0), so the weights sum to less than 1; a row that sees
 * no key still gives exactly +0.0.
 *
 * Numerics: the scores and the scaled/masked logits are bitwise those of the readable port (the
 * same dot products summed in the same order); the softmax and the weighted sum are rounded in a
 * different order, so the output differs in the last bits, well inside the tolerance rule of
 * docs/design.md (section 5). Special values are the readable port's: a NaN logit (or sink logit)
 * makes its row NaN, NaN (or an infinity) in value reaches every row that is not fully masked
 * (0 * NaN is NaN, even for a key the row cannot see: where a row skipped keys and value holds one,
 * the row is computed again the readable port's way), and a fully-masked row is exactly +0.0.
 *
 * `attentionSteps` also returns scores, logits and weights [B..., Hq, Lq, Lk]: a diagnostic-only
 * path for teaching and for the fixture harness, which costs the O(Lq x Lk) memory the fast path
 * avoids. It records scores and logits as the tiles are computed and derives the weights at the
 * end from each row's final running max and sum. Its output is the fast path's output.
 *
 * Dimension letters (as in attention.ts and docs/design.md, section 2):
 *     B...  leading batch dims          Hq, Hkv  query heads, key/value heads
 *     Lq    query length (rows)          Lk       key/value length (the axis softmax runs over)
 *     E     query/key features           Ev       value features
 *     Br    QUERY_BLOCK, query rows per block       Bc  KEY_TILE, keys per tile
 * Loop indices: b batch, h head, i query row, j key row, t feature; r row in a block, c key in a tile.
 * Shapes: query [B..., Hq, Lq, E], key [B..., Hkv, Lk, E], value [B..., Hkv, Lk, Ev]
 *         -> output [B..., Hq, Lq, Ev].
 */

import { TUTORIAL_EXAMPLE } from "./attention.ts";
import { foldDecodeHeads, nestSteps, type Slice, slices } from "./batching.ts";
import { entriesOf } from "./entries.ts";
import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionShapes,
  type AttentionSteps,
  type CheckedInputs,
  checkFlatInputs,
  checkInputs,
  checkSize,
  type FlatAttentionOptions,
  type FlatTensor,
  formatShape,
  type KernelMask,
  product,
  type TensorInput,
} from "./inputs.ts";
import {
  type KeyRange,
  keyEnd,
  keyStart,
  type RowKeys,
  seesEveryKey,
  sinkKeyEnd,
  sliceKeys,
} from "./key-range.ts";

export * from "./port-exports.ts";

/** Bc: keys per tile. A key tile and its value tile (Bc x E and Bc x Ev doubles) stay in cache
 * while every row of a query block reads them. A multiple of 4 (the register blocking). */
export const KEY_TILE = 64;
/** Br: query rows per block. The block's scores tile [Br, Bc] and accumulators [Br, Ev] are the
 * only scratch memory. A multiple of 2 (the register blocking). */
export const QUERY_BLOCK = 32;

// ---- Public entry points: entries.ts's three, over this kernel. ----

const entries = entriesOf({ attend: tiledOutput, attentionSteps: tiledSteps, attendFlat: tiledFlatOutput });

/** softmax(query · keyᵀ · scale [+ mask]) · value in float64, as attention.ts (nested arrays or
 * shaped tensors in, nested arrays out), computed with tiles and an online softmax. */
export const scaledDotProductAttention = entries.scaledDotProductAttention;

/** Every step, as attention.ts returns them. Diagnostic only: scores, logits and weights are
 * [B..., Hq, Lq, Lk], the O(Lq x Lk) memory that scaledDotProductAttention never needs. */
export const attentionSteps = entries.attentionSteps;

/** The fast path on flat row-major typed arrays with explicit shapes. The output has the storage
 * type of query.data (Float32Array in, Float32Array out); arithmetic is always in doubles. */
export const scaledDotProductAttentionFlat = entries.scaledDotProductAttentionFlat;

/** scaledDotProductAttention's work: the output, flat. */
function tiledOutput(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions = {},
): FlatTensor {
  const problem = checkInputs(query, key, value, options);
  checkOutputSize(problem.shapes, problem.memoryLimit);
  const output = attend(problem, null); // [B..., Hq, Lq, Ev]
  return { shape: problem.shapes.outputShape, data: output };
}

/** attentionSteps's work. */
function tiledSteps(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
): AttentionSteps {
  const problem = checkInputs(query, key, value, options);
  checkSize(problem.shapes, problem.memoryLimit); // the readable port's rule: scores, logits and weights
  const { scoresShape } = problem.shapes;
  const rowCount = product(scoresShape.slice(0, -1)); // B... x Hq x Lq
  const recording: Recording = {
    scores: new Float64Array(product(scoresShape)), // [B..., Hq, Lq, Lk]
    logits: new Float64Array(product(scoresShape)), // [B..., Hq, Lq, Lk]
    rowMax: new Float64Array(rowCount), // [B..., Hq, Lq]  final running max m
    rowSum: new Float64Array(rowCount), // [B..., Hq, Lq]  final running sum l
  };
  const output = attend(problem, recording); // [B..., Hq, Lq, Ev]

  // weights = exp(logits - m) / l, with the row's final m and l: the softmax the online recurrence
  // computed implicitly, written out. A fully-masked row (m = -Infinity) has weights +0.0.
  const Lk = problem.shapes.keyLength;
  const weights = new Float64Array(recording.logits.length); // [B..., Hq, Lq, Lk]
  for (let row = 0; row < rowCount; row++) {
    const m = recording.rowMax[row];
    if (m === -Infinity) {
      continue; // stays +0.0
    }
    const l = recording.rowSum[row];
    for (let j = row * Lk; j < (row + 1) * Lk; j++) {
      weights[j] = Math.exp(recording.logits[j] - m) / l;
    }
  }
  return nestSteps({ ...recording, weights, output }, problem.shapes);
}

/** scaledDotProductAttentionFlat's work. */
function tiledFlatOutput(
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options?: FlatAttentionOptions,
): FlatTensor {
  const checked = checkFlatInputs(query, key, value, options);
  // A Float32Array is widened once to doubles, natively, so the kernels stay monomorphic.
  const widen = (x: Float64Array | Float32Array) => (x instanceof Float64Array ? x : new Float64Array(x));
  const { shapes } = checked;
  checkOutputSize(shapes, checked.memoryLimit);
  const problem = {
    ...checked,
    query: widen(checked.query),
    key: widen(checked.key),
    value: widen(checked.value),
  };
  const output = attend(problem, null); // [B..., Hq, Lq, Ev]
  const data = query.data instanceof Float32Array ? new Float32Array(output) : output; // rounded once
  return { shape: shapes.outputShape, data };
}

// ---- Checking: inputs.ts's checkInputs and checkFlatInputs, in the readable port's order. ----

/** Everything the kernels need, checked (float64 tensors only). */
type Problem = CheckedInputs;

/** The fast path holds the output and one block's scratch (a tile, the running sums and the
 * accumulator), never the [Lq, Lk] steps: refuse, before allocating, what exceeds memoryLimit. */
function checkOutputSize(shapes: AttentionShapes, memoryLimit: number): void {
  const Ev = shapes.valueFeatures;
  const needed = 8 * (product(shapes.outputShape) + QUERY_BLOCK * (KEY_TILE + 2 + Ev));
  if (needed > memoryLimit) {
    throw new AttentionInputError(
      "size",
      `the output ${formatShape(shapes.outputShape)} and one tile need ${String(needed)} bytes,` +
        ` more than memoryLimit = ${String(memoryLimit)}; pass a larger memoryLimit to compute them`,
    );
  }
}

// ---- The driver: batch and heads, one slice at a time. ----

/** Steps kept for attentionSteps (diagnostic only). Offsets follow the scores' row-major order. */
interface Recording {
  readonly scores: Float64Array; // [B..., Hq, Lq, Lk]  Step 1
  readonly logits: Float64Array; // [B..., Hq, Lq, Lk]  Steps 2-3
  readonly rowMax: Float64Array; // [B..., Hq, Lq]      final m per query row
  readonly rowSum: Float64Array; // [B..., Hq, Lq]      final l per query row
}

/** Scratch for one query block, allocated once per call: O(Br x Bc + Br x Ev + Ev). */
interface Scratch {
  readonly tile: Float64Array; // [Br, Bc]  scores, then logits, then exp(logit - m)
  readonly rowMax: Float64Array; // [Br]  m: the largest logit seen so far in each row, the sink's included
  readonly rowSum: Float64Array; // [Br]  l: sum of exp(logit - m) over the keys seen so far, and the sink's
  readonly keyMax: Float64Array; // [Br]  the largest logit of a key (the sink aside): -Infinity while none is seen
  readonly acc: Float64Array; // [Br, Ev]  sum of exp(logit - m) * value row, over the keys seen
  readonly nonFinite: Uint8Array; // [Ev]  1 where some key row's value is NaN or ±Infinity, per column
}

/** Scores the last call computed in its tiles (rows x keys of each tile): the work its tile
 * skipping left, for the tests that hold it to O(Lq x window). */
let cellsScored = 0;

/** How many (query row, key) scores the last call of this module computed in its tiles; the tiles
 * it skipped are not among them (nor a row computed again plainly). For the tests. */
export function scoredCells(): number {
  return cellsScored;
}

/** The whole computation; returns the output [B..., Hq, Lq, Ev]. */
function attend(given: Problem, recording: Recording | null): Float64Array {
  cellsScored = 0;
  const problem = foldDecodeHeads(given); // a decode step's query heads as rows of their kv head
  const { shapes, mask } = problem;
  const Ev = shapes.valueFeatures;
  const output = new Float64Array(product(shapes.outputShape)); // [B..., Hq, Lq, Ev]
  const scratch: Scratch = {
    tile: new Float64Array(QUERY_BLOCK * KEY_TILE), // [Br, Bc]
    rowMax: new Float64Array(QUERY_BLOCK), // [Br]
    rowSum: new Float64Array(QUERY_BLOCK), // [Br]
    keyMax: new Float64Array(QUERY_BLOCK), // [Br]
    acc: new Float64Array(QUERY_BLOCK * Ev), // [Br, Ev]
    nonFinite: new Uint8Array(Ev), // [Ev]
  };
  const range: KeyRange = problem.keys; // which keys each row sees (the checks decided it)
  // Where some row skips keys, a NaN or an infinity in a skipped key's value must still reach it
  // (the readable port multiplies it by the weight 0): such rows are computed again (normalisedRow).
  const skips = !seesEveryKey(range, shapes.queryLength);
  const sinkLogits = problem.sinkLogits;
  // One (batch, head) slice at a time; batching.ts says where each starts, grouped-query heads
  // and the mask's broadcast strides included.
  for (const at of slices(shapes, mask === null ? null : mask.shape)) {
    const sink = sinkLogits === null ? -Infinity : sinkLogits[at.index % shapes.queryHeads];
    attendSlice(problem, scratch, recording, at, sliceKeys(range, at.index), sink, skips, output);
  }
  return output;
}

/** Where row i's band starts: its keys [keyStart, keyEnd) past the sinks it sees, which the sink
 * segment has already taken (a key in both is seen once). */
function bandStart(keys: RowKeys, i: number): number {
  return Math.max(keyStart(keys, i), sinkKeyEnd(keys, i));
}

/** One (batch, head): query [Lq, E] against key [Lk, E] and value [Lk, Ev] -> output [Lq, Ev],
 * a block of Br query rows at a time. `keys` says which keys each of its rows sees, `sink` is the
 * head's sink logit (-Infinity for none).
 *
 * A block walks two segments of keys, each a tile of Bc at a time from its own first key: the
 * sinks [0, sinkKeyEnd), then the band [bandStart, keyEnd). Every other tile is skipped: a windowed
 * prefill costs O(Lq x window), a windowed decode step O(window). Rows of a block whose bands start
 * at different keys (a sliding window moves by one key a row) walk their bands apart, each from its
 * own start, so that a row's arithmetic depends only on the keys it sees and their order: the same
 * bits in a prefill, one decode step at a time, or against a cache that holds only those keys. */
function attendSlice(
  problem: Problem,
  scratch: Scratch,
  recording: Recording | null,
  at: Slice,
  keys: RowKeys,
  sink: number,
  skips: boolean,
  output: Float64Array,
): void {
  const { value } = problem;
  const { queryLength: Lq, keyLength: Lk, valueFeatures: Ev } = problem.shapes;
  const { rowMax, rowSum, keyMax, acc, nonFinite } = scratch;
  nonFinite.fill(0);
  if (skips) {
    for (let j = 0; j < Lk; j++) {
      for (let t = 0; t < Ev; t++) {
        const y = value[at.value + j * Ev + t];
        if (y - y !== 0) {
          nonFinite[t] = 1; // y - y is NaN exactly when y is NaN or ±Infinity
        }
      }
    }
  }
  // The sink's share of the denominator, exp(s - m) with m = s: 1, or 0 for no sink (-Infinity,
  // shifted by 0 as softmaxTile does); NaN or +Infinity make it NaN, and the row with it.
  const sinkSum = Math.exp(sink - (sink === -Infinity ? 0 : sink));

  for (let i0 = 0; i0 < Lq; i0 += QUERY_BLOCK) {
    const rows = Math.min(QUERY_BLOCK, Lq - i0); // this block: query rows i0 .. i0 + rows - 1
    const last = i0 + rows - 1;
    rowMax.fill(sink, 0, rows); // m starts at the sink logit: the online softmax's first term
    rowSum.fill(sinkSum, 0, rows); // l = exp(s - m)
    keyMax.fill(-Infinity, 0, rows); // no key's logit seen yet
    acc.fill(0, 0, rows * Ev); // acc = 0: the sink has no value
    if (recording !== null) {
      recordRows(problem, recording, at, i0, rows); // the cells no tile computes
    }
    // The sinks: one segment from key 0 for every row of the block (the rows' ends grow with the
    // row, so the last row's is the block's).
    walkTiles(problem, scratch, recording, at, keys, i0, 0, rows, 0, sinkKeyEnd(keys, last), "sinks");
    // The band: rows with the same start walk it together, from that start.
    for (let r0 = 0; r0 < rows; ) {
      const start = bandStart(keys, i0 + r0);
      let r1 = r0 + 1;
      while (r1 < rows && bandStart(keys, i0 + r1) === start) {
        r1++;
      }
      walkTiles(problem, scratch, recording, at, keys, i0, r0, r1, start, keyEnd(keys, i0 + r1 - 1), "band");
      r0 = r1;
    }

    // Finish the block: output = acc / l, the normalisation done once per row.
    for (let r = 0; r < rows; r++) {
      const i = i0 + r;
      const out = at.output + i * Ev; // output row i [Ev]
      if (recording !== null) {
        recording.rowMax[at.index * Lq + i] = rowMax[r];
        recording.rowSum[at.index * Lq + i] = rowSum[r];
      }
      if (keyMax[r] === -Infinity) {
        // Every key's logit was -Infinity (or Lk = 0): the row attends to no key (with a sink, all
        // its weight is the sink's, which has no value), and its output is +0.0 by the contract
        // (already there: the output starts as zeros), whatever the sink and value hold.
        continue;
      }
      const l = rowSum[r]; // >= 1: the row's largest logit contributes exp(0) = 1
      let finite = true;
      let reaches = false; // a column's NaN or infinity (in a key this row may have skipped)
      for (let t = 0; t < Ev; t++) {
        // `+ 0` turns a -0.0 (from an underflowed negative acc) into +0.0, as the readable port's
        // sum, which starts at +0.0, gives.
        output[out + t] = acc[r * Ev + t] / l + 0;
        finite &&= Number.isFinite(output[out + t]);
        reaches ||= nonFinite[t] === 1;
      }
      if ((!finite || reaches) && Number.isFinite(rowMax[r])) {
        normalisedRow(problem, scratch.tile, at, keys, i, rowMax[r], l, output, out);
      }
    }
  }
}

/** Rows r0 .. r1 - 1 of the block at i0 against one segment of keys, [from, to), a tile of Bc at a
 * time from `from`: scores, logits, the online softmax and the weighted sum. `part` says which of
 * a row's keys the segment holds (masked cell by cell: the rows' sinks, or their bands). */
function walkTiles(
  problem: Problem,
  scratch: Scratch,
  recording: Recording | null,
  at: Slice,
  keys: RowKeys,
  i0: number,
  r0: number,
  r1: number,
  from: number,
  to: number,
  part: "sinks" | "band",
): void {
  const { query, key, value, scale, softcap, mask } = problem;
  const { keyLength: Lk, features: E, valueFeatures: Ev } = problem.shapes;
  const { tile } = scratch;
  const rows = r1 - r0;
  const first = i0 + r0; // the first row of the run
  // The run's share of the block's running sums (views, not copies).
  const rowMax = r0 === 0 ? scratch.rowMax : scratch.rowMax.subarray(r0);
  const rowSum = r0 === 0 ? scratch.rowSum : scratch.rowSum.subarray(r0);
  const keyMax = r0 === 0 ? scratch.keyMax : scratch.keyMax.subarray(r0);
  const acc = r0 === 0 ? scratch.acc : scratch.acc.subarray(r0 * Ev);
  for (let j0 = from; j0 < to; j0 += KEY_TILE) {
    const cols = Math.min(KEY_TILE, to - j0); // this tile: keys j0 .. j0 + cols - 1
    // Step 1: scores for the tile [rows, cols], query rows · key rows.
    scoreTile(query, at.query + first * E, rows, key, at.key + j0 * E, cols, E, tile);
    cellsScored += rows * cols;
    if (recording !== null) {
      copyTile(tile, rows, cols, recording.scores, at.scores + first * Lk + j0, Lk);
    }
    // Steps 2-3: scale, softcap, mask: the tile becomes softmax's input (logits).
    logitTile(tile, rows, cols, first, j0, scale, softcap, keys, part, mask, at);
    if (recording !== null) {
      copyTile(tile, rows, cols, recording.logits, at.scores + first * Lk + j0, Lk);
    }
    // Step 4, online: update m, l and acc for the tile; the tile becomes exp(logit - m).
    softmaxTile(tile, rows, cols, rowMax, rowSum, keyMax, acc, Ev);
    // Step 5, online: acc += exp(logit - m) · value rows of the tile.
    accumulateTile(tile, rows, cols, value, at.value + j0 * Ev, Ev, acc);
  }
}

/** Query row i again, the readable port's way: each weight exp(logit - m) / l first (m and l the
 * online pass's, the sink's share included), then their sum times the value rows of every key,
 * into output[out .. out + Ev).
 *
 * The contract defines the output wherever the exact result is representable, and the readable
 * port's sums, whose weights are already divided by the row sum, stay within the values' own size.
 * acc does not: it sums exp(logit - m) * value before dividing by l, so with |value| near the
 * largest double it can overflow (to Infinity, or NaN once rescaled by alpha = 0) where the exact
 * output is an ordinary number. A row whose output is not finite while its max is (a NaN or +inf
 * logit would make the row NaN anyway) is computed again here, and so is a row that skipped keys
 * where some value is NaN or infinite (the readable port's weight 0 times it is NaN); this costs
 * one more pass over every key for that row only, and gives what the readable port gives. */
function normalisedRow(
  problem: Problem,
  tile: Float64Array, // scratch [Br, Bc]; this uses its first row
  at: Slice,
  keys: RowKeys,
  i: number,
  m: number,
  l: number,
  output: Float64Array,
  out: number,
): void {
  const { query, key, value, scale, softcap, mask } = problem;
  const { keyLength: Lk, features: E, valueFeatures: Ev } = problem.shapes;
  output.fill(0, out, out + Ev);
  for (let j0 = 0; j0 < Lk; j0 += KEY_TILE) {
    const cols = Math.min(KEY_TILE, Lk - j0);
    scoreTile(query, at.query + i * E, 1, key, at.key + j0 * E, cols, E, tile);
    logitTile(tile, 1, cols, i, j0, scale, softcap, keys, "row", mask, at);
    for (let c = 0; c < cols; c++) {
      const weight = Math.exp(tile[c] - m) / l; // the row's weight on key j0 + c
      const v = at.value + (j0 + c) * Ev;
      for (let t = 0; t < Ev; t++) {
        output[out + t] += weight * value[v + t];
      }
    }
  }
}

// ---- The kernels: each loop over one tile, on Float64Array only. ----

/** tile[r][c] = query row (i0 + r) · key row (j0 + c), for r < rows, c < cols.
 *
 * Register blocking: 2 query rows x 4 keys per pass over t, with 8 separate sums. Each query value
 * loaded is used 4 times and each key value twice, and the 8 sums are independent, so the loop is
 * not one long chain of dependent additions. Each sum runs over t in order from 0, as in the
 * readable port's matMul, so the scores are bitwise the same. */
function scoreTile(
  query: Float64Array,
  q0: number, // offset of query row i0; rows follow every E
  rows: number,
  key: Float64Array,
  k0: number, // offset of key row j0; rows follow every E
  cols: number,
  E: number,
  tile: Float64Array, // [Br, Bc]
): void {
  let r = 0;
  for (; r + 1 < rows; r += 2) {
    const qa = q0 + r * E; // query row i0 + r
    const qb = qa + E; // query row i0 + r + 1
    const sa = r * KEY_TILE;
    const sb = sa + KEY_TILE;
    let c = 0;
    for (; c + 3 < cols; c += 4) {
      const ka = k0 + c * E; // key rows j0 + c .. j0 + c + 3
      const kb = ka + E;
      const kc = kb + E;
      const kd = kc + E;
      let s00 = 0,
        s01 = 0,
        s02 = 0,
        s03 = 0; // row a x keys 0..3
      let s10 = 0,
        s11 = 0,
        s12 = 0,
        s13 = 0; // row b x keys 0..3
      for (let t = 0; t < E; t++) {
        const x0 = query[qa + t];
        const x1 = query[qb + t];
        const y0 = key[ka + t];
        const y1 = key[kb + t];
        const y2 = key[kc + t];
        const y3 = key[kd + t];
        s00 += x0 * y0;
        s01 += x0 * y1;
        s02 += x0 * y2;
        s03 += x0 * y3;
        s10 += x1 * y0;
        s11 += x1 * y1;
        s12 += x1 * y2;
        s13 += x1 * y3;
      }
      tile[sa + c] = s00;
      tile[sa + c + 1] = s01;
      tile[sa + c + 2] = s02;
      tile[sa + c + 3] = s03;
      tile[sb + c] = s10;
      tile[sb + c + 1] = s11;
      tile[sb + c + 2] = s12;
      tile[sb + c + 3] = s13;
    }
    for (; c < cols; c++) {
      const ka = k0 + c * E;
      let s0 = 0,
        s1 = 0;
      for (let t = 0; t < E; t++) {
        const y = key[ka + t];
        s0 += query[qa + t] * y;
        s1 += query[qb + t] * y;
      }
      tile[sa + c] = s0;
      tile[sb + c] = s1;
    }
  }
  if (r < rows) {
    // The odd last row: 1 x 4, then 1 x 1.
    const qa = q0 + r * E;
    const sa = r * KEY_TILE;
    let c = 0;
    for (; c + 3 < cols; c += 4) {
      const ka = k0 + c * E;
      const kb = ka + E;
      const kc = kb + E;
      const kd = kc + E;
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0;
      for (let t = 0; t < E; t++) {
        const x = query[qa + t];
        s0 += x * key[ka + t];
        s1 += x * key[kb + t];
        s2 += x * key[kc + t];
        s3 += x * key[kd + t];
      }
      tile[sa + c] = s0;
      tile[sa + c + 1] = s1;
      tile[sa + c + 2] = s2;
      tile[sa + c + 3] = s3;
    }
    for (; c < cols; c++) {
      const ka = k0 + c * E;
      let s = 0;
      for (let t = 0; t < E; t++) {
        s += query[qa + t] * key[ka + t];
      }
      tile[sa + c] = s;
    }
  }
}

/** Steps 2-3 on a tile, in place: scores -> scaled, softcapped, masked logits. The same operations
 * in the same order as the readable port, cell by cell. */
function logitTile(
  tile: Float64Array, // [Br, Bc]
  rows: number,
  cols: number,
  i0: number,
  j0: number,
  scale: number,
  softcap: number,
  keys: RowKeys,
  part: "sinks" | "band" | "row",
  mask: KernelMask | null,
  at: Slice,
): void {
  for (let r = 0; r < rows; r++) {
    const i = i0 + r; // query row
    const row = r * KEY_TILE;
    for (let c = 0; c < cols; c++) {
      tile[row + c] *= scale; // Step 2: scale (1/sqrt(E) by default; see attention.ts)
    }
    if (softcap > 0) {
      for (let c = 0; c < cols; c++) {
        tile[row + c] = softcap * Math.tanh(tile[row + c] / softcap); // squashed into (-softcap, softcap)
      }
    }
    // Step 3: mask, read in place through its strides. A float mask is added; a false cell of a
    // boolean mask becomes -Infinity (never a sentinel like -1e9).
    const cell = at.mask + i * at.maskI + j0 * at.maskJ; // the mask at (i, j0)
    if (mask?.bool) {
      for (let c = 0; c < cols; c++) {
        if (mask.bool[cell + c * at.maskJ] === 0) {
          tile[row + c] = -Infinity;
        }
      }
    } else if (mask?.float) {
      for (let c = 0; c < cols; c++) {
        tile[row + c] += mask.float[cell + c * at.maskJ]; // -Infinity masks; a finite value is a bias
      }
    }
    // Row i sees its sinks [0, sinkKeyEnd) and its band [bandStart, keyEnd) only (key-range.ts;
    // with isCausal, j <= i + queryOffset), and of those only the ones of this segment (`part`):
    // the other cells are masked whatever the mask said, and a mask can only mask more.
    const sinks = (part === "band" ? 0 : sinkKeyEnd(keys, i)) - j0; // cells before it are sinks
    const [from, to] = part === "sinks" ? [sinks, sinks] : [bandStart(keys, i) - j0, keyEnd(keys, i) - j0];
    for (let c = Math.max(sinks, 0); c < Math.min(from, cols); c++) {
      tile[row + c] = -Infinity; // past the sinks, before the band
    }
    for (let c = Math.max(to, sinks, 0); c < cols; c++) {
      tile[row + c] = -Infinity; // from the band's end on
    }
  }
}

/** Step 4 for a tile, online: the softmax recurrence. In place, logits become p = exp(logit - m).
 *
 * The full softmax of a row is exp(x_j - M) / L with M the row's max and L = sum_j exp(x_j - M).
 * Seen a tile at a time, each row keeps:
 *     m    the largest logit so far (the M of the keys seen),
 *     l    sum of exp(x_j - m) over the keys seen,
 *     acc  sum of exp(x_j - m) * value_j over the keys seen ([Ev]; accumulateTile adds to it).
 * When a tile brings a larger max m_new, every term already summed was taken relative to m_old,
 * and exp(x - m_new) = exp(x - m_old) * exp(m_old - m_new): so l and acc are multiplied by
 * alpha = exp(m_old - m_new) (<= 1, no overflow), then the tile's terms are added. After the last
 * tile m = M, l = L, and the output is acc / l. */
function softmaxTile(
  tile: Float64Array, // [Br, Bc]
  rows: number,
  cols: number,
  rowMax: Float64Array, // [Br] m
  rowSum: Float64Array, // [Br] l
  keyMax: Float64Array, // [Br] the largest key logit so far
  acc: Float64Array, // [Br, Ev]
  Ev: number,
): void {
  for (let r = 0; r < rows; r++) {
    const row = r * KEY_TILE;
    let tileMax = -Infinity;
    for (let c = 0; c < cols; c++) {
      tileMax = Math.max(tileMax, tile[row + c]); // Math.max, not `>`: a NaN logit makes m NaN, so its row is NaN
    }
    keyMax[r] = Math.max(keyMax[r], tileMax);
    const mOld = rowMax[r];
    const mNew = Math.max(mOld, tileMax);
    // The reference the exponents are taken from. While every logit so far is -Infinity, mNew is
    // -Infinity and exp(-Infinity - (-Infinity)) would be NaN; taking 0 instead gives
    // exp(-Infinity - 0) = 0 for every cell (right: they are masked) and alpha = 0 below.
    const shift = mNew === -Infinity ? 0 : mNew;
    let tileSum = 0;
    for (let c = 0; c < cols; c++) {
      const p = Math.exp(tile[row + c] - shift); // <= 1; masked cells: exp(-Infinity) = 0
      tile[row + c] = p;
      tileSum += p;
    }
    if (mNew !== mOld) {
      // The max grew (or became NaN): rescale what was summed relative to mOld. With mOld =
      // -Infinity, alpha = exp(-Infinity) = 0, and l and acc were 0 anyway (acc may hold NaN from
      // 0 * NaN in value, which stays NaN as it must).
      const alpha = Math.exp(mOld - shift);
      rowSum[r] = rowSum[r] * alpha + tileSum; // l_new = l_old * alpha + sum of the tile's p
      for (let t = r * Ev; t < (r + 1) * Ev; t++) {
        acc[t] *= alpha; // acc_new = acc_old * alpha (+ the tile's p · value, in accumulateTile)
      }
      rowMax[r] = mNew;
    } else {
      rowSum[r] += tileSum; // same max: alpha would be exp(0) = 1, nothing to rescale
    }
  }
}

/** Step 5 for a tile, online: acc[r] += sum over c of p[r][c] * value row (j0 + c).
 *
 * Register blocking: 2 rows x 4 keys per pass over t. Each value number loaded serves both rows,
 * and each row's 4 products are summed before touching acc, so acc is loaded and stored once per
 * 4 keys. Every p is used, even p = 0 (a masked key): 0 * NaN is NaN, as in the readable port.
 * A last group of 1 to 3 keys is summed in the same order as a whole group whose missing keys
 * weigh 0 ((p0 y0 + p1 y1) + p2 y2), so a row gets the same bits from a shorter tile. */
function accumulateTile(
  tile: Float64Array, // [Br, Bc] p
  rows: number,
  cols: number,
  value: Float64Array,
  v0: number, // offset of value row j0; rows follow every Ev
  Ev: number,
  acc: Float64Array, // [Br, Ev]
): void {
  let r = 0;
  for (; r + 1 < rows; r += 2) {
    const pa = r * KEY_TILE; // p of row r
    const pb = pa + KEY_TILE; // p of row r + 1
    const aa = r * Ev; // acc of row r
    const ab = aa + Ev; // acc of row r + 1
    let c = 0;
    for (; c + 3 < cols; c += 4) {
      const p0 = tile[pa + c],
        p1 = tile[pa + c + 1],
        p2 = tile[pa + c + 2],
        p3 = tile[pa + c + 3];
      const q0 = tile[pb + c],
        q1 = tile[pb + c + 1],
        q2 = tile[pb + c + 2],
        q3 = tile[pb + c + 3];
      const va = v0 + c * Ev; // value rows j0 + c .. j0 + c + 3
      const vb = va + Ev;
      const vc = vb + Ev;
      const vd = vc + Ev;
      for (let t = 0; t < Ev; t++) {
        const y0 = value[va + t];
        const y1 = value[vb + t];
        const y2 = value[vc + t];
        const y3 = value[vd + t];
        acc[aa + t] += p0 * y0 + p1 * y1 + (p2 * y2 + p3 * y3);
        acc[ab + t] += q0 * y0 + q1 * y1 + (q2 * y2 + q3 * y3);
      }
    }
    if (c < cols) {
      const left = cols - c; // 1, 2 or 3 keys: one group with the missing keys weighing 0
      const p0 = tile[pa + c],
        p1 = left > 1 ? tile[pa + c + 1] : 0,
        p2 = left > 2 ? tile[pa + c + 2] : 0;
      const q0 = tile[pb + c],
        q1 = left > 1 ? tile[pb + c + 1] : 0,
        q2 = left > 2 ? tile[pb + c + 2] : 0;
      const va = v0 + c * Ev;
      const vb = left > 1 ? va + Ev : va; // a missing key's row: read, weighted 0, never summed in
      const vc = left > 2 ? vb + Ev : va;
      for (let t = 0; t < Ev; t++) {
        const y0 = value[va + t];
        const y1 = left > 1 ? value[vb + t] : 0;
        const y2 = left > 2 ? value[vc + t] : 0;
        acc[aa + t] += p0 * y0 + p1 * y1 + p2 * y2;
        acc[ab + t] += q0 * y0 + q1 * y1 + q2 * y2;
      }
    }
  }
  if (r < rows) {
    const pa = r * KEY_TILE;
    const aa = r * Ev;
    let c = 0;
    for (; c + 3 < cols; c += 4) {
      const p0 = tile[pa + c],
        p1 = tile[pa + c + 1],
        p2 = tile[pa + c + 2],
        p3 = tile[pa + c + 3];
      const va = v0 + c * Ev;
      const vb = va + Ev;
      const vc = vb + Ev;
      const vd = vc + Ev;
      for (let t = 0; t < Ev; t++) {
        acc[aa + t] += p0 * value[va + t] + p1 * value[vb + t] + (p2 * value[vc + t] + p3 * value[vd + t]);
      }
    }
    if (c < cols) {
      const left = cols - c; // 1, 2 or 3 keys, as above
      const p0 = tile[pa + c],
        p1 = left > 1 ? tile[pa + c + 1] : 0,
        p2 = left > 2 ? tile[pa + c + 2] : 0;
      const va = v0 + c * Ev;
      for (let t = 0; t < Ev; t++) {
        const y1 = left > 1 ? value[va + Ev + t] : 0;
        const y2 = left > 2 ? value[va + 2 * Ev + t] : 0;
        acc[aa + t] += p0 * value[va + t] + p1 * y1 + p2 * y2;
      }
    }
  }
}

// ---- Diagnostic-only helpers for attentionSteps. ----

/** tile [rows, cols] -> the recording's [Lq, Lk] at `offset` (rows `stride` apart). */
function copyTile(
  tile: Float64Array,
  rows: number,
  cols: number,
  target: Float64Array,
  offset: number,
  stride: number,
): void {
  for (let r = 0; r < rows; r++) {
    target.set(tile.subarray(r * KEY_TILE, r * KEY_TILE + cols), offset + r * stride);
  }
}

/** Rows i0 .. i0 + rows - 1 before their tiles: every score, plainly, and every logit -Infinity.
 * The tiles then write the cells they compute; the others are the ones the fast path skips, which
 * no row of the block sees, whatever the score or the mask. */
function recordRows(problem: Problem, recording: Recording, at: Slice, i0: number, rows: number): void {
  const { query, key } = problem;
  const { keyLength: Lk, features: E } = problem.shapes;
  for (let i = i0; i < i0 + rows; i++) {
    for (let j = 0; j < Lk; j++) {
      let s = 0;
      for (let t = 0; t < E; t++) {
        s += query[at.query + i * E + t] * key[at.key + j * E + t];
      }
      recording.scores[at.scores + i * Lk + j] = s;
      recording.logits[at.scores + i * Lk + j] = -Infinity;
    }
  }
}

// `node typescript/src/flash.ts` prints the tutorial's example's 3 x 2 result, through the fast port.
if (import.meta.main) {
  const { query, key, value } = TUTORIAL_EXAMPLE;
  console.log(scaledDotProductAttention(query, key, value)); // 3 x 2
}
