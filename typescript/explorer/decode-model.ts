/**
 * What the explorer's decode view shows, without the DOM (so that tests run it in Node).
 *
 * Generating text runs attention a few new tokens at a time against a cache of every earlier key
 * and value. The view takes the tutorial's sentence as the real model's case holds it (the
 * queries, keys and values of one of all-MiniLM-L6-v2's heads on "[CLS] the cat sat on the mat
 * [SEP]") and, at step t with Lq new tokens, attends the new rows P..t−1 (P = t − Lq cached
 * tokens before them) over the cache of the first t keys and values, with isCausal and
 * queryOffset P: row i of the step sits at position i + P and may see keys j <= i + P. The same
 * sentence in one causal pass (every row at once, offset 0) is beside it: the step's rows are its
 * rows P..t−1, bit for bit, since attention.ts's arithmetic for a row does not depend on how many
 * rows a call has. The view can also make the mistake a cache must not: queryOffset 0, torch's
 * top-left is_causal, which hides every key after the new rows' own index from them.
 *
 * Every number is attention.ts's (attentionSteps); the cache rows are the case's own key and value
 * rows, copied.
 */

import { attentionSteps, type NestedArray } from "../src/attention.ts";
import { type ExplorerCase, REAL_MODEL_PRESET, sliceAt } from "./model.ts";

type Matrix = readonly (readonly number[])[];

/** One head's rows of the sentence: a query, key and value row per token. */
export interface DecodeSentence {
  readonly tokens: readonly string[]; // [n]
  readonly query: Matrix; // [n, E]
  readonly key: Matrix; // [n, E]
  readonly value: Matrix; // [n, Ev]
  readonly heads: number; // how many heads the case has
}

/** The head the view opens on: in the real model's case it attends each token to the one before,
 * which a decode step shows at a glance. */
export const DECODE_HEAD = 2;

/** Head `head` of the real model's case ([H, n, E] queries and keys, [H, n, Ev] values). */
export function decodeSentence(realModel: ExplorerCase, head: number): DecodeSentence {
  const { query, key, value } = realModel.inputs as Record<"query" | "key" | "value", NestedArray>;
  return {
    tokens: REAL_MODEL_PRESET.tokens,
    query: sliceAt(query, [head]),
    key: sliceAt(key, [head]),
    value: sliceAt(value, [head]),
    heads: query.length,
  };
}

/** Everything the view shows at one step. */
export interface DecodeStep {
  readonly step: number; // t: the tokens so far, the new ones included (1..n)
  readonly newTokens: number; // Lq: the rows this step adds (1 in plain decoding)
  readonly cached: number; // P = t − Lq: the cached tokens before them
  readonly queryOffset: number; // the offset the step was attended with: P, unless the mistake's 0
  readonly query: Matrix; // [Lq, E]: the new tokens' query rows, P..t−1
  readonly keyCache: Matrix; // [t, E]: the cache after this step (its last Lq rows are new)
  readonly valueCache: Matrix; // [t, Ev]
  readonly weights: Matrix; // [Lq, t]: the new rows' weights over every key so far
  readonly visible: readonly number[]; // [Lq]: per new row, the keys it may see (logits above −∞)
  readonly output: Matrix; // [Lq, Ev]
  readonly causalWeights: Matrix; // [n, n]: the whole sentence in one causal pass
  readonly causalVisible: readonly number[]; // [n]: the keys each row of that pass may see
  readonly rowDifference: number; // the largest |weights[r][j] − causalWeights[P + r][j]|: 0 unless topLeft
}

/** Step t of the sentence with Lq new tokens (1 <= Lq <= t <= n), attended with queryOffset P = t − Lq,
 * or with 0 where `topLeft` asks for the mistake. */
export function decodeStep(
  sentence: DecodeSentence,
  step: number,
  newTokens: number,
  topLeft = false,
): DecodeStep {
  const n = sentence.tokens.length;
  if (!(Number.isInteger(step) && step >= 1 && step <= n)) {
    throw new RangeError(`step must be a whole number from 1 to ${n}, got ${step}`);
  }
  if (!(Number.isInteger(newTokens) && newTokens >= 1 && newTokens <= step)) {
    throw new RangeError(`newTokens must be a whole number from 1 to step (${step}), got ${newTokens}`);
  }
  const cached = step - newTokens;
  const queryOffset = topLeft ? 0 : cached;
  const copy = (rows: Matrix, from: number, to: number) => rows.slice(from, to).map((row) => [...row]);
  const query = copy(sentence.query, cached, step); // [Lq, E]
  const keyCache = copy(sentence.key, 0, step); // [t, E]
  const valueCache = copy(sentence.value, 0, step); // [t, Ev]
  const decoded = attentionSteps(query, keyCache, valueCache, { isCausal: true, queryOffset });
  const whole = attentionSteps(
    sentence.query.map((row) => [...row]), // [n, E]
    sentence.key.map((row) => [...row]), // [n, E]
    sentence.value.map((row) => [...row]), // [n, Ev]
    { isCausal: true },
  );
  const seen = (logits: number[][]) => logits.map((row) => row.filter((x) => x !== -Infinity).length);
  let rowDifference = 0;
  decoded.weights.forEach((row, r) => {
    const full = whole.weights[cached + r];
    full.forEach((w, j) => {
      rowDifference = Math.max(rowDifference, Math.abs((row[j] ?? 0) - w)); // keys past t weigh 0
    });
  });
  return {
    step,
    newTokens,
    cached,
    queryOffset,
    query,
    keyCache,
    valueCache,
    weights: decoded.weights,
    visible: seen(decoded.logits),
    output: decoded.output,
    causalWeights: whole.weights,
    causalVisible: seen(whole.logits),
    rowDifference,
  };
}
