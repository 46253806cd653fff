/**
 * What the explorer's layer view and RoPE view show, without the DOM (so that tests run it in Node).
 *
 * The layer view walks one seeded example through the six steps of the layer lessons (layer.ts and
 * layer.py): project, split heads, rotate, attend, merge heads, out-project. The output and each
 * head's weights are the project's layer's own (multiHeadAttention with needWeights); the
 * intermediate matrices it shows on the way are read off the same inputs, each head attended by
 * attention.ts, and `walkLayer` checks that they end in the layer's output.
 *
 * The RoPE view turns one query and one key by positions 0..L-1 (applyRotary, the lesson's) and
 * shows their dot products: equal along every diagonal, since a rotation by m·θ against one by
 * n·θ leaves only the angle (m − n)·θ between them.
 */

import { attentionSteps } from "../src/attention.ts";
import { applyRotary, type LayerResult, multiHeadAttention, type RopeOptions } from "../src/layer.ts";
import { normalDraws, seededRandom } from "./model.ts";

type Matrix = number[][];

export interface LayerExample {
  readonly x: Matrix; // [L, D]
  readonly wQ: Matrix; // [H·E, D]
  readonly wK: Matrix; // [H·E, D]
  readonly wV: Matrix; // [H·Ev, D]
  readonly wO: Matrix; // [Dout, H·Ev]
  readonly numHeads: number;
}

/** The example's sizes: 4 tokens of 6 features, 2 heads of E = 4 (even, for RoPE's pairs) and
 * Ev = 2, an output of 5 features: no weight is square, as in the fixtures. */
export const LAYER_SIZES = { L: 4, D: 6, H: 2, E: 4, Ev: 2, Dout: 5 } as const;

/** A seeded example, its numbers kept to three significant digits as the fixtures' are. */
export function layerExample(seed: number): LayerExample {
  const normal = normalDraws(seededRandom(seed));
  const { L, D, H, E, Ev, Dout } = LAYER_SIZES;
  const matrix = (rows: number, cols: number, scale = 1) =>
    Array.from({ length: rows }, () =>
      Array.from({ length: cols }, () => Number((normal() * scale).toPrecision(3))),
    );
  return {
    x: matrix(L, D),
    wQ: matrix(H * E, D, 1 / Math.sqrt(D)),
    wK: matrix(H * E, D, 1 / Math.sqrt(D)),
    wV: matrix(H * Ev, D, 1 / Math.sqrt(D)),
    wO: matrix(Dout, H * Ev, 1 / Math.sqrt(H * Ev)),
    numHeads: H,
  };
}

/** Everything the layer view shows, step by step. */
export interface LayerWalk {
  readonly q: Matrix; // step 1: [L, H·E]
  readonly k: Matrix;
  readonly v: Matrix; // [L, H·Ev]
  readonly qHeads: Matrix[]; // step 2: H of [L, E]
  readonly kHeads: Matrix[];
  readonly vHeads: Matrix[]; // H of [L, Ev]
  readonly qRotated: Matrix[]; // step 3: the heads RoPE turned (the same as step 2 without RoPE)
  readonly kRotated: Matrix[];
  readonly weights: Matrix[]; // step 4: H of [L, L], the layer's own
  readonly headOutputs: Matrix[]; // H of [L, Ev]
  readonly merged: Matrix; // step 5: [L, H·Ev]
  readonly output: Matrix; // step 6: [L, Dout], the layer's own
  readonly walkDifference: number; // the largest |merged · wOᵀ − output|: 0 up to rounding
}

/** x · Wᵀ, W stored [out, in] as nn.Linear stores it. */
export function project(x: Matrix, w: Matrix): Matrix {
  return x.map((row) => w.map((wo) => row.reduce((sum, xc, c) => sum + xc * wo[c], 0)));
}

/** [L, H·F] -> H of [L, F]: head h takes features h·F to h·F + F − 1 of every row. */
export function splitHeads(x: Matrix, heads: number): Matrix[] {
  const width = x[0].length / heads;
  return Array.from({ length: heads }, (_, h) => x.map((row) => row.slice(h * width, (h + 1) * width)));
}

/** H of [L, F] -> [L, H·F]: each row is the heads' rows one after another, head 0 first. */
export function mergeHeads(heads: readonly Matrix[]): Matrix {
  return heads[0].map((_, l) => heads.flatMap((head) => head[l]));
}

export function walkLayer(example: LayerExample, rope: RopeOptions | null): LayerWalk {
  const { x, wQ, wK, wV, wO, numHeads } = example;
  const q = project(x, wQ);
  const k = project(x, wK);
  const v = project(x, wV);
  const qHeads = splitHeads(q, numHeads);
  const kHeads = splitHeads(k, numHeads);
  const vHeads = splitHeads(v, numHeads);
  const positions = x.map((_, l) => l);
  const turn = (heads: Matrix[]) =>
    rope === null ? heads : (applyRotary(heads, positions, rope) as Matrix[]);
  const qRotated = turn(qHeads);
  const kRotated = turn(kHeads);
  const headOutputs = qRotated.map((qh, h) => attentionSteps(qh, kRotated[h], vHeads[h]).output);
  const merged = mergeHeads(headOutputs);
  const layer = multiHeadAttention(x, null, { wQ, wK, wV, wO }, { numHeads, rope, needWeights: true });
  const { output, weights } = layer as LayerResult as { output: Matrix; weights: Matrix[] };
  const walked = project(merged, wO);
  const walkDifference = Math.max(
    ...walked.flatMap((row, l) => row.map((y, o) => Math.abs(y - output[l][o]))),
  );
  return {
    q,
    k,
    v,
    qHeads,
    kHeads,
    vHeads,
    qRotated,
    kRotated,
    weights,
    headOutputs,
    merged,
    output,
    walkDifference,
  };
}

/** The layer's six steps, by the labels the lessons give them. */
export const LAYER_STEPS = [
  "project",
  "split heads",
  "rotate",
  "attend",
  "merge heads",
  "out-project",
] as const;

// ---- RoPE ---------------------------------------------------------------------------------------

export const ROPE_FEATURES = 8; // E of the RoPE view's query and key
export const ROPE_POSITIONS = 8; // positions 0..7

export interface RopeView {
  readonly query: number[]; // [E], the same vector at every position before it turns
  readonly key: number[];
  readonly queries: Matrix; // [L, E]: the query turned at each position
  readonly keys: Matrix;
  readonly dots: Matrix; // [L, L]: query at position m · key at position n
  readonly angles: number[]; // θ_i = theta^(-2i/E), radians per position, for each pair i
  readonly diagonalSpread: number; // the largest difference between two dots of one diagonal
}

export function ropeView(seed: number, theta: number, interleaved: boolean): RopeView {
  const normal = normalDraws(seededRandom(seed));
  const vector = () => Array.from({ length: ROPE_FEATURES }, () => Number(normal().toPrecision(3)));
  const query = vector();
  const key = vector();
  const positions = Array.from({ length: ROPE_POSITIONS }, (_, l) => l);
  const repeated = (row: number[]) => positions.map(() => [...row]);
  const options = { theta, interleaved };
  const queries = applyRotary(repeated(query), positions, options) as Matrix;
  const keys = applyRotary(repeated(key), positions, options) as Matrix;
  const dots = queries.map((q) => keys.map((k) => q.reduce((sum, x, e) => sum + x * k[e], 0)));
  let diagonalSpread = 0;
  for (let m = 0; m < ROPE_POSITIONS; m++) {
    for (let n = 0; n < ROPE_POSITIONS; n++) {
      // Against the first cell of the same diagonal (m − n constant).
      const shift = Math.min(m, n);
      diagonalSpread = Math.max(diagonalSpread, Math.abs(dots[m][n] - dots[m - shift][n - shift]));
    }
  }
  const angles = Array.from({ length: ROPE_FEATURES / 2 }, (_, i) => theta ** ((-2 * i) / ROPE_FEATURES));
  return { query, key, queries, keys, dots, angles, diagonalSpread };
}

/** The two features of pair i: (i, i + E/2) half-split, (2i, 2i + 1) interleaved. */
export function pairFeatures(i: number, interleaved: boolean): [number, number] {
  return interleaved ? [2 * i, 2 * i + 1] : [i, i + ROPE_FEATURES / 2];
}
