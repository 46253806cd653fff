/**
 * Scaled dot-product attention in TypeScript, written to be read: plain loops over number[][].
 *
 *     output = softmax(query · keyᵀ · scale [+ mask]) · value
 *
 * Part 1 (this screen and the next) is the lesson: attention for one head, in the five steps the
 * Python reference (python/attention_port/reference.py) labels the same way. It grew from the
 * tutorial chapter "Attention 机制" of the Chinese-language course "Transformer 工程实战", whose
 * TypeScript version for JavaScript engineers had `transpose`, `matMul`, `softmax` and
 * `scaledDotProductAttention(Q, K, V)`; they keep its simple signatures here.
 * Part 2, below it, extends it to the whole contract of
 * torch.nn.functional.scaled_dot_product_attention: input checks, batch dims, heads and
 * grouped-query heads (see docs/design.md). Its imports stand at its start, not above the lesson,
 * though the lesson reads one of them: key-range.ts, which decides which keys each row may see.
 *
 * Dimension letters:
 *     Lq    query length (rows)     Lk   key/value length (the axis softmax runs over)
 *     E     query/key features      Ev   value features
 *     B...  batch dims, Hq query heads, Hkv key/value heads (Part 2 only)
 * Loop indices: i query row, j key row, t feature.
 */

// ---- Part 1: attention for one head. ----

type Matrix = readonly (readonly number[])[];

/** matrix [R, C] -> [C, R]. */
export function transpose(matrix: Matrix): number[][] {
  const columns = matrix[0]?.length ?? 0;
  const result: number[][] = []; // [C, R]
  for (let c = 0; c < columns; c++) {
    result.push(matrix.map((row) => row[c]));
  }
  return result;
}

/** A [R, T] · B [T, C] -> [R, C], the plain triple loop. */
export function matMul(A: Matrix, B: Matrix): number[][] {
  const columns = B[0]?.length ?? 0;
  return A.map((row) => {
    const out = new Array<number>(columns); // [C]
    for (let c = 0; c < columns; c++) {
      let sum = 0;
      for (let t = 0; t < row.length; t++) {
        sum += row[t] * B[t][c];
      }
      out[c] = sum;
    }
    return out;
  });
}

/** Softmax of one row, stable, with a fully-masked row giving +0.0; `sinkLogit` (the head's, or
 * null) joins the row's max and sum without a value.
 *
 * Why subtract the row max: Math.exp(1000) overflows to Infinity and Infinity / Infinity is NaN,
 * but softmax is unchanged by shifting a row by a constant, so exp(x - max) (every exponent <= 0,
 * the largest exactly 0) gives the same weights without overflow.
 *
 * Why a fully-masked row needs care: its max is -Infinity, and -Infinity - (-Infinity) is NaN, so
 * the tutorial's softmax returns a row of NaN there. Such a row has no key to attend to; torch and
 * ONNX define its weights (and its output) as zero, and so do we (whatever its sink).
 *
 * A sink logit s is one more logit with no value: the max is max(s, the row's), the sum gains
 * exp(s - max), so the row's weights sum to less than 1. It follows the logits' rules: NaN or
 * Infinity makes the row NaN (Infinity - Infinity), -Infinity adds exp(-Infinity) = 0, nothing.
 */
export function softmax(row: readonly number[], sinkLogit: number | null = null): number[] {
  let rowMax = -Infinity; // stays -Infinity for an empty row (Lk == 0): fully masked too
  for (const x of row) {
    rowMax = Math.max(rowMax, x); // Math.max, not `>`: a NaN cell makes the max NaN, as in numpy
  }
  if (rowMax === -Infinity) {
    return row.map(() => 0); // [Lk]  every cell masked: nothing to attend to
  }
  if (sinkLogit !== null) {
    rowMax = Math.max(rowMax, sinkLogit); // the sink joins the max (a NaN sink makes it NaN)
  }
  const exps = row.map((x) => Math.exp(x - rowMax)); // [Lk]  masked cells: exp(-Infinity) = 0
  const sum = exps.reduce((a, e) => a + e, 0); // >= 1 without a sink: the max cell contributes exp(0) = 1
  const sinkShare = sinkLogit === null ? 0 : Math.exp(sinkLogit - rowMax); // the sink's part, no value
  return exps.map((e) => e / (sum + sinkShare)); // [Lk]
}

/** Options for one head; Part 2 fills them from the user's options. */
export interface HeadOptions {
  /** [Lq, Lk]: true = may attend, or a number added to the logit (-Infinity masks). */
  readonly mask?: readonly (readonly (boolean | number)[])[] | null;
  /** Query i may attend to key j only when j <= i + queryOffset. */
  readonly isCausal?: boolean;
  /** The position of query row 0 among the keys (0: top-left). */
  readonly queryOffset?: number;
  /** A sliding window [left, right]: row i at p = i + queryOffset sees keys p - left .. p + right. */
  readonly window?: readonly [number | null, number | null] | null;
  /** Keys 0..sinkTokens-1 stay visible whatever the window's left side says. */
  readonly sinkTokens?: number;
  /** Keys from kvSeqlen on are hidden (null: every key). */
  readonly kvSeqlen?: number | null;
  /** Which keys each query row may see (key-range.ts); given, it stands for the five options above. */
  readonly keys?: RowKeys;
  /** The head's sink logit, which joins softmax without a value (null: none). */
  readonly sinkLogit?: number | null;
  /** Multiplies the scores; defaults to 1/sqrt(E). */
  readonly scale?: number;
  /** If > 0, logits become softcap * tanh(logits / softcap). */
  readonly softcap?: number;
}

/** The five steps for one head: every tensor [Lq, Lk] except output [Lq, Ev]. */
export interface HeadSteps {
  readonly scores: number[][];
  readonly logits: number[][];
  readonly weights: number[][];
  readonly output: number[][];
}

/** Attention for one head: query [Lq, E], key [Lk, E], value [Lk, Ev]. */
export function attentionHead(
  query: Matrix,
  key: Matrix,
  value: Matrix,
  options: HeadOptions = {},
): HeadSteps {
  const E = query[0]?.length ?? 0;
  const { mask = null, isCausal = false, queryOffset = 0, scale = 1 / Math.sqrt(E), softcap = 0 } = options;
  const { sinkLogit = null } = options;
  const keys = options.keys ?? rowKeys({ ...options, isCausal, queryOffset }, query.length, key.length);

  // Step 1: scores. How well each query matches each key: a dot product per (query, key) pair.
  const scores = matMul(query, transpose(key)); // [Lq, E] · [E, Lk] -> [Lq, Lk]

  // Step 2: scale. A dot product of E terms of unit variance has variance E, so raw scores grow
  // like sqrt(E) and push softmax into saturation (one weight near 1, tiny gradients elsewhere).
  // Multiplying by 1/sqrt(E) brings the spread back to about 1 whatever E is.
  let logits = scores.map((row) => row.map((s) => s * scale)); // [Lq, Lk]
  if (softcap > 0) {
    // Softcap squashes the logits smoothly into (-softcap, softcap) before softmax.
    logits = logits.map((row) => row.map((s) => softcap * Math.tanh(s / softcap))); // [Lq, Lk]
  }

  // Step 3: mask. A disallowed cell becomes -Infinity, so exp() makes its weight exactly 0.
  for (let i = 0; i < logits.length; i++) {
    for (let j = 0; j < logits[i].length; j++) {
      // key-range.ts decides which keys each row sees. With isCausal, query i sits at position
      // i + queryOffset and may look at keys j <= i + queryOffset only (offset 0 is torch's
      // top-left rule; a decode step after P cached keys has offset P). A window [left, right] shows
      // it keys p - left .. p + right of its position p, the sink tokens besides; kvSeqlen hides
      // every key from kvSeqlen[b] on.
      const visible = seesKey(keys, i, j);
      const cell = mask === null ? true : mask[i][j];
      if (cell === false || !visible) {
        logits[i][j] = -Infinity; // never a sentinel like -1e9: that is just a number
      } else if (typeof cell === "number") {
        logits[i][j] += cell; // a numeric mask is added: -Infinity in it masks, a finite value is a bias
      }
    }
  } // logits: [Lq, Lk]

  // Step 4: weights. Softmax over the keys turns each row of logits into a distribution; a sink
  // logit takes a share of it and gives no value back.
  const weights = logits.map((row) => softmax(row, sinkLogit)); // [Lq, Lk]

  // Step 5: output. Each query's output is the weights-average of the value rows.
  // A fully-masked row's output is +0.0 by construction, even where value holds NaN or Infinity
  // (0 * NaN would be NaN): the row attends to nothing, so there is nothing to average.
  const output = matMul(weights, value).map((row, i) =>
    logits[i].every((x) => x === -Infinity) ? row.map(() => 0) : row,
  ); // [Lq, Lk] · [Lk, Ev] -> [Lq, Ev]

  return { scores, logits, weights, output };
}

// ---- Part 2: the whole contract. Checks, batch dims, heads and grouped-query heads. ----
//
// Shapes: query [B..., Hq, Lq, E], key [B..., Hkv, Lk, E], value [B..., Hkv, Lk, Ev]
//         -> output [B..., Hq, Lq, Ev]. Rank-2 inputs [L, E] are Part 1's form: no batch, no heads.

import { nest, type Slice, slices } from "./batching.ts";
import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionSteps,
  checkOptionShapes,
  checkShapes,
  checkSize,
  ERROR_KINDS,
  type ErrorKind,
  type MaskArray,
  type MaskInput,
  type NestedArray,
  readOptions,
  resolveScale,
  type TensorInput,
  toArray,
  toMaskArray,
} from "./inputs.ts";
import { keyRange, type RowKeys, rowKeys, seesKey, sliceKeys } from "./key-range.ts";

export type { AttentionOptions, AttentionSteps, ErrorKind, MaskInput, NestedArray, TensorInput };
export { AttentionInputError, ERROR_KINDS };

/** Scaled dot-product attention, returning every step. Options as in torch, in camelCase. */
export function attentionSteps(
  query: Matrix,
  key: Matrix,
  value: Matrix,
  options?: AttentionOptions,
): AttentionSteps<number[][]>;
export function attentionSteps(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
): AttentionSteps;
export function attentionSteps(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
): AttentionSteps {
  const checked = readOptions<MaskInput>(options);
  const { attnMask, scale, enableGqa, softcap, sinkLogits, memoryLimit } = checked;
  const q = toArray("query", query, memoryLimit); // [B..., Hq, Lq, E]
  const k = toArray("key", key, memoryLimit); // [B..., Hkv, Lk, E]
  const v = toArray("value", value, memoryLimit); // [B..., Hkv, Lk, Ev]
  const mask = attnMask === null ? null : toMaskArray(attnMask, memoryLimit); // broadcasts to the scores
  const shapes = checkShapes(q.shape, k.shape, v.shape, mask === null ? null : mask.shape, enableGqa);
  checkOptionShapes(checked, shapes, q.shape, k.shape); // sinkLogits [Hq], kvSeqlen [B...]
  checkSize(shapes, memoryLimit); // before the [B..., Hq, Lq, Lk] steps are allocated
  const { queryLength: Lq, keyLength: Lk, features: E, valueFeatures: Ev, queryHeads: Hq } = shapes;
  const headOptions = { softcap, scale: resolveScale(scale, E) };
  // Which keys each row sees: isCausal, queryOffset, window, sinkTokens and kvSeqlen, per batch index.
  const range = keyRange(checked, shapes);

  const steps: HeadSteps[] = []; // one per (batch, head), in row-major order
  for (const at of slices(shapes, mask === null ? null : mask.shape)) {
    const head = attentionHead(
      rowsOf(q.data, at.query, Lq, E), // [Lq, E]
      rowsOf(k.data, at.key, Lk, E), // [Lk, E]
      rowsOf(v.data, at.value, Lk, Ev), // [Lk, Ev]
      {
        ...headOptions,
        keys: sliceKeys(range, at.index), // the keys each row of this slice sees
        mask: mask === null ? null : maskOf(mask, at, Lq, Lk), // [Lq, Lk]
        sinkLogit: sinkLogits === null ? null : sinkLogits[at.index % Hq], // this head's
      },
    );
    // With no key (Lk = 0), value has no row to tell Ev: every row is fully masked, so zeros.
    const output = Lk === 0 ? head.output.map(() => new Array<number>(Ev).fill(0)) : head.output;
    steps.push({ ...head, output });
  }
  const outer = shapes.scoresShape.slice(0, -2); // [B..., Hq] ([] for rank 2: the one head's steps)
  const gather = (name: keyof HeadSteps) =>
    nest(
      steps.map((s) => s[name]),
      outer,
    ) as NestedArray;
  return {
    scores: gather("scores"),
    logits: gather("logits"),
    weights: gather("weights"),
    output: gather("output"),
    scoresShape: shapes.scoresShape,
    outputShape: shapes.outputShape,
  };
}

/** softmax(query · keyᵀ · scale [+ mask]) · value in float64, as
 * torch.nn.functional.scaled_dot_product_attention (without dropout). */
export function scaledDotProductAttention(
  query: Matrix,
  key: Matrix,
  value: Matrix,
  options?: AttentionOptions,
): number[][];
export function scaledDotProductAttention(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
): NestedArray;
export function scaledDotProductAttention(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions = {},
): NestedArray {
  return attentionSteps(query, key, value, options).output;
}

/** rows x cols numbers of a flat row-major tensor, from `offset`, as number[][]. */
function rowsOf(data: Float64Array, offset: number, rows: number, cols: number): number[][] {
  return Array.from({ length: rows }, (_, r) =>
    Array.from(data.subarray(offset + r * cols, offset + (r + 1) * cols)),
  );
}

/** The [Lq, Lk] mask of one (batch, head) slice, read through its broadcast strides. */
function maskOf(mask: MaskArray, at: Slice, Lq: number, Lk: number): HeadOptions["mask"] {
  const data: ArrayLike<boolean | number> = mask.data; // booleans or numbers, as the mask holds
  return Array.from({ length: Lq }, (_, i) =>
    Array.from({ length: Lk }, (_, j) => data[at.mask + i * at.maskI + j * at.maskJ]),
  ); // [Lq, Lk]
}

/** The tutorial's example: three queries that are also the keys, and two value features. */
export const TUTORIAL_EXAMPLE = {
  query: [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ],
  key: [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ],
  value: [
    [1, 2],
    [3, 4],
    [5, 6],
  ],
};

// `node typescript/src/attention.ts` prints the tutorial's example's 3 x 2 result.
if (import.meta.main) {
  const { query, key, value } = TUTORIAL_EXAMPLE;
  console.log(scaledDotProductAttention(query, key, value)); // 3 x 2
}
