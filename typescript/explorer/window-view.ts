/**
 * The explorer's window and sink view (window-model.ts computes what it shows): which keys each
 * query row of a small ragged batch sees under a sliding window, the sink tokens and kvSeqlen, the
 * sink logit's share of each row's weight, and a common mistake as a toggle: the window of w keys
 * read as (w, 0) instead of (w - 1, 0), or aligned top-left (queryOffset ignored). The cells the
 * mistake sees otherwise are outlined in both grids, and the page says how far the output moves.
 *
 * The numbers are the chosen backend's (page.ts's state.backend): every port takes these options.
 * The grids are grid.ts's, as the layer and decode views' are: one Tab stop each, arrow keys inside,
 * each cell named in words.
 */

import { element, type GridWords, grid, wireGrids } from "./grid.ts";
import { shortNumber } from "./model.ts";
import { currentOuter, inputMatrix, state } from "./page.ts";
import {
  WINDOW_DEFAULTS,
  WINDOW_EXAMPLE,
  WINDOW_PRESET_LIMIT,
  type WindowInputs,
  type WindowMistake,
  type WindowSequence,
  type WindowSettings,
  windowExample,
  windowInputs,
  windowOptions,
} from "./window-model.ts";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

const SAID = "window-said";

let generation = 0; // an answer that arrives after a newer request is dropped

/** The viewed head of the explorer's loaded inputs as one sequence [1, 1, L, E], or why not. */
function presetInputs(): WindowInputs | string {
  const outer = currentOuter();
  const [query, key, value] = (["query", "key", "value"] as const).map((name) =>
    outer === null ? null : inputMatrix(name, outer),
  );
  if (query === null || key === null || value === null) {
    return "the loaded inputs have no head to show";
  }
  if (query.length > WINDOW_PRESET_LIMIT || key.length > WINDOW_PRESET_LIMIT || key.length === 0) {
    return `the loaded inputs (${query.length} query rows, ${key.length} keys) do not fit here: from 1 to ${WINDOW_PRESET_LIMIT} keys and at most ${WINDOW_PRESET_LIMIT} rows`;
  }
  return { query: [[query]], key: [[key]], value: [[value]] };
}

/** Each slider's largest value for inputs of Lq rows over Lk keys; a value past it comes down. */
function fitSliders(Lq: number, Lk: number): void {
  const maxima: Record<string, number> = {
    "window-offset": Math.max(0, Lk - Lq),
    "window-keys": Lk,
    "window-sinks": Math.min(3, Lk),
    "window-seqlen": Lk,
  };
  for (const [id, max] of Object.entries(maxima)) {
    const input = $<HTMLInputElement>(id);
    input.max = String(max);
    input.value = String(Math.min(max, Number(input.value)));
  }
}

/** The inputs on view: the ragged batch, or the loaded preset's viewed head where it fits. */
function inputsOnPage(): WindowInputs {
  const preset = $<HTMLSelectElement>("window-example").value === "preset" ? presetInputs() : null;
  $("window-preset-note").textContent =
    typeof preset === "string" ? `${preset}: showing the ragged batch` : "";
  const inputs = preset === null || typeof preset === "string" ? windowInputs() : preset;
  $("window-seqlen").closest("label")!.hidden = inputs.query.length === 1;
  fitSliders(inputs.query[0][0].length, inputs.key[0][0].length);
  return inputs;
}

/** The settings the controls hold, for inputs of `sequences` sequences over Lk keys. */
function settingsOnPage(sequences: number, Lk: number): WindowSettings {
  const number = (id: string) => Number($<HTMLInputElement>(id).value);
  return {
    queryOffset: number("window-offset"),
    windowKeys: number("window-keys"),
    sinkTokens: number("window-sinks"),
    sinkLogit: $<HTMLInputElement>("window-sink-on").checked ? number("window-sink-logit") : null,
    kvSeqlen: sequences === 1 ? [Lk] : [Lk, number("window-seqlen")],
    mistake: $<HTMLSelectElement>("window-mistake").value as WindowMistake,
  };
}

/** Why key j is hidden from row i of sequence b under `options` (the rule that hides it first). */
function hiddenBecause(settings: WindowSettings, mistaken: boolean, b: number, i: number, j: number): string {
  const options = windowOptions(settings, mistaken);
  const p = i + (options.queryOffset as number);
  const left = options.window?.[0] ?? 0;
  const n = settings.kvSeqlen[b];
  if (j >= n) {
    return `sequence ${b} holds ${n} keys (kvSeqlen), so key ${j} is padding.`;
  }
  if (j > p) {
    return `key ${j} comes after position ${p}, so the causal rule hides it.`;
  }
  return `key ${j} is before the window's first key ${p - left} (window [${left}, 0]) and is no sink.`;
}

function weightWords(s: WindowSequence, b: number, at: WindowSettings, mistaken: boolean): GridWords {
  const offset = windowOptions(at, mistaken).queryOffset as number;
  const hidden = mistaken ? s.mistaken!.hidden : s.hidden;
  const cell = (i: number, j: number) =>
    `weight of sequence ${b}, query ${i} at position ${i + offset}, on key ${j}${s.changed[i][j] ? ", which the mistake sees otherwise" : ""}`;
  return {
    row: "query",
    column: "key",
    cell,
    sentence: (i, j, x) => {
      if (hidden[i][j]) {
        return `${cell(i, j)} is 0: ${hiddenBecause(at, mistaken, b, i, j)}`;
      }
      const sink = j < at.sinkTokens ? " (a sink token, visible whatever the window)" : "";
      return `${cell(i, j)} is ${shortNumber(x)}${sink}.`;
    },
  };
}

const featureWords = (name: string, b: number): GridWords => {
  const cell = (i: number, c: number) => `${name} of sequence ${b}, query ${i}, feature ${c}`;
  return {
    row: "query",
    column: "feature",
    cell,
    sentence: (i, c, x) => `${cell(i, c)} is ${shortNumber(x)}.`,
  };
};

const sinkWords = (b: number, sinkLogit: number | null): GridWords => {
  const cell = (i: number) => `the sink logit's share of sequence ${b}, query ${i}`;
  return {
    row: "query",
    column: "sink",
    cell,
    sentence: (i, _c, x) =>
      sinkLogit === null
        ? `${cell(i)} is 0: no sink logit.`
        : `${cell(i)} is ${shortNumber(x)}: 1 minus the row's weights, which the sink logit ${sinkLogit} takes and gives no value back.`,
  };
};

/** Outlines the cells the mistake sees otherwise (grid.ts draws the rest). */
function outlineChanged(figure: HTMLElement, changed: readonly (readonly boolean[])[]): HTMLElement {
  for (const td of figure.querySelectorAll<HTMLElement>("td.num")) {
    if (changed[Number(td.dataset.i)][Number(td.dataset.j)]) {
      td.classList.add("changed");
    }
  }
  return figure;
}

function mapsOf(settings: WindowSettings, sequences: readonly WindowSequence[]): HTMLElement[] {
  return sequences.map((s, b) => {
    const holder = element("div", { class: "maps", id: `window-sequence-${b}` });
    const rowStart = settings.queryOffset;
    const masked = (hidden: readonly (readonly boolean[])[]) => (i: number, j: number) => hidden[i][j];
    holder.append(
      outlineChanged(
        grid(
          `window-weights-${b}`,
          `sequence ${b} (kvSeqlen ${settings.kvSeqlen[b]}): weights`,
          s.weights,
          weightWords(s, b, settings, false),
          SAID,
          { rowStart, masked: masked(s.hidden) },
        ),
        s.changed,
      ),
      grid(
        `window-sink-${b}`,
        "sink",
        s.sinkShare.map((x) => [x]),
        sinkWords(b, settings.sinkLogit),
        SAID,
        { rowStart },
      ),
      grid(`window-output-${b}`, "output", s.output, featureWords("output", b), SAID, { rowStart }),
    );
    if (s.mistaken !== null) {
      const offset = windowOptions(settings, true).queryOffset as number;
      holder.append(
        outlineChanged(
          grid(
            `window-mistaken-weights-${b}`,
            "with the mistake: weights",
            s.mistaken.weights,
            weightWords(s, b, settings, true),
            SAID,
            { rowStart: offset, masked: masked(s.mistaken.hidden) },
          ),
          s.changed,
        ),
        grid(
          `window-mistaken-output-${b}`,
          "with the mistake: output",
          s.mistaken.output,
          featureWords("mistaken output", b),
          SAID,
          { rowStart: offset },
        ),
      );
    }
    return holder;
  });
}

function textOf(settings: WindowSettings, sequences: readonly WindowSequence[]): string[] {
  const { queryOffset: o, windowKeys: w, sinkTokens: S } = settings;
  const lines = [
    `Query row i sits at position i + ${o} (queryOffset ${o}) and, with a window of ${w} keys, itself included, sees keys from i + ${o} − ${w - 1} to i + ${o}: window [${w - 1}, 0] in the contract's words (FlashAttention's window_size=(${w - 1}, 0), onnxruntime's local_window_size = ${w}).`,
    `${S === 0 ? "No sink tokens." : `Keys 0 to ${S - 1} are sink tokens (sinkTokens ${S}): every row sees them whatever the window.`} ${settings.sinkLogit === null ? "No sink logit: each row's weights sum to 1." : `The sink logit ${settings.sinkLogit} joins each row's softmax without a value, so the row's weights sum to less than 1; the sink column is its share.`} ${sequences.length === 1 ? `One sequence of ${settings.kvSeqlen[0]} keys (the loaded inputs' viewed head).` : `Sequence 1 holds ${settings.kvSeqlen[1]} keys (kvSeqlen [${settings.kvSeqlen.join(", ")}]): the keys after them are padding and hidden.`}`,
  ];
  if (settings.mistake !== "none") {
    const changed = sequences.reduce((n, s) => n + s.changed.flat().filter(Boolean).length, 0);
    const difference = Math.max(...sequences.map((s) => s.outputDifference));
    const what =
      settings.mistake === "too-wide"
        ? `"a window of ${w} keys" read as window [${w}, 0]: ${w + 1} keys, one too many`
        : `the window aligned top-left: queryOffset ignored (0), as if nothing came before the rows`;
    lines.push(
      `The mistake: ${what}. It sees ${changed} cell${changed === 1 ? "" : "s"} otherwise (outlined) and moves the output by up to ${shortNumber(difference)}.`,
    );
  }
  return lines;
}

async function draw(): Promise<void> {
  const inputs = inputsOnPage();
  const settings = settingsOnPage(inputs.query.length, inputs.key[0][0].length);
  const ticket = ++generation;
  $("window-offset-value").textContent = String(settings.queryOffset);
  $("window-keys-value").textContent = String(settings.windowKeys);
  $("window-sinks-value").textContent = String(settings.sinkTokens);
  $("window-seqlen-value").textContent = String(settings.kvSeqlen[1]);
  $<HTMLInputElement>("window-sink-logit").disabled = settings.sinkLogit === null;
  const backend = state.backend;
  let sequences: WindowSequence[];
  try {
    sequences = await windowExample(settings, (q, k, v, options) => backend.steps(q, k, v, options), inputs);
  } catch (error) {
    if (ticket === generation) {
      $("window-error").textContent = `${backend.label}: ${(error as Error).message}`;
      $("window-view").dataset.drawn = String(ticket);
    }
    return;
  }
  if (ticket !== generation) {
    return;
  }
  $("window-error").textContent = "";
  // The output's largest move at full precision (the text rounds it), which the browser tests read.
  const difference = Math.max(...sequences.map((s) => s.outputDifference));
  $("window-text").dataset.difference = String(difference);
  $("window-text").replaceChildren(...textOf(settings, sequences).map((line) => element("p", {}, line)));
  $("window-maps").replaceChildren(...mapsOf(settings, sequences));
  $("window-view").dataset.drawn = String(ticket); // what a test waits on
  $("window-count").textContent =
    `queryOffset ${settings.queryOffset}, window [${settings.windowKeys - 1}, 0], computed by ${backend.label}`;
}

export function startWindowView(): void {
  fitSliders(WINDOW_EXAMPLE.queries, WINDOW_EXAMPLE.keys);
  const set = (id: string, value: number) => {
    $<HTMLInputElement>(id).value = String(value);
  };
  set("window-offset", WINDOW_DEFAULTS.queryOffset);
  set("window-keys", WINDOW_DEFAULTS.windowKeys);
  set("window-sinks", WINDOW_DEFAULTS.sinkTokens);
  set("window-seqlen", WINDOW_DEFAULTS.kvSeqlen[1]);
  $<HTMLInputElement>("window-sink-logit").value = String(WINDOW_DEFAULTS.sinkLogit);
  for (const id of [
    "window-offset",
    "window-keys",
    "window-sinks",
    "window-seqlen",
    "window-sink-on",
    "window-sink-logit",
    "window-mistake",
    "window-example",
  ]) {
    $(id).addEventListener("input", draw);
  }
  // The loaded preset's head is redrawn once the core view's recompute has its result (recompute.ts
  // marks the page busy meanwhile), so that this view never imports the module that computes it.
  new MutationObserver(() => {
    if (
      document.body.dataset.busy === undefined &&
      $<HTMLSelectElement>("window-example").value === "preset"
    ) {
      draw();
    }
  }).observe(document.body, { attributes: true, attributeFilter: ["data-busy"] });
  $("backend").addEventListener("change", draw);
  $("head").addEventListener("change", () => {
    if ($<HTMLSelectElement>("window-example").value === "preset") {
      draw();
    }
  });
  wireGrids($("window-maps"));
  draw();
}
