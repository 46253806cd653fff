/**
 * Batch dims, heads, grouped-query heads and mask broadcasting: the bookkeeping the TypeScript
 * ports (attention.ts, flash.ts, simd.ts) share, so that each port only has to do attention on one
 * (batch, head) slice.
 *
 * Every checked tensor is flat and row-major (inputs.ts's toArray), so a (batch, head) slice is a
 * contiguous block that starts at an offset; this module says where each block starts. The mask
 * is the exception: it broadcasts numpy-style to the scores [B..., Hq, Lq, Lk], so it is read
 * through strides, with stride 0 on every dim it repeats along, and never copied to full size.
 *
 * Dimension letters: B... batch dims, Hq query heads, Hkv key/value heads, Lq queries, Lk keys,
 * E query/key features, Ev value features.
 */

import type { AttentionShapes, AttentionSteps, CheckedInputs, NestedArray } from "./inputs.ts";
import { product } from "./inputs.ts";
import { keyEnd, keyStart, type RowKeys, sinkKeyEnd } from "./key-range.ts";

/** Where one (batch, head) slice starts in each flat row-major tensor. */
export interface Slice {
  readonly index: number; // row-major index over the scores' outer dims [B..., Hq]
  readonly query: number; // query [Lq, E] starts here
  readonly key: number; // key [Lk, E] (the key/value head this query head reads)
  readonly value: number; // value [Lk, Ev]
  readonly output: number; // output [Lq, Ev]
  readonly scores: number; // any [Lq, Lk] step: scores, logits, weights
  readonly mask: number; // the mask cell (i = 0, j = 0) of this slice
  readonly maskI: number; // the mask's stride along Lq (0 when it broadcasts along Lq)
  readonly maskJ: number; // the mask's stride along Lk (0 when it broadcasts along Lk)
}

/** The strides to read a mask of `maskShape` as if it had the scores' shape: numpy broadcasting
 * aligns the shapes on the right, and a missing dim or a dim of size 1 has stride 0 (the same
 * cell repeats along it). */
export function broadcastStrides(maskShape: readonly number[], scoresShape: readonly number[]): number[] {
  const rank = scoresShape.length;
  const strides = new Array<number>(rank).fill(0); // laid against the scores' dims
  let stride = 1;
  for (let d = maskShape.length - 1; d >= 0; d--) {
    strides[rank - maskShape.length + d] = maskShape[d] === 1 ? 0 : stride;
    stride *= maskShape[d];
  }
  return strides;
}

/** Every (batch, head) slice, in row-major order of [B..., Hq]. */
export function slices(shapes: AttentionShapes, maskShape: readonly number[] | null): Slice[] {
  const { queryHeads: Hq, keyValueHeads: Hkv, queryLength: Lq, keyLength: Lk } = shapes;
  const { features: E, valueFeatures: Ev, groupSize } = shapes;
  const outer = shapes.scoresShape.slice(0, -2); // [B..., Hq] ([] for rank 2)
  const strides = maskShape === null ? [] : broadcastStrides(maskShape, shapes.scoresShape);
  const [maskI = 0, maskJ = 0] = strides.slice(-2);
  const result: Slice[] = [];
  const batchCount = product(shapes.batch); // B... flattened (1 for no batch dims)
  for (let b = 0; b < batchCount; b++) {
    for (let h = 0; h < Hq; h++) {
      const index = b * Hq + h;
      // Grouped-query attention: each key/value head serves groupSize consecutive query heads, so
      // query head h reads key/value head floor(h / groupSize) (torch's repeat_interleave).
      const kvIndex = b * Hkv + Math.floor(h / groupSize);

      let mask = 0; // sum over the outer dims of (index along that dim) x (mask stride)
      for (let d = outer.length - 1, rest = index; d >= 0 && strides.length > 0; d--) {
        mask += (rest % outer[d]) * strides[d];
        rest = Math.floor(rest / outer[d]);
      }
      result.push({
        index,
        query: index * Lq * E,
        key: kvIndex * Lk * E,
        value: kvIndex * Lk * Ev,
        output: index * Lq * Ev,
        scores: index * Lq * Lk,
        mask,
        maskI,
        maskJ,
      });
    }
  }
  return result;
}

/** Nested arrays of `shape` from items in row-major order, read from `offset`: flat numbers with
 * the tensor's whole shape (flash.ts, golden/reader.ts), or one [Lq, Lk] matrix per (batch, head) with
 * the outer shape [B..., Hq] (attention.ts; an empty shape gives the one matrix as it is, uncopied). */
export function nest<T>(items: ArrayLike<T>, shape: readonly number[], offset = 0): T | NestedOf<T> {
  if (shape.length === 0) {
    return items[offset];
  }
  if (shape.length === 1) {
    // Sized up front and filled by a loop: about twice as fast as push, and several times faster
    // than Array.from with a callback.
    const row = new Array<T>(shape[0]);
    for (let n = 0; n < shape[0]; n++) {
      row[n] = items[offset + n];
    }
    return row;
  }
  const result: (T | NestedOf<T>)[] = [];
  const inner = shape.slice(1);
  const size = product(inner);
  for (let n = 0; n < shape[0]; n++) {
    result.push(nest(items, inner, offset + n * size));
  }
  return result;
}

/** Arrays of T nested to any depth. */
export type NestedOf<T> = (T | NestedOf<T>)[];

/** The fast ports' flat steps (scores, logits and weights [B..., Hq, Lq, Lk], output
 * [B..., Hq, Lq, Ev]) as attentionSteps returns them: nested, with their shapes. */
export function nestSteps(
  steps: Readonly<Record<"scores" | "logits" | "weights" | "output", ArrayLike<number>>>,
  shapes: AttentionShapes,
): AttentionSteps {
  const { scoresShape, outputShape } = shapes;
  return {
    scores: nest(steps.scores, scoresShape) as NestedArray,
    logits: nest(steps.logits, scoresShape) as NestedArray,
    weights: nest(steps.weights, scoresShape) as NestedArray,
    output: nest(steps.output, outputShape) as NestedArray,
    scoresShape,
    outputShape,
  };
}

/** A decode step with grouped-query heads (one query row, Lq = 1, per head) as the tiled ports'
 * best case: the group's query heads, consecutive in memory ([B..., Hkv, group, E] is the same
 * memory as [B..., Hq, 1, E]), become the rows of one key/value slice, so each key and value is
 * read once per key/value head instead of once per query head, and a block holds `group` rows
 * instead of one. Only where no row can tell the difference: no mask, no sink logits (each is one
 * query head's), and the one row of each batch index sees a prefix of the keys, [0, end) (its
 * sinks, if any, reach its band's start: no window's gap; with isCausal, queryOffset >= Lk - 1
 * lets it see every key, and kvSeqlen ends the prefix early, a ragged batch's decode step). The
 * output [B..., Hkv, group, Ev] is the same memory as [B..., Hq, 1, Ev], and each row's arithmetic
 * is the same as unfolded (flash.ts and simd.ts order a row's work by the keys it sees alone).
 * Folded, the rows are heads, not positions: every one sees the same prefix, which the folded key
 * range says (start 0, end clamped to the prefix's end for every row). */
export function foldDecodeHeads<Problem extends CheckedInputs<Float64Array | Float32Array>>(
  problem: Problem,
): Problem {
  const { shapes, mask, keys } = problem;
  const { queryLength: Lq, groupSize, keyValueHeads: Hkv, keyLength: Lk, batch } = shapes;
  if (Lq !== 1 || groupSize === 1 || !shapes.hasHeads || mask !== null || problem.sinkLogits !== null) {
    return problem;
  }
  if (keys.batches.some((row) => keyStart(row, 0) > sinkKeyEnd(row, 0))) {
    return problem; // a window hides keys between the sinks and the band: no prefix
  }
  const rows = [...batch, Hkv, groupSize];
  const prefix = (row: RowKeys): RowKeys => {
    const end = keyEnd(row, 0);
    return { startShift: -groupSize, endShift: Lk, limit: end, sinkEnd: Math.min(row.sinkEnd, end) };
  };
  return {
    ...problem,
    isCausal: false,
    keys: { batches: keys.batches.map(prefix), heads: Hkv, keyLength: Lk },
    shapes: {
      ...shapes,
      queryHeads: Hkv,
      queryLength: groupSize,
      groupSize: 1,
      scoresShape: [...rows, Lk],
      outputShape: [...rows, shapes.valueFeatures],
    },
  };
}
