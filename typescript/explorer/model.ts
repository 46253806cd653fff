/**
 * The attention explorer's logic, without the page: everything here is plain data in, plain data
 * out, so Node's test runner can check it and the page (main.ts) only draws.
 *
 * The attention itself is never computed here: the page calls one of the project's ports
 * (backends.ts; the √d_k experiment calls typescript/src/attention.ts), which `attention-port verify`
 * holds to the fixtures. This file holds what the page needs around it: reading what a reader
 * types, the presets, slicing one (batch, head) out of the steps, the colour map, the arithmetic
 * behind a cell, the error verdict for a fixture case, and the √d_k experiment. The tolerance rule
 * is the conformance kit's (typescript/conformance/judge.ts), which a test holds to compare.py.
 */

import type { OutputValues } from "../conformance/judge.ts";
import type { FixtureCase } from "../golden/reader.ts"; // a type only: nothing of reader.ts is bundled
import { attentionSteps, type NestedArray } from "../src/attention.ts";
import { spelled } from "../src/vocabulary.ts";

// ---- Reading and writing tensors as text ----------------------------------------------------------

// JSON has no NaN or infinities; a reader may type them as bare words, as JavaScript prints them.
const SPECIAL_WORDS: Readonly<Record<string, number>> = {
  NaN: NaN,
  Infinity: Infinity,
  "-Infinity": -Infinity,
};

/** What the reader typed into an input box: a value for the port, or why it is not JSON. */
export type ParsedText =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly message: string };

/** JSON, plus the bare words NaN, Infinity and -Infinity. An empty box is null (no tensor). The
 * value is handed to the port as it is, so a ragged array or a string reaches the port's own
 * checks and the reader sees the port's own AttentionInputError. */
export function parseTensorText(text: string): ParsedText {
  if (text.trim() === "") {
    return { ok: true, value: null };
  }
  // Quote the bare words outside strings (a string never holds a double quote here but as `\"`).
  const quoted = text.replace(/"(?:[^"\\]|\\.)*"|-?Infinity|NaN/g, (match) =>
    match.startsWith('"') ? match : `"${match}"`,
  );
  let value: unknown;
  try {
    value = JSON.parse(quoted);
  } catch (error) {
    return { ok: false, message: `not JSON: ${(error as Error).message}` };
  }
  return { ok: true, value: decodeWords(value) };
}

function decodeWords(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(decodeWords);
  }
  if (typeof value === "string" && Object.hasOwn(SPECIAL_WORDS, value)) {
    return SPECIAL_WORDS[value];
  }
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, decodeWords(v)]));
  }
  return value;
}

/** A number the way the text boxes write it: shortest round trip, -0 kept, NaN and ±Infinity bare. */
export function numberText(x: unknown): string {
  if (typeof x !== "number") {
    return JSON.stringify(x) ?? "null";
  }
  return Object.is(x, -0) ? "-0" : String(x);
}

/** A tensor as text, one innermost row per line, so a [3, 4] matrix reads as a matrix. */
export function formatTensorText(value: unknown, indent = ""): string {
  if (!Array.isArray(value)) {
    if (typeof value === "object" && value !== null) {
      // A shaped tensor { shape, data }: the only way to write a tensor with a zero dim.
      const entries = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${formatTensorText(v)}`);
      return `{${entries.join(", ")}}`;
    }
    return numberText(value);
  }
  if (value.every((x) => !Array.isArray(x))) {
    return `[${value.map((x) => formatTensorText(x)).join(", ")}]`;
  }
  const inner = `${indent} `;
  return `[${value.map((x) => formatTensorText(x, inner)).join(`,\n${inner}`)}]`;
}

/** Where the page says an AttentionInputError: under the input box or the option its message
 * starts with (query, key, value, attnMask; scale, softcap, isCausal, enableGqa), else under the
 * options as a whole. */
export type ErrorPlace =
  | "query"
  | "key"
  | "value"
  | "attnMask"
  | "scale"
  | "softcap"
  | "causal"
  | "gqa"
  | "options";

export function errorTarget(message: string): ErrorPlace {
  const first = /^[A-Za-z]+/.exec(message)?.[0] ?? "";
  const places: Record<string, ErrorPlace> = {
    query: "query",
    key: "key",
    value: "value",
    attnMask: "attnMask",
    scale: "scale",
    softcap: "softcap",
    isCausal: "causal",
    enableGqa: "gqa",
  };
  return Object.hasOwn(places, first) ? places[first] : "options";
}

/** A fixture's expected error message in the page's spelling: the fixtures write the argument
 * names as Python does (attn_mask), the TypeScript ports as TypeScript does (attnMask). */
export function camelCaseMessage(message: string): string {
  return spelled(message, "javascript");
}

/** An invalid fixture case's verdict: the error the page got against the one the case expects. */
export function errorVerdict(
  expected: { readonly kind: string; readonly message: string },
  got: { readonly kind: string; readonly message: string } | null,
): { passed: boolean; text: string } {
  const want = `AttentionInputError (${expected.kind}): ${camelCaseMessage(expected.message)}`;
  if (got === null) {
    return { passed: false, text: `NO ERROR raised; expected ${want}` };
  }
  const passed = got.kind === expected.kind && got.message === camelCaseMessage(expected.message);
  return {
    passed,
    text: passed
      ? `the expected error: ${want}`
      : `A DIFFERENT ERROR: got AttentionInputError (${got.kind}): ${got.message}; expected ${want}`,
  };
}

// ---- Presets ----------------------------------------------------------------------------------------

/** The real model's preset: the fixture case of all-MiniLM-L6-v2's 12 heads (layer 0) on the
 * tutorial's sentence, and the WordPiece tokens its rows and columns are (the case's description
 * names them in the same order; python/attention_port/golden/capture.py wrote them). */
export const REAL_MODEL_PRESET = {
  caseId: "real_model_heads",
  tokens: ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"],
} as const;

/** The tokens a case's query and key positions stand for, or null for numbers drawn at random. */
export function caseTokens(c: Pick<ExplorerCase, "id">): readonly string[] | null {
  return c.id === REAL_MODEL_PRESET.caseId ? REAL_MODEL_PRESET.tokens : null;
}

/** The tutorial's first example: 3 tokens, d_k = 4, V = [[1,2],[3,4],[5,6]]. */
export function tutorialInputs(): { query: number[][]; key: number[][]; value: number[][] } {
  const rows = [
    [1, 0, 1, 0],
    [0, 1, 0, 1],
    [1, 1, 0, 0],
  ];
  return {
    query: rows.map((r) => [...r]),
    key: rows.map((r) => [...r]),
    value: [
      [1, 2],
      [3, 4],
      [5, 6],
    ],
  };
}

/** A small seeded generator (mulberry32): the same seed gives the same inputs in every browser. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal draws (Box-Muller) from a uniform generator. */
export function normalDraws(uniform: () => number): () => number {
  return () => {
    const u = 1 - uniform(); // (0, 1]: log(0) would be -Infinity
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * uniform());
  };
}

export interface RandomSizes {
  readonly lq: number;
  readonly lk: number;
  readonly e: number;
  readonly ev: number;
  readonly hq: number; // query heads; 1 gives the tutorial's rank-2 form
  readonly hkv: number; // key/value heads; Hq must be a multiple of it (grouped-query attention)
  readonly seed: number;
}

export const RANDOM_LIMIT = 64;

/** Seeded standard-normal query [Hq, Lq, E], key [Hkv, Lk, E], value [Hkv, Lk, Ev], kept to three
 * significant digits as the fixtures are (rank 2 when there is one head of each). */
export function randomInputs(sizes: RandomSizes): { query: unknown; key: unknown; value: unknown } {
  const normal = normalDraws(seededRandom(sizes.seed));
  const matrix = (rows: number, cols: number) =>
    Array.from({ length: rows }, () => Array.from({ length: cols }, () => Number(normal().toPrecision(3))));
  const heads = (count: number, rows: number, cols: number) =>
    Array.from({ length: count }, () => matrix(rows, cols));
  if (sizes.hq === 1 && sizes.hkv === 1) {
    return {
      query: matrix(sizes.lq, sizes.e),
      key: matrix(sizes.lk, sizes.e),
      value: matrix(sizes.lk, sizes.ev),
    };
  }
  return {
    query: heads(sizes.hq, sizes.lq, sizes.e), // [Hq, Lq, E]
    key: heads(sizes.hkv, sizes.lk, sizes.e), // [Hkv, Lk, E]
    value: heads(sizes.hkv, sizes.lk, sizes.ev), // [Hkv, Lk, Ev]
  };
}

// ---- Slicing the steps for one (batch, head) ---------------------------------------------------

/** Every index into the outer dims [B..., Hq] of the scores, in row-major order ([[]] for rank 2). */
export function outerIndices(outerShape: readonly number[]): number[][] {
  let result: number[][] = [[]];
  for (const size of outerShape) {
    result = result.flatMap((prefix) => Array.from({ length: size }, (_, n) => [...prefix, n]));
  }
  return result;
}

/** The [rows, cols] matrix at `outer` of a nested step tensor. */
export function sliceAt(tensor: NestedArray, outer: readonly number[]): number[][] {
  let node: NestedArray = tensor;
  for (const index of outer) {
    node = node[index] as NestedArray;
  }
  return node as number[][];
}

/** Flat row-major values of nested arrays. */
export function flatten(x: unknown): number[] {
  return Array.isArray(x) ? x.flatMap((y) => flatten(y)) : [x as number];
}

// ---- Numbers on screen ------------------------------------------------------------------------------

/** A short form for a heatmap cell: 3 significant digits (4 from 100 up), −∞ for a masked logit. */
export function shortNumber(x: number): string {
  if (Number.isNaN(x)) {
    return "NaN";
  }
  if (x === Infinity) {
    return "∞";
  }
  if (x === -Infinity) {
    return "−∞";
  }
  if (x === 0) {
    return Object.is(x, -0) ? "-0" : "0";
  }
  const magnitude = Math.abs(x);
  if (magnitude >= 1e4 || magnitude < 1e-3) {
    return x.toExponential(1);
  }
  // From 100 up, four digits: -1000 and -1002 (logits a softmax tells apart) must not both
  // read -1000. The arithmetic panel has every digit.
  return String(Number(x.toPrecision(magnitude >= 100 ? 4 : 3)));
}

// Viridis (matplotlib's perceptually uniform map, readable with the common colour-vision
// deficiencies and in greyscale), as ten evenly spaced stops.
const VIRIDIS = [
  [0x44, 0x01, 0x54],
  [0x48, 0x28, 0x78],
  [0x3e, 0x49, 0x89],
  [0x31, 0x68, 0x8e],
  [0x26, 0x82, 0x8e],
  [0x1f, 0x9e, 0x89],
  [0x35, 0xb7, 0x79],
  [0x6e, 0xce, 0x58],
  [0xb5, 0xde, 0x2b],
  [0xfd, 0xe7, 0x25],
] as const;

/** Viridis at t in [0, 1], as an rgb() colour and whether dark text reads on it. */
export function viridis(t: number): { readonly colour: string; readonly darkText: boolean } {
  const [r, g, b] = viridisRgb(t);
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return { colour: `rgb(${r}, ${g}, ${b})`, darkText: luminance > 140 };
}

/** Viridis at t in [0, 1] as [red, green, blue], 0-255 (a canvas writes these straight into pixels). */
export function viridisRgb(t: number): [number, number, number] {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const low = Math.floor(x);
  const high = Math.min(low + 1, VIRIDIS.length - 1);
  const f = x - low;
  const channel = (c: number) => Math.round(VIRIDIS[low][c] * (1 - f) + VIRIDIS[high][c] * f);
  return [channel(0), channel(1), channel(2)];
}

/** The finite range of a matrix, for its colour scale ([0, 0] when nothing is finite). */
export function finiteRange(matrix: readonly (readonly number[])[]): [number, number] {
  let low = Infinity;
  let high = -Infinity;
  for (const row of matrix) {
    for (const x of row) {
      if (Number.isFinite(x)) {
        low = Math.min(low, x);
        high = Math.max(high, x);
      }
    }
  }
  return low > high ? [0, 0] : [low, high];
}

// ---- The arithmetic behind one cell -----------------------------------------------------------------

/** A number as an operand, at full precision (shortest round trip), in parentheses when negative:
 * (-0.4)×(-1.2) and 0.5 − (-1), never -0.4×-1.2 or 0.5 − -1. */
export function operand(x: number): string {
  const text = numberText(x);
  return x < 0 || Object.is(x, -0) ? `(${text})` : text;
}

export interface WeightCellInputs {
  readonly queryRow: readonly number[]; // [E]
  readonly keyRow: readonly number[]; // [E]
  readonly score: number; // the port's scores[i][j]
  readonly scale: number;
  readonly softcap: number;
  readonly logitsRow: readonly number[]; // the port's logits row i [Lk]
  readonly weight: number; // the port's weights[i][j]
  readonly i: number;
  readonly j: number;
  readonly isCausal: boolean;
  readonly maskCell: boolean | number | null; // this cell of the mask, broadcast; null: no mask
}

/** Up to 6 terms of a sum; beyond, the first 5 and a count. */
function someTerms(terms: readonly string[]): string {
  return (terms.length > 6 ? [...terms.slice(0, 5), `… (${terms.length} terms)`] : terms).join(" + ");
}

/** The lines of arithmetic that lead from query row i and key row j to weights[i][j], with the
 * actual numbers at full precision. The intermediate values come from the port's steps; the exp,
 * the row max and the sum are redone here only to show them. */
export function weightArithmetic(cell: WeightCellInputs): string[] {
  const { queryRow, keyRow, score, scale, softcap, logitsRow, weight, i, j } = cell;
  const n = numberText;
  const terms = queryRow.map((q, t) => `${operand(q)}×${operand(keyRow[t])}`);
  const lines = [`q${i}·k${j} = ${someTerms(terms) || "0 (no features)"} = ${n(score)}`];
  let logit = score * scale;
  lines.push(`× scale ${n(scale)} = ${n(logit)}`);
  if (softcap > 0) {
    logit = softcap * Math.tanh(logit / softcap);
    lines.push(`softcap: ${n(softcap)}·tanh(x / ${n(softcap)}) = ${n(logit)}`);
  }
  let allowed = true;
  if (cell.isCausal && j > i) {
    allowed = false;
    lines.push(`causal: key ${j} > query ${i} → −∞`);
  }
  if (typeof cell.maskCell === "boolean") {
    allowed &&= cell.maskCell;
    lines.push(cell.maskCell ? "mask: true (may attend)" : "mask: false → −∞");
  } else if (typeof cell.maskCell === "number") {
    lines.push(`+ mask ${operand(cell.maskCell)} = ${n(logit + cell.maskCell)}`);
  }
  const x = logitsRow[j];
  lines.push(`logit x = ${allowed ? n(x) : "−∞"}`);
  let rowMax = -Infinity;
  for (const v of logitsRow) {
    rowMax = Math.max(rowMax, v);
  }
  if (rowMax === -Infinity) {
    lines.push("every key of this row is masked: weight 0 (nothing to attend to)");
    return lines;
  }
  let sum = 0;
  for (const v of logitsRow) {
    sum += Math.exp(v - rowMax);
  }
  const shifted = x - rowMax;
  const e = Math.exp(shifted);
  lines.push(`row max = ${n(rowMax)} (subtracted first, so no exp can overflow)`);
  lines.push(`x − row max = ${x === -Infinity ? "−∞" : operand(x)} − ${operand(rowMax)} = ${n(shifted)}`);
  lines.push(`exp(${n(shifted)}) = ${n(e)}`);
  lines.push(`row sum Σ exp(logit − row max) = ${n(sum)}`);
  lines.push(`${n(e)} ÷ ${n(sum)} = ${n(e / sum)}`);
  lines.push(`weight (the port's) = ${n(weight)}`);
  return lines;
}

/** The arithmetic of output[i][c]: the weights of row i times column c of value. */
export function outputArithmetic(
  weightsRow: readonly number[],
  valueColumn: readonly number[],
  output: number,
  i: number,
  c: number,
): string[] {
  const terms = weightsRow.map((w, j) => `${operand(w)}×${operand(valueColumn[j])}`);
  return [
    `out[${i}][${c}] = Σ_j w${i}j · v[j][${c}]`,
    `= ${someTerms(terms) || "0"}`,
    `= ${numberText(output)}`,
  ];
}

// ---- The √d_k experiment ----------------------------------------------------------------------------

export interface SqrtDkPoint {
  readonly dk: number;
  readonly scoreSpread: number; // standard deviation of the raw scores q·k (about √d_k)
  readonly scaledSpread: number; // the same after × 1/√d_k (about 1)
  readonly maxWeight: { readonly scaled: number; readonly unscaled: number }; // mean over rows
  readonly entropy: { readonly scaled: number; readonly unscaled: number }; // mean over rows, nats
  readonly jacobian: { readonly scaled: number; readonly unscaled: number }; // mean ‖diag(p) − ppᵀ‖_F
}

export const SQRT_DK_ROWS = 32; // queries and keys drawn for each d_k
export const SQRT_DK_DRAWS = 8; // independent draws averaged for each d_k

/** For random unit-variance query and key [n, d_k], the softmax of the raw scores (scale 1) and of
 * the scaled ones (1/√d_k), both computed by attention.ts, summarised per row and averaged over
 * `draws` independent draws. One draw is noisy enough that the curves zigzag (a largest weight of
 * 0.973 at one d_k and 0.958 at a larger one); the average of 8, on d_k = 1, 2, 4, …, 1024, rises
 * and falls as the panel's text says. */
export function sqrtDkPoint(dk: number, seed = 7, rows = SQRT_DK_ROWS, draws = SQRT_DK_DRAWS): SqrtDkPoint {
  const spread = (m: NestedArray) => {
    const xs = flatten(m);
    const mean = xs.reduce((a, x) => a + x, 0) / xs.length;
    return Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length);
  };
  const perRow = (weights: NestedArray, f: (p: readonly number[]) => number) => {
    const matrix = weights as number[][];
    return matrix.reduce((a, p) => a + f(p), 0) / matrix.length;
  };
  const maxOf = (p: readonly number[]) => Math.max(...p);
  const entropyOf = (p: readonly number[]) => -p.reduce((a, x) => (x > 0 ? a + x * Math.log(x) : a), 0);
  const sums = { scoreSpread: 0, scaledSpread: 0, maxWeight: [0, 0], entropy: [0, 0], jacobian: [0, 0] };
  for (let d = 0; d < draws; d++) {
    const normal = normalDraws(seededRandom((seed * 7919 + dk) * 64 + d));
    const draw = () => Array.from({ length: rows }, () => Array.from({ length: dk }, normal)); // [n, d_k]
    const query = draw();
    const key = draw();
    const value = Array.from({ length: rows }, () => [0]); // [n, 1]: only the weights are read
    const raw = attentionSteps(query, key, value, { scale: 1 });
    const scaled = attentionSteps(query, key, value); // scale 1/√d_k, the default
    sums.scoreSpread += spread(raw.scores);
    sums.scaledSpread += spread(scaled.logits);
    for (const [name, f] of [
      ["maxWeight", maxOf],
      ["entropy", entropyOf],
      ["jacobian", jacobianSize],
    ] as const) {
      sums[name][0] += perRow(scaled.weights, f);
      sums[name][1] += perRow(raw.weights, f);
    }
  }
  const pair = ([scaled, unscaled]: number[]) => ({ scaled: scaled / draws, unscaled: unscaled / draws });
  return {
    dk,
    scoreSpread: sums.scoreSpread / draws,
    scaledSpread: sums.scaledSpread / draws,
    maxWeight: pair(sums.maxWeight),
    entropy: pair(sums.entropy),
    jacobian: pair(sums.jacobian),
  };
}

/** ‖diag(p) − ppᵀ‖_F: the size of softmax's Jacobian at p. It is 0 at a one-hot p (a saturated
 * softmax passes no gradient back) and small at a uniform p over many keys (√(1/n − 1/n²): 0.174
 * for 32 keys); it is largest for mass split between a few keys (0.5 for an even two-way split).
 * So it does not fall steadily without the scale: in the √d_k experiment (32 keys, 8 draws) the
 * unscaled softmax, sharper but not yet saturated, has the larger Jacobian for d_k 2-32 (0.308
 * against 0.242 at 8); from d_k 64 saturation takes it below the scaled one's, and towards 0
 * (0.074 at 1024), while the scaled one stays near 0.24 at every d_k. */
export function jacobianSize(p: readonly number[]): number {
  let sum = 0;
  for (let a = 0; a < p.length; a++) {
    for (let b = 0; b < p.length; b++) {
      const entry = (a === b ? p[a] : 0) - p[a] * p[b];
      sum += entry * entry;
    }
  }
  return Math.sqrt(sum);
}

/** d_k = 1, 2, 4, …, 1024: the points of the experiment's curves. */
export const SQRT_DK_GRID = Array.from({ length: 11 }, (_, n) => 2 ** n);

// ---- Fixture cases, as the page receives them -------------------------------------------------------

/** A flat row-major tensor with its shape. */
export interface FlatTensor {
  readonly shape: readonly number[];
  readonly data: readonly number[];
}

/** One fixture case, as build.ts embeds it in the page (read by typescript/golden/reader.ts, so the
 * page never parses the fixture format itself). Inputs are in the form the port takes; of the
 * oracle's values (exact, then 256-bit, rounded once to float64) the page carries what it shows. */
export interface ExplorerCase
  extends Pick<FixtureCase, "id" | "description" | "tags" | "inputs" | "params" | "expectedError"> {
  // null for an invalid case; the budgets are the oracle's, per dtype
  readonly expected: (OutputValues & { readonly output: FlatTensor; readonly weights: FlatTensor }) | null;
}
