/**
 * The readable TypeScript port of scaled dot-product attention.
 *
 *     output = softmax(query · keyᵀ · scale [+ mask]) · value
 *
 * Grown from the tutorial's `scaledDotProductAttention(Q, K, V)`: the same reading order (scores,
 * scale, mask, softmax, weighted sum) and the same names (`transpose`, `matMul`, `softmax`),
 * extended to the whole contract of torch.nn.functional.scaled_dot_product_attention. Its twin is
 * python/attention_port/reference.py: the same steps with the same labels, written here as plain
 * loops over number[][] that a JavaScript engineer can follow line by line.
 *
 * Dimension letters (DESIGN.md section 2):
 *     B...  leading batch dims (any number, equal across query, key and value)
 *     Hq    query heads             Hkv  key/value heads (Hq == Hkv unless enableGqa)
 *     Lq    query length (rows)     Lk   key/value length (the axis softmax runs over)
 *     E     query/key features      Ev   value features
 * Loop indices: b batch, h head, i query row, j key row, t feature.
 * Shapes: query [B..., Hq, Lq, E], key [B..., Hkv, Lk, E], value [B..., Hkv, Lk, Ev]
 *         -> output [B..., Hq, Lq, Ev]. Rank-2 inputs [L, E] are the tutorial's form: no batch, no heads.
 *
 * Layout: `attentionSteps` checks the inputs (inputs.ts) and walks the batch and head dims;
 * `attentionCore` does the five steps on one [Lq, E] query matrix against one [Lk, E] key matrix.
 */

import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionSteps,
  checkOptions,
  checkShapes,
  type FloatArray,
  indicesOf,
  type MaskArray,
  type MaskInput,
  type NestedArray,
  product,
  resolveScale,
  type TensorInput,
  toArray,
  toMaskArray,
} from "./inputs.ts";

export type { AttentionOptions, AttentionSteps, MaskInput, NestedArray, TensorInput };
export { AttentionInputError };

/** One (batch, head) slice of the mask, already broadcast to [Lq, Lk]. */
export type MaskMatrix =
  | { readonly dtype: "bool"; readonly cells: readonly (readonly boolean[])[] } // true = may attend
  | { readonly dtype: "float64"; readonly cells: readonly (readonly number[])[] }; // added to the logits

/** The five steps on one (batch, head) slice: every tensor [Lq, Lk] except output [Lq, Ev]. */
export interface CoreSteps {
  readonly scores: number[][];
  readonly logits: number[][];
  readonly weights: number[][];
  readonly output: number[][];
}

/** matrix [R, C] -> [C, R]. `columns` gives C when there is no row to read it from. */
export function transpose(
  matrix: readonly (readonly number[])[],
  columns = matrix[0]?.length ?? 0,
): number[][] {
  const result: number[][] = []; // [C, R]
  for (let c = 0; c < columns; c++) {
    result.push(matrix.map((row) => row[c]));
  }
  return result;
}

/** A [R, T] · B [T, C] -> [R, C], the plain triple loop. `columns` gives C when B has no row
 * (T = 0), so that the result still has R rows of C zeros. */
export function matMul(
  A: readonly (readonly number[])[],
  B: readonly (readonly number[])[],
  columns = B[0]?.length ?? 0,
): number[][] {
  const result: number[][] = []; // [R, C]
  for (const row of A) {
    const out = new Array<number>(columns);
    for (let c = 0; c < columns; c++) {
      let sum = 0;
      for (let t = 0; t < row.length; t++) {
        sum += row[t] * B[t][c];
      }
      out[c] = sum;
    }
    result.push(out);
  }
  return result;
}

/** Softmax of one row, stable, with a fully-masked row giving +0.0.
 *
 * Why subtract the row max: Math.exp(1000) overflows to Infinity and Infinity / Infinity is NaN,
 * but softmax is unchanged by shifting a row by a constant, so exp(x - max) (every exponent <= 0,
 * the largest exactly 0) gives the same weights without overflow.
 *
 * Why a fully-masked row needs care: its max is -Infinity, and -Infinity - (-Infinity) is NaN, so
 * the tutorial's softmax returns a row of NaN there. Such a row has no key to attend to; torch and
 * ONNX define its weights (and its output) as zero, and so do we.
 */
export function softmax(row: readonly number[]): number[] {
  let rowMax = -Infinity; // stays -Infinity for an empty row (Lk == 0): fully masked too
  for (const x of row) {
    rowMax = Math.max(rowMax, x); // Math.max, not `>`: a NaN cell makes the max NaN, as in numpy
  }
  if (rowMax === -Infinity) {
    return row.map(() => 0); // [Lk]  every cell masked: nothing to attend to
  }
  const exps = row.map((x) => Math.exp(x - rowMax)); // [Lk]  masked cells: exp(-Infinity) = 0
  let sum = 0; // >= 1: the max cell contributes exp(0) = 1
  for (const e of exps) {
    sum += e;
  }
  return exps.map((e) => e / sum); // [Lk]
}

/** Scaled dot-product attention, returning every step. Options as in torch, in camelCase. */
export function attentionSteps(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions = {},
): AttentionSteps {
  const { attnMask = null, isCausal = false, scale = null, enableGqa = false, softcap = 0 } = options;
  checkOptions(isCausal, scale, enableGqa, softcap);
  const q = toArray("query", query); // [B..., Hq, Lq, E]
  const k = toArray("key", key); // [B..., Hkv, Lk, E]
  const v = toArray("value", value); // [B..., Hkv, Lk, Ev]
  const mask = attnMask === null ? null : toMaskArray(attnMask); // broadcasts to the scores
  const shapes = checkShapes(q.shape, k.shape, v.shape, mask === null ? null : mask.shape, enableGqa);
  const scaleValue = resolveScale(scale, shapes.features);

  const { queryHeads: Hq, keyValueHeads: Hkv, queryLength: Lq, keyLength: Lk } = shapes;
  const { features: E, valueFeatures: Ev, groupSize } = shapes;
  const batchCount = product(shapes.batch); // B... flattened (1 for no batch dims)
  const slices: CoreSteps[] = []; // one per (b, h), in row-major order
  for (let b = 0; b < batchCount; b++) {
    for (let h = 0; h < Hq; h++) {
      // Grouped-query attention: each key/value head serves groupSize consecutive query heads, so
      // query head h reads key/value head floor(h / groupSize) (torch's repeat_interleave).
      const kvHead = Math.floor(h / groupSize);
      const queryMatrix = matrixAt(q, (b * Hq + h) * Lq * E, Lq, E); // [Lq, E]
      const keyMatrix = matrixAt(k, (b * Hkv + kvHead) * Lk * E, Lk, E); // [Lk, E]
      const valueMatrix = matrixAt(v, (b * Hkv + kvHead) * Lk * Ev, Lk, Ev); // [Lk, Ev]
      const outer = [...indicesOf(b, shapes.batch), ...(shapes.hasHeads ? [h] : [])]; // [B..., Hq] index
      const maskMatrix = mask === null ? null : maskMatrixAt(mask, shapes.scoresShape, outer); // [Lq, Lk]
      slices.push(
        attentionCore(queryMatrix, keyMatrix, valueMatrix, {
          mask: maskMatrix,
          isCausal,
          scale: scaleValue,
          softcap,
          valueFeatures: Ev,
        }),
      );
    }
  }

  const outerShape = shapes.scoresShape.slice(0, -2); // [B..., Hq] ([] for rank 2)
  return {
    scores: nest(
      slices.map((s) => s.scores),
      outerShape,
    ),
    logits: nest(
      slices.map((s) => s.logits),
      outerShape,
    ),
    weights: nest(
      slices.map((s) => s.weights),
      outerShape,
    ),
    output: nest(
      slices.map((s) => s.output),
      outerShape,
    ),
    scoresShape: shapes.scoresShape,
    outputShape: shapes.outputShape,
  };
}

/** The five steps for one (batch, head): query [Lq, E], key [Lk, E], value [Lk, Ev]. Inputs are
 * assumed checked (attentionSteps does that). `valueFeatures` is Ev, which value cannot tell when
 * it has no rows. */
export function attentionCore(
  query: readonly (readonly number[])[],
  key: readonly (readonly number[])[],
  value: readonly (readonly number[])[],
  options: {
    readonly mask: MaskMatrix | null;
    readonly isCausal: boolean;
    readonly scale: number;
    readonly softcap: number;
    readonly valueFeatures: number;
  },
): CoreSteps {
  const { mask, isCausal, scale, softcap, valueFeatures: Ev } = options;
  const Lk = key.length;

  // Step 1: scores. How well each query matches each key: a dot product per (query, key) pair.
  const scores = matMul(query, transpose(key), Lk); // [Lq, E] · [E, Lk] -> [Lq, Lk]

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
    for (let j = 0; j < Lk; j++) {
      let allowed = true;
      if (isCausal && j > i) {
        // Query i may look at keys j <= i only (top-left aligned, as torch does for Lq != Lk).
        allowed = false;
      }
      if (mask !== null && mask.dtype === "bool") {
        allowed &&= mask.cells[i][j]; // true = may attend
      } else if (mask !== null) {
        logits[i][j] += mask.cells[i][j]; // a numeric mask is added; -Infinity in it masks, a finite value is a bias
      }
      if (!allowed) {
        logits[i][j] = -Infinity; // never a sentinel like -1e9: that is just a number
      }
    }
  } // logits: [Lq, Lk]

  // Step 4: weights. Softmax over the keys turns each row of logits into a distribution.
  const weights = logits.map(softmax); // [Lq, Lk]

  // Step 5: output. Each query's output is the weights-average of the value rows.
  const output = matMul(weights, value, Ev); // [Lq, Lk] · [Lk, Ev] -> [Lq, Ev]
  // A fully-masked row's output is +0.0 by construction, even where value holds NaN or Infinity
  // (0 * NaN would be NaN): the row attends to nothing, so there is nothing to average.
  for (let i = 0; i < logits.length; i++) {
    if (logits[i].every((s) => s === -Infinity)) {
      output[i] = new Array<number>(Ev).fill(0); // [Ev]
    }
  }

  return { scores, logits, weights, output };
}

/** softmax(query · keyᵀ · scale [+ mask]) · value in float64, as
 * torch.nn.functional.scaled_dot_product_attention (without dropout). */
export function scaledDotProductAttention(
  query: readonly (readonly number[])[],
  key: readonly (readonly number[])[],
  value: readonly (readonly number[])[],
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

// ---- Slicing helpers: from the checked flat tensors to the nested arrays the steps read. ----

/** rows x cols values of a row-major tensor, from `offset`, as number[][]. */
function matrixAt(tensor: FloatArray, offset: number, rows: number, cols: number): number[][] {
  const matrix: number[][] = [];
  for (let r = 0; r < rows; r++) {
    matrix.push(Array.from(tensor.data.subarray(offset + r * cols, offset + (r + 1) * cols)));
  }
  return matrix;
}

/** The [Lq, Lk] slice of the mask at `outer` (an index into the scores' [B..., Hq] dims), with
 * numpy broadcasting: the mask is aligned on the right, and a missing dim or a dim of size 1
 * repeats (stride 0). */
function maskMatrixAt(mask: MaskArray, scoresShape: readonly number[], outer: readonly number[]): MaskMatrix {
  const rank = scoresShape.length;
  const offset = rank - mask.shape.length;
  const strides = new Array<number>(rank).fill(0); // the mask's strides, laid against the scores' dims
  let stride = 1;
  for (let d = mask.shape.length - 1; d >= 0; d--) {
    strides[offset + d] = mask.shape[d] === 1 ? 0 : stride;
    stride *= mask.shape[d];
  }
  let base = 0;
  outer.forEach((index, d) => {
    base += index * strides[d];
  });
  const [Lq, Lk] = scoresShape.slice(-2);
  const [strideI, strideJ] = strides.slice(-2);
  const at = (i: number, j: number) => base + i * strideI + j * strideJ;
  if (mask.dtype === "bool") {
    const data = mask.data;
    return { dtype: "bool", cells: grid(Lq, Lk, (i, j) => data[at(i, j)]) };
  }
  const data = mask.data;
  return { dtype: "float64", cells: grid(Lq, Lk, (i, j) => data[at(i, j)]) };
}

function grid<T>(rows: number, cols: number, cell: (i: number, j: number) => T): T[][] {
  return Array.from({ length: rows }, (_, i) => Array.from({ length: cols }, (_, j) => cell(i, j)));
}

/** Matrices in row-major order of the outer dims -> nested arrays of shape [...outer, rows, cols]. */
function nest(matrices: number[][][], outer: readonly number[]): NestedArray {
  if (outer.length === 0) {
    return matrices[0];
  }
  const size = product(outer.slice(1));
  return Array.from({ length: outer[0] }, (_, n) =>
    nest(matrices.slice(n * size, (n + 1) * size), outer.slice(1)),
  );
}

// The tutorial's example: `node typescript/src/attention.ts` prints a 3 x 2 result.
if (import.meta.main) {
  const Q = [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ];
  const K = [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ];
  const V = [
    [1, 2],
    [3, 4],
    [5, 6],
  ];
  console.log(scaledDotProductAttention(Q, K, V)); // 3 x 2
}
