/**
 * My attention: scaled dot-product attention in its simplest form, the five steps of
 *
 *     attention(Q, K, V) = softmax(Q · Kᵀ / √d_k) · V
 *
 * on rank-2 inputs ([L, E] as number[][]) with no options. A starting point for your own
 * implementation: check it against the project's fixtures, level by level,
 *
 *     attention-port check typescript/examples/my-attention.ts
 *
 * then copy it and grow it one level at a time (docs/learn.md walks the levels).
 */

type Matrix = number[][];

/** matrix [R, C] -> [C, R]: row r, column c becomes row c, column r. */
function transpose(matrix: Matrix): Matrix {
  return matrix[0].map((_, c) => matrix.map((row) => row[c]));
}

/** a [R, T] · b [T, C] -> [R, C]: each cell is the dot product of a row of a and a column of b. */
function matMul(a: Matrix, b: Matrix): Matrix {
  return a.map((row) => b[0].map((_, c) => row.reduce((sum, x, t) => sum + x * b[t][c], 0)));
}

/** One row of numbers -> weights that are positive and sum to 1. */
function softmax(row: number[]): number[] {
  // Subtracting the row's max changes nothing mathematically, but keeps exp() from overflowing:
  // exp(1000) is Infinity in JavaScript, and Infinity / Infinity is NaN.
  const max = Math.max(...row);
  const exps = row.map((x) => Math.exp(x - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

/** query [Lq, E], key [Lk, E], value [Lk, Ev] -> output [Lq, Ev]. */
export function scaledDotProductAttention(query: Matrix, key: Matrix, value: Matrix): Matrix {
  const dK = query[0].length; // E, the feature size of queries and keys

  // Step 1: scores. How well each query matches each key: one dot product per pair.
  const scores = matMul(query, transpose(key)); // [Lq, E] · [E, Lk] -> [Lq, Lk]

  // Step 2: scale. A dot product of d_k terms grows like √d_k; dividing by it keeps the scores'
  // spread near 1, so softmax does not saturate on one key.
  const logits = scores.map((row) => row.map((s) => s / Math.sqrt(dK))); // [Lq, Lk]

  // Step 3: mask. Nothing to mask yet: the masks' levels add this step (a disallowed cell's logit
  // becomes -inf, so its weight is exactly 0).

  // Step 4: weights. Softmax over each row: each query's weights over the keys sum to 1.
  const weights = logits.map(softmax); // [Lq, Lk]

  // Step 5: output. Each query's output is the weighted average of the value rows.
  return matMul(weights, value); // [Lq, Lk] · [Lk, Ev] -> [Lq, Ev]
}

// `node typescript/examples/my-attention.ts` prints the tutorial's first example.
if (import.meta.main) {
  const Q = [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ];
  const V = [
    [1, 2],
    [3, 4],
    [5, 6],
  ];
  console.log(scaledDotProductAttention(Q, Q, V));
}
