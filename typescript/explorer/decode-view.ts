/**
 * The explorer's decode view (decode-model.ts computes what it shows): the tutorial's sentence
 * generated a few tokens at a time, the key and value cache growing row by row, the new query
 * rows' weights over every earlier key, and the causal boundary j <= i + queryOffset moving with
 * the offset, beside one causal pass over the whole sentence.
 *
 * The sentence is the real model's fixture case (the page carries it, however large); the grids
 * are grid.ts's, as the layer view's are.
 */

import {
  DECODE_HEAD,
  type DecodeSentence,
  type DecodeStep,
  decodeSentence,
  decodeStep,
} from "./decode-model.ts";
import { element, type GridMarks, type GridWords, grid, wireGrids } from "./grid.ts";
import { REAL_MODEL_PRESET, shortNumber } from "./model.ts";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const SAID = "decode-said";

const decode = { sentence: null as DecodeSentence | null, step: 1, newTokens: 1, topLeft: false };

/** "token 3, sat": a position and the word there. */
function tokenName(tokens: readonly string[], position: number): string {
  return `token ${position}, ${tokens[position]}`;
}

/** A grid of a cache or of the new rows: a row per token, a column per feature. */
function featureWords(name: string, tokens: readonly string[], start: number, what: string): GridWords {
  const cell = (i: number, j: number) => `${name} of ${tokenName(tokens, start + i)}, feature ${j}`;
  return {
    row: "token",
    column: "feature",
    cell,
    sentence: (i, j, x) => `${cell(i, j)} is ${shortNumber(x)}: ${what}`,
  };
}

/** A weights grid: a row per query position (from `start`), a column per key. */
function weightWords(
  tokens: readonly string[],
  start: number,
  visible: readonly number[],
  pass: string,
): GridWords {
  const cell = (i: number, j: number) =>
    `weight of query ${tokenName(tokens, start + i)} on key ${tokenName(tokens, j)}`;
  const hidden = (i: number, j: number) =>
    j > start + i
      ? `key ${j} comes after position ${start + i}, so the causal rule hides it.`
      : `key ${j} comes before position ${start + i}, yet queryOffset 0 hides it: the mistake.`;
  return {
    row: "query",
    column: "key",
    cell,
    sentence: (i, j, x) =>
      j < visible[i]
        ? `${cell(i, j)} is ${shortNumber(x)} (${pass}): the query at position ${start + i} sees keys 0 to ${visible[i] - 1}.`
        : `${cell(i, j)} is 0: ${hidden(i, j)}`,
  };
}

/** Two rows of grids: the new rows and the cache; then the weights beside one causal pass. */
function mapsOf(sentence: DecodeSentence, at: DecodeStep): HTMLElement[][] {
  const { tokens } = sentence;
  const { step: t, cached: P } = at;
  const fresh = Array.from({ length: at.newTokens }, (_, r) => P + r); // the rows this step appends
  const hidden = (visible: readonly number[]) => (i: number, j: number) => j >= visible[i];
  const newRows: GridMarks = { compact: true, rowStart: P, rowLabels: tokens.slice(P, t) };
  const cache = [
    grid(
      "decode-query",
      "the new query rows",
      at.query,
      featureWords("query", tokens, P, "this head's query of a new token"),
      SAID,
      newRows,
    ),
    ...(
      [
        ["key", at.keyCache],
        ["value", at.valueCache],
      ] as const
    ).map(([name, cache]) =>
      grid(
        `decode-${name}-cache`,
        `${name} cache`,
        cache,
        featureWords(`cached ${name}`, tokens, 0, "kept from the step that added it"),
        SAID,
        { compact: true, rowLabels: tokens, litRows: fresh },
      ),
    ),
  ];
  const weights = [
    grid(
      "decode-weights",
      `this step's weights (queryOffset ${at.queryOffset})`,
      at.weights,
      weightWords(tokens, P, at.visible, "this step's"),
      SAID,
      {
        rowStart: P,
        rowLabels: tokens.slice(P, t),
        columnLabels: tokens,
        masked: hidden(at.visible),
        boundary: at.visible.map((seen) => seen - 1),
      },
    ),
    grid(
      "decode-causal",
      "one causal pass over the sentence",
      at.causalWeights,
      weightWords(tokens, 0, at.causalVisible, "one causal pass"),
      SAID,
      {
        rowLabels: tokens,
        columnLabels: tokens,
        litRows: fresh,
        masked: hidden(at.causalVisible),
        boundary: at.causalVisible.map((seen) => seen - 1),
      },
    ),
    grid(
      "decode-output",
      "this step's output",
      at.output,
      featureWords("output", tokens, P, "its weights times the cached values"),
      SAID,
      newRows,
    ),
  ];
  return [cache, weights];
}

function textOf(sentence: DecodeSentence, at: DecodeStep): string[] {
  const { tokens } = sentence;
  const { step: t, newTokens: Lq, cached: P } = at;
  const quoted = (from: number, to: number) => tokens.slice(from, to).join(" ");
  const added =
    Lq === 1
      ? `Token ${t - 1} (${tokens[t - 1]}) is new`
      : `Tokens ${P} to ${t - 1} (${quoted(P, t)}) are new, ${Lq} at once`;
  const rows = Lq === 1 ? `row ${P}` : `rows ${P} to ${t - 1}`;
  const rule =
    at.queryOffset === P
      ? `queryOffset = P = t − Lq = ${t} − ${Lq} = ${P}: the new rows go after ${P} cached tokens, so row i of this step sits at position i + ${P} and may see keys j ≤ i + ${P} (the line after each row's last key). Left at 0, torch's top-left is_causal, row 0 would see key 0 only${P === 0 ? " (here P is 0 too: this step is a prefill of the first tokens)" : ""}.`
      : `The mistake: queryOffset 0, torch's top-left is_causal, as if nothing were cached. Row i then sees keys j ≤ i only (the line), where it sits at position i + ${P} and should see keys j ≤ i + ${P}.`;
  return [
    `${added}: its query ${Lq === 1 ? "row is" : "rows are"} the only ${Lq === 1 ? "one" : "ones"} this step computes, [${Lq}, E]. Its key and value rows are appended to the cache, which now holds ${t} rows of each ([${t}, E] and [${t}, Ev]; the outlined rows are this step's). The ${P} rows before them come from earlier steps and are not computed again.`,
    rule,
    `The step's weights ${at.rowDifference === 0 ? "are" : "should be"} ${rows} of one causal pass over the whole sentence (right, outlined): largest difference ${shortNumber(at.rowDifference)}. Every number is attention.ts's, isCausal with queryOffset ${at.queryOffset}.`,
  ];
}

function draw(): void {
  const sentence = decode.sentence;
  if (sentence === null) {
    return;
  }
  const n = sentence.tokens.length;
  const at = decodeStep(sentence, decode.step, decode.newTokens, decode.topLeft);
  $<HTMLInputElement>("decode-step").value = String(at.step);
  $("decode-step-value").textContent = String(at.step);
  $("decode-cached").textContent = String(at.cached);
  $("decode-offset").textContent = String(at.queryOffset);
  $("decode-count").textContent =
    `step ${at.step} of ${n}: ${at.newTokens} new, queryOffset ${at.queryOffset}`;
  $<HTMLButtonElement>("decode-prev").disabled = at.step === 1;
  $<HTMLButtonElement>("decode-next").disabled = at.step === n;
  const picker = $<HTMLSelectElement>("decode-new");
  picker.replaceChildren(
    ...Array.from({ length: at.step }, (_, r) =>
      element("option", { value: String(r + 1) }, r === 0 ? "1 (decoding)" : String(r + 1)),
    ),
  );
  picker.value = String(at.newTokens);
  $("decode-text").replaceChildren(...textOf(sentence, at).map((line) => element("p", {}, line)));
  $("decode-maps").replaceChildren(
    ...mapsOf(sentence, at).map((maps) => {
      const holder = element("div", { class: "maps" });
      holder.append(...maps);
      return holder;
    }),
  );
}

/** Step t, keeping the count of new tokens where it fits (at most t). */
function goTo(step: number): void {
  const n = decode.sentence?.tokens.length ?? 1;
  decode.step = Math.min(n, Math.max(1, step));
  decode.newTokens = Math.min(decode.newTokens, decode.step);
  draw();
}

export function startDecodeView(): void {
  const realModel = window.EXPLORER_CASES?.find((c) => c.id === REAL_MODEL_PRESET.caseId);
  if (realModel === undefined) {
    $("decode-text").replaceChildren(
      element("p", { class: "error" }, `this page has no ${REAL_MODEL_PRESET.caseId} case to decode`),
    );
    return;
  }
  const head = $<HTMLSelectElement>("decode-head");
  const heads = decodeSentence(realModel, 0).heads;
  head.replaceChildren(
    ...Array.from({ length: heads }, (_, h) => element("option", { value: String(h) }, `head ${h}`)),
  );
  head.value = String(DECODE_HEAD);
  const load = () => {
    decode.sentence = decodeSentence(realModel, Number(head.value));
    draw();
  };
  $<HTMLInputElement>("decode-step").max = String(REAL_MODEL_PRESET.tokens.length);
  head.addEventListener("input", load);
  $("decode-prev").addEventListener("click", () => goTo(decode.step - 1));
  $("decode-next").addEventListener("click", () => goTo(decode.step + 1));
  $("decode-step").addEventListener("input", () => goTo(Number($<HTMLInputElement>("decode-step").value)));
  $("decode-top-left").addEventListener("input", () => {
    decode.topLeft = $<HTMLInputElement>("decode-top-left").checked;
    draw();
  });
  $("decode-new").addEventListener("input", () => {
    decode.newTokens = Number($<HTMLSelectElement>("decode-new").value);
    draw();
  });
  wireGrids($("decode-maps"));
  load();
}
