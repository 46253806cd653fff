/**
 * What the explorer's window and sink view shows, without the DOM (so that Node's tests run it).
 *
 * A small ragged batch of two sequences (one head each, Lq = 4 query rows over Lk = 10 keys,
 * E = 4, Ev = 2, seeded) attended causally with a sliding window of w keys, the first sinkTokens
 * keys always visible, a sink logit in the softmax's denominator and a kvSeqlen per sequence.
 * The view sets those numbers; `windowExample` asks a port for the steps (the explorer's chosen
 * backend, whose readable steps are attention.ts's), twice: once with the window as the contract
 * reads "w keys", (w - 1, 0), and once with a common mistake, so that the cells the mistake sees
 * differently and the output it changes are the ports' own answers, never arithmetic of the view.
 *
 * Which keys a row sees is read off the port's logits: a hidden key's logit is -Infinity.
 */

import type { AttentionOptions, AttentionSteps, NestedArray } from "../src/attention.ts";
import { normalDraws, seededRandom } from "./model.ts";

type Matrix = readonly (readonly number[])[];

export const WINDOW_EXAMPLE = { sequences: 2, queries: 4, keys: 10, features: 4, valueFeatures: 2, seed: 32 };

/** The mistakes the toggle makes: the window one key too wide, or aligned top-left. */
export const WINDOW_MISTAKES = ["none", "too-wide", "top-left"] as const;
export type WindowMistake = (typeof WINDOW_MISTAKES)[number];

export interface WindowSettings {
  readonly queryOffset: number; // the position of query row 0 among the keys, both sequences
  readonly windowKeys: number; // w: the keys a row may see, itself included (onnxruntime's local_window_size)
  readonly sinkTokens: number; // keys 0..sinkTokens-1 always visible
  readonly sinkLogit: number | null; // the one head's sink logit, or none
  readonly kvSeqlen: readonly number[]; // [B]: the keys each sequence holds
  readonly mistake: WindowMistake;
}

export const WINDOW_DEFAULTS: WindowSettings = {
  queryOffset: 6,
  windowKeys: 3,
  sinkTokens: 1,
  sinkLogit: 0,
  kvSeqlen: [10, 7],
  mistake: "none",
};

/** The example's inputs: query [2, 1, 4, 4], key [2, 1, 10, 4], value [2, 1, 10, 2], seeded. */
export function windowInputs(): WindowInputs {
  const { sequences, queries, keys, features, valueFeatures, seed } = WINDOW_EXAMPLE;
  const normal = normalDraws(seededRandom(seed));
  const draw = (rows: number, cols: number) =>
    Array.from({ length: sequences }, () => [
      Array.from({ length: rows }, () => Array.from({ length: cols }, () => Math.round(normal() * 8) / 4)),
    ]);
  return { query: draw(queries, features), key: draw(keys, features), value: draw(keys, valueFeatures) };
}

/** The port's options for the settings; `mistaken` applies the settings' mistake. */
export function windowOptions(settings: WindowSettings, mistaken = false): AttentionOptions {
  const tooWide = mistaken && settings.mistake === "too-wide";
  const topLeft = mistaken && settings.mistake === "top-left";
  return {
    isCausal: true,
    queryOffset: topLeft ? 0 : settings.queryOffset,
    window: [tooWide ? settings.windowKeys : settings.windowKeys - 1, 0],
    sinkTokens: settings.sinkTokens,
    sinkLogits: settings.sinkLogit === null ? null : [settings.sinkLogit],
    kvSeqlen: [...settings.kvSeqlen],
  };
}

/** One sequence as the view draws it. */
export interface WindowSequence {
  readonly weights: Matrix; // [Lq, Lk]
  readonly hidden: readonly (readonly boolean[])[]; // [Lq, Lk]: the port's logit is -Infinity
  readonly sinkShare: readonly number[]; // [Lq]: 1 - the row's weights (0 without a sink logit)
  readonly output: Matrix; // [Lq, Ev]
  readonly mistaken: {
    readonly weights: Matrix; // [Lq, Lk]
    readonly hidden: readonly (readonly boolean[])[];
    readonly output: Matrix; // [Lq, Ev]
  } | null; // null when no mistake is asked for
  readonly changed: readonly (readonly boolean[])[]; // [Lq, Lk]: the mistake sees the cell otherwise
  readonly outputDifference: number; // the largest |output - mistaken output|
}

export type StepsOf = (
  query: NestedArray,
  key: NestedArray,
  value: NestedArray,
  options: AttentionOptions,
) => Promise<AttentionSteps>;

const headOf = (tensor: NestedArray, b: number) => (tensor as number[][][][])[b][0];

/** Inputs of [B, 1, L, E]: the example's, or one head of the explorer's loaded inputs as B = 1. */
export interface WindowInputs {
  readonly query: number[][][][];
  readonly key: number[][][][];
  readonly value: number[][][][];
}

/** The most query rows and keys a loaded preset may have to be shown here (its grids fit a phone). */
export const WINDOW_PRESET_LIMIT = 12;

/** The example under the settings, computed by `steps` (a backend's), per sequence; settings.kvSeqlen
 * has one count per sequence of `inputs`. */
export async function windowExample(
  settings: WindowSettings,
  steps: StepsOf,
  inputs: WindowInputs = windowInputs(),
): Promise<WindowSequence[]> {
  const { query, key, value } = inputs;
  const right = await steps(query, key, value, windowOptions(settings));
  const wrong =
    settings.mistake === "none" ? null : await steps(query, key, value, windowOptions(settings, true));
  const hiddenOf = (logits: Matrix) => logits.map((row) => row.map((x) => x === -Infinity));
  return Array.from({ length: query.length }, (_, b) => {
    const weights = headOf(right.weights, b);
    const hidden = hiddenOf(headOf(right.logits, b));
    const output = headOf(right.output, b);
    const mistaken =
      wrong === null
        ? null
        : {
            weights: headOf(wrong.weights, b),
            hidden: hiddenOf(headOf(wrong.logits, b)),
            output: headOf(wrong.output, b),
          };
    const changed = hidden.map((row, i) =>
      row.map((h, j) => mistaken !== null && mistaken.hidden[i][j] !== h),
    );
    let outputDifference = 0;
    mistaken?.output.forEach((row, i) =>
      row.forEach((x, c) => {
        outputDifference = Math.max(outputDifference, Math.abs(x - output[i][c]));
      }),
    );
    const sinkShare = weights.map((row) =>
      settings.sinkLogit === null ? 0 : 1 - row.reduce((sum, w) => sum + w, 0),
    );
    return { weights, hidden, sinkShare, output, mistaken, changed, outputDifference };
  });
}
