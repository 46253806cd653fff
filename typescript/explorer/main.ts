/**
 * The attention explorer's page: reads the controls, calls the chosen port (backends.ts), draws the
 * steps. Bundled for the browser by build.ts (esbuild); the logic it leans on is in model.ts.
 *
 * Nothing here throws to the console: every input goes through the port's own checks, and an
 * AttentionInputError is shown next to the input it names while the last good result stays on
 * screen (dimmed).
 */

import { checkOutput, outsideContract } from "../conformance/judge.ts";
import { AttentionInputError, type AttentionOptions, type AttentionSteps } from "../src/attention.ts";
import { BACKENDS, type Backend, backendNamed, DEFAULT_BACKEND } from "./backends.ts";
import { startDecodeView } from "./decode-view.ts";
import { gridMove } from "./grid.ts";
import { startLayerViews } from "./layer-view.ts";
import {
  camelCaseMessage,
  caseTokens,
  type ExplorerCase,
  errorTarget,
  errorVerdict,
  finiteRange,
  flatten,
  formatTensorText,
  numberText,
  operand,
  outerIndices,
  outputArithmetic,
  parseTensorText,
  RANDOM_LIMIT,
  REAL_MODEL_PRESET,
  randomInputs,
  SQRT_DK_DRAWS,
  SQRT_DK_GRID,
  type SqrtDkPoint,
  shortNumber,
  sliceAt,
  sqrtDkPoint,
  tutorialInputs,
  viridis,
  viridisRgb,
  weightArithmetic,
} from "./model.ts";

declare global {
  interface Window {
    EXPLORER_CASES?: readonly ExplorerCase[];
  }
}

const INPUT_NAMES = ["query", "key", "value", "attnMask"] as const;
type InputName = (typeof INPUT_NAMES)[number];
const INPUT_LABELS: Record<InputName, string> = {
  query: "query (Q) [..., Hq, Lq, E]",
  key: "key (K) [..., Hkv, Lk, E]",
  value: "value (V) [..., Hkv, Lk, Ev]",
  attnMask: "attnMask (empty: none; booleans: true = may attend; numbers: added)",
};
const EDITABLE_CELLS = 256; // cell editors for a rank-2 input of at most this many numbers
const NUMBERS_UP_TO = 24; // columns beyond which numbers no longer fit in a cell

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const cases: readonly ExplorerCase[] = window.EXPLORER_CASES ?? [];

interface Result {
  readonly steps: AttentionSteps;
  readonly inputs: Record<InputName, unknown>;
  readonly options: AttentionOptions;
  readonly scale: number;
}

const state = {
  fixture: null as ExplorerCase | null, // the fixture case loaded, while nothing was changed since
  tokens: null as readonly string[] | null, // the loaded case's tokens: its rows' and keys' labels
  result: null as Result | null, // the last good result (kept on screen when an input goes bad)
  lit: null as { step: string; i: number; j: number } | null,
  backend: backendNamed(DEFAULT_BACKEND) as Backend,
  generation: 0, // counts recomputes: an answer that arrives after a newer request is dropped
};

function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<Record<string, string>> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value !== undefined) {
      node.setAttribute(name, value);
    }
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

// ---- Input boxes -------------------------------------------------------------------------------------

function buildInputBoxes(): void {
  const boxes = $("input-boxes");
  for (const name of INPUT_NAMES) {
    const box = element("div", { class: "input-box", id: `box-${name}` });
    const label = element("label", { for: `text-${name}` }, `${name} `);
    label.append(element("span", { class: "shape", id: `shape-${name}` }));
    box.append(
      label,
      element("p", { class: "hint" }, INPUT_LABELS[name]),
      element("div", { id: `cells-${name}` }),
      element("textarea", { id: `text-${name}`, spellcheck: "false", rows: "4" }),
      element("p", { class: "error", id: `error-${name}`, role: "alert" }),
    );
    boxes.append(box);
    $(`text-${name}`).addEventListener("input", () => {
      state.fixture = null;
      recompute();
    });
  }
}

function textOf(name: InputName): HTMLTextAreaElement {
  return $(`text-${name}`);
}

function setInputs(inputs: Record<InputName, unknown>): void {
  for (const name of INPUT_NAMES) {
    textOf(name).value =
      inputs[name] === null || inputs[name] === undefined ? "" : formatTensorText(inputs[name]);
  }
}

/** Cell editors for a small rank-2 numeric input; larger ones are edited as text. */
function drawCellEditors(name: InputName, value: unknown): void {
  const holder = $(`cells-${name}`);
  holder.replaceChildren();
  if (
    name === "attnMask" ||
    !Array.isArray(value) ||
    !value.every((row) => Array.isArray(row) && row.every((x) => typeof x === "number")) ||
    value.length * (value[0]?.length ?? 0) > EDITABLE_CELLS
  ) {
    return;
  }
  const rows = value as number[][];
  const table = element("table", {
    class: "cells-edit",
    "data-input": name,
    "aria-label": `${name}, one cell per number: arrow keys move between cells`,
  });
  const here = editorCursor[name] ?? { r: 0, c: 0 };
  rows.forEach((row, r) => {
    const tr = element("tr", { "data-row": String(r) });
    row.forEach((x, c) => {
      const td = element("td");
      const input = element("input", {
        type: "text",
        value: numberText(x),
        "aria-label": `${name}[${r}][${c}]`,
        "data-r": String(r),
        "data-c": String(c),
        // One Tab stop per input (a roving tabindex), as for the heatmaps.
        tabindex:
          r === Math.min(here.r, rows.length - 1) && c === Math.min(here.c, row.length - 1) ? "0" : "-1",
      });
      input.addEventListener("change", () => {
        const parsed = parseTensorText(textOf(name).value);
        if (!parsed.ok || !Array.isArray(parsed.value)) {
          return;
        }
        const typed = parseTensorText(input.value);
        // A word that is not a number goes to the port as a string: its own check names the cell.
        (parsed.value as unknown[][])[r][c] = typed.ok && typed.value !== null ? typed.value : input.value;
        textOf(name).value = formatTensorText(parsed.value);
        state.fixture = null;
        recompute();
      });
      td.append(input);
      tr.append(td);
    });
    table.append(tr);
  });
  table.addEventListener("focusin", (event) => {
    const input = event.target as HTMLInputElement;
    editorCursor[name] = { r: Number(input.dataset.r), c: Number(input.dataset.c) };
    for (const other of table.querySelectorAll<HTMLInputElement>('input[tabindex="0"]')) {
      other.tabIndex = -1;
    }
    input.tabIndex = 0;
  });
  table.addEventListener("keydown", (event) => {
    const input = event.target as HTMLInputElement;
    const [r, c] = [Number(input.dataset.r), Number(input.dataset.c)];
    const atStart = input.selectionStart === 0 && input.selectionEnd === 0;
    const atEnd = input.selectionStart === input.value.length;
    // Up and down always move; left and right once the caret is at the edge of the number.
    const to =
      event.key === "ArrowUp"
        ? [r - 1, c]
        : event.key === "ArrowDown"
          ? [r + 1, c]
          : event.key === "ArrowLeft" && atStart
            ? [r, c - 1]
            : event.key === "ArrowRight" && atEnd
              ? [r, c + 1]
              : null;
    const next =
      to === null
        ? null
        : table.querySelector<HTMLInputElement>(`input[data-r="${to[0]}"][data-c="${to[1]}"]`);
    if (next !== null) {
      event.preventDefault();
      next.focus();
    }
  });
  holder.append(table);
}

/** The Tab stop of each input's cell editor, kept when the editors are redrawn. */
const editorCursor: Partial<Record<InputName, { r: number; c: number }>> = {};

// ---- Options -----------------------------------------------------------------------------------------

function readOptions(attnMask: unknown): AttentionOptions {
  const mode = $<HTMLSelectElement>("scale-mode").value;
  const custom = parseTensorText($<HTMLInputElement>("scale-custom").value);
  const scale = mode === "default" ? null : mode === "none" ? 1 : custom.ok ? custom.value : NaN;
  const softcapText = parseTensorText($<HTMLInputElement>("softcap").value);
  const softcap = softcapText.ok ? (softcapText.value ?? 0) : NaN;
  // The values go to the port as typed: a word that is not a number meets the port's own check.
  return {
    attnMask: attnMask as AttentionOptions["attnMask"],
    isCausal: (Object.hasOwn(rawFlags, "isCausal")
      ? rawFlags.isCausal
      : $<HTMLInputElement>("causal").checked) as boolean,
    scale: scale as number | null,
    enableGqa: (Object.hasOwn(rawFlags, "enableGqa")
      ? rawFlags.enableGqa
      : $<HTMLInputElement>("gqa").checked) as boolean,
    softcap: softcap as number,
    ...(caseQueryOffset === undefined ? {} : { queryOffset: caseQueryOffset as number }),
  };
}

// A fixture case may hold a flag that is not a boolean (to test the port's check), which a checkbox
// cannot show: it is passed to the port as it is until the checkbox is touched.
let rawFlags: { isCausal?: unknown; enableGqa?: unknown } = {};
// A decode case's queryOffset: the page has no control for it, so it is passed to the port as the
// case gives it, until another case (or the reset) is loaded.
let caseQueryOffset: unknown;

function applyParams(params: ExplorerCase["params"]): void {
  rawFlags = {};
  caseQueryOffset = params.queryOffset;
  if (typeof params.isCausal !== "boolean") {
    rawFlags.isCausal = params.isCausal;
  }
  if (typeof params.enableGqa !== "boolean") {
    rawFlags.enableGqa = params.enableGqa;
  }
  const scaleMode = $<HTMLSelectElement>("scale-mode");
  if (params.scale === null) {
    scaleMode.value = "default";
  } else {
    scaleMode.value = "custom";
    $<HTMLInputElement>("scale-custom").value = numberText(params.scale);
  }
  $<HTMLInputElement>("scale-custom").disabled = scaleMode.value !== "custom";
  $<HTMLInputElement>("causal").checked = params.isCausal === true;
  $<HTMLInputElement>("gqa").checked = params.enableGqa === true;
  $<HTMLInputElement>("softcap").value = numberText(params.softcap);
}

// ---- Recompute ---------------------------------------------------------------------------------------

/** Where an error is said: under the input box or the option it is about. */
type ErrorTarget = InputName | "scale" | "softcap" | "causal" | "gqa" | "options";
const ERROR_TARGETS: readonly ErrorTarget[] = [
  ...INPUT_NAMES,
  "scale",
  "softcap",
  "causal",
  "gqa",
  "options",
];

function clearErrors(): void {
  for (const name of ERROR_TARGETS) {
    $(`error-${name}`).textContent = "";
  }
  $("error-backend").textContent = "";
}

/** The last good result stays on screen, dimmed, and nothing explains or copies it: `words` say
 * why in the panels, `why` in the copy box. */
function showStale(words: string, why: string): void {
  $("steps").classList.add("stale");
  $("status").textContent = "showing the last good result";
  drawFixturePanel(null);
  $("arithmetic").replaceChildren(element("p", { class: "hint" }, words));
  $("cell-said").textContent = "";
  if (guide.open) {
    $("guide-text").replaceChildren(element("p", { class: "hint" }, words));
  }
  clearCopy(why);
}

function showError(target: ErrorTarget, message: string): void {
  clearErrors();
  $(`error-${target}`).textContent = message;
  showStale(
    "The inputs or options have an error (see the red line): nothing to explain.",
    "the inputs or options have an error (see the red line).",
  );
}

/** A backend that failed on inputs it accepted (no device, a lost device): said beside the picker,
 * never as an input error, since another backend computes the same inputs. */
function showBackendError(backend: Backend, error: unknown): void {
  clearErrors();
  const name = backend.source.split("/").at(-1);
  $("error-backend").textContent =
    `${name} could not compute these inputs: ${String(error)}. The inputs are fine: choose another backend under “computed by”.`;
  showStale(
    `${name} failed (see the red line under “computed by”): the heatmaps are the last good result.`,
    `${name} failed on these inputs (see the red line under “computed by”).`,
  );
}

/** Recompute with the chosen backend. Asynchronous, since a backend may be (a GPU's is); the page
 * marks itself busy (body[data-busy]) until the newest request has been drawn. */
async function recompute(): Promise<void> {
  const generation = ++state.generation;
  document.body.dataset.busy = "true";
  try {
    await recomputeNow(generation);
  } finally {
    if (generation === state.generation) {
      delete document.body.dataset.busy;
    }
  }
}

async function recomputeNow(generation: number): Promise<void> {
  const inputs = {} as Record<InputName, unknown>;
  for (const name of INPUT_NAMES) {
    const parsed = parseTensorText(textOf(name).value);
    if (!parsed.ok) {
      showError(name, `${name} is ${parsed.message}`);
      return;
    }
    inputs[name] = parsed.value;
  }
  if (
    $<HTMLSelectElement>("scale-mode").value === "custom" &&
    $<HTMLInputElement>("scale-custom").value.trim() === ""
  ) {
    // An empty box would read as "no scale given", i.e. 1/√d_k, while "custom" stays selected.
    showError("scale", "scale is custom but its box is empty: type a number, or choose 1/√d_k");
    return;
  }
  const options = readOptions(inputs.attnMask);
  const backend = state.backend;
  type Tensor = Parameters<Backend["steps"]>[0];
  const call = () =>
    backend.steps(inputs.query as Tensor, inputs.key as Tensor, inputs.value as Tensor, options);
  let timed: Timed;
  try {
    timed = await timedSteps(backend, call);
  } catch (error) {
    if (generation !== state.generation) {
      return;
    }
    if (error instanceof AttentionInputError) {
      showError(errorTarget(error.message), `AttentionInputError (${error.kind}): ${error.message}`);
      drawErrorVerdict({ kind: error.kind, message: error.message });
    } else {
      showBackendError(backend, error);
    }
    return;
  }
  if (generation !== state.generation) {
    return; // a newer request is under way
  }
  const { steps } = timed;
  clearErrors();
  const features = steps.scoresShape.length > 0 ? shapeOf(inputs.query).at(-1) : undefined;
  const scale = options.scale ?? 1 / Math.sqrt(features ?? 1);
  state.result = { steps, inputs, options, scale };
  const drawStart = performance.now();
  for (const name of INPUT_NAMES) {
    drawCellEditors(name, inputs[name]);
    $(`shape-${name}`).textContent = inputs[name] === null ? "" : JSON.stringify(shapeOf(inputs[name]));
  }
  fillHeadPicker(steps.scoresShape.slice(0, -2));
  drawSteps();
  drawFixturePanel(steps);
  drawErrorVerdict(null);
  const drawMs = performance.now() - drawStart;
  $("steps").classList.remove("stale");
  const status = $("status");
  const runs = timed.runs === 1 ? "1 run" : `median of ${timed.runs} runs`;
  const warmUp =
    timed.warmUpMs === null
      ? "after a warm-up"
      : `after a warm-up (the backend's first call, ${timed.warmUpMs.toFixed(1)} ms, not counted)`;
  const file = backend.source.split("/").at(-1);
  // A backend whose other steps are the readable port's is timed with them: the label says so.
  const what = backend.diagnostics === "readable" ? `${file}'s output and attention.ts's other steps` : file;
  status.textContent = `${what} ${milliseconds(timed.medianMs)}: ${runs} ${warmUp}; drawing ${drawMs.toFixed(1)} ms`;
  status.dataset.backend = backend.name;
  status.dataset.computeMs = String(timed.medianMs);
  status.dataset.runs = String(timed.runs);
  if (timed.warmUpMs === null) {
    delete status.dataset.warmUpMs;
  } else {
    status.dataset.warmUpMs = String(timed.warmUpMs);
  }
  status.dataset.totalMs = String(timed.medianMs + drawMs);
  refreshCopy();
}

/** Two significant digits below 1 ms (a 3 × 3 takes microseconds), one decimal above; 0 is a time
 * under the step of the clock (a page not cross-origin isolated has 0.1 ms). */
function milliseconds(ms: number): string {
  return ms >= 1
    ? `${ms.toFixed(1)} ms`
    : ms > 0
      ? `${ms.toPrecision(2)} ms`
      : "under 0.1 ms (the browser's clock step)";
}

interface Timed {
  readonly steps: AttentionSteps;
  readonly medianMs: number;
  readonly runs: number;
  readonly warmUpMs: number | null; // the backend's first call, when this was it
}

/** The backends that have been called once: a first call pays for set-up (compiling the
 * WebAssembly kernel, the GPU's device and shader, the JIT's first pass) that later calls do not. */
const warmedUp = new Set<string>();
const TIMED_RUNS = 5; // at most, for a median
const TIMING_BUDGET_MS = 1; // more runs only while the runs so far took less than this in all

/** The backend's steps, timed off the warm-up: a backend's first call runs once untimed, then the
 * call is timed, and repeated (up to TIMED_RUNS, while cheap) for a median a stray pause cannot
 * move. A large input is timed once, so the page stays quick. */
async function timedSteps(backend: Backend, call: () => Promise<AttentionSteps>): Promise<Timed> {
  let warmUpMs: number | null = null;
  if (!warmedUp.has(backend.name)) {
    const started = performance.now();
    await call(); // an input error is thrown here, before anything is timed
    warmUpMs = performance.now() - started;
    warmedUp.add(backend.name);
  }
  const times: number[] = [];
  let steps: AttentionSteps;
  do {
    const started = performance.now();
    steps = await call();
    times.push(performance.now() - started);
  } while (times.length < TIMED_RUNS && times.reduce((a, t) => a + t, 0) < TIMING_BUDGET_MS);
  times.sort((a, b) => a - b);
  const middle = times.length >> 1;
  const medianMs = times.length % 2 === 1 ? times[middle] : (times[middle - 1] + times[middle]) / 2;
  return { steps, medianMs, runs: times.length, warmUpMs };
}

function shapeOf(value: unknown): number[] {
  if (typeof value === "object" && value !== null && !Array.isArray(value) && "shape" in value) {
    return [...(value as { shape: number[] }).shape];
  }
  const shape: number[] = [];
  let node = value;
  while (Array.isArray(node)) {
    shape.push(node.length);
    node = node[0];
  }
  return shape;
}

// ---- Head picker -------------------------------------------------------------------------------------

function fillHeadPicker(outerShape: readonly number[]): void {
  const picker = $<HTMLSelectElement>("head");
  const indices = outerIndices(outerShape);
  const key = JSON.stringify(outerShape);
  if (picker.dataset.shape === key) {
    return;
  }
  picker.dataset.shape = key;
  picker.replaceChildren(
    ...indices.map((index, n) => {
      const words = index.map((x, d) => (d === index.length - 1 ? `head ${x}` : `batch ${x}`));
      return element("option", { value: String(n) }, words.length === 0 ? "the only head" : words.join(", "));
    }),
  );
  picker.disabled = indices.length <= 1;
}

/** The [batch..., head] index being viewed; null when a batch or head dim is 0 (nothing to view). */
function currentOuter(): number[] | null {
  const result = state.result;
  if (result === null) {
    return [];
  }
  const indices = outerIndices(result.steps.scoresShape.slice(0, -2));
  return indices[Number($<HTMLSelectElement>("head").value) || 0] ?? indices[0] ?? null;
}

/** The [rows, cols] matrix of an input for the viewed head (key and value: the key/value head the
 * query head reads), or null when the input has no nested rows to show (a shaped tensor). */
function inputMatrix(name: "query" | "key" | "value", outer: readonly number[]): number[][] | null {
  const result = state.result;
  if (result === null || !Array.isArray(result.inputs[name])) {
    return null;
  }
  let index = [...outer];
  if (name !== "query" && outer.length > 0) {
    const heads = result.steps.scoresShape.at(-3) ?? 1;
    const kvHeads = shapeOf(result.inputs.key).at(-3) ?? 1;
    index = [...outer.slice(0, -1), Math.floor(outer[outer.length - 1] / (heads / kvHeads))];
  }
  try {
    return sliceAt(result.inputs[name] as number[][], index);
  } catch {
    return null;
  }
}

// ---- Heatmaps ----------------------------------------------------------------------------------------

function drawSteps(): void {
  const result = state.result;
  if (result === null) {
    return;
  }
  const outer = currentOuter();
  const { steps } = result;
  if (outer === null) {
    const words = `no head to show: the scores ${JSON.stringify(steps.scoresShape)} are empty`;
    $("steps").replaceChildren(element("p", {}, words));
    return;
  }
  const [lq, lk] = steps.scoresShape.slice(-2);
  const ev = steps.outputShape.at(-1) ?? 0;
  const weights = sliceAt(steps.weights, outer);
  const expected = state.fixture?.expected ?? null;
  const figures = [
    heatmap("scores", "1. scores = Q·Kᵀ", sliceAt(steps.scores, outer), [lq, lk]),
    heatmap("logits", "2-3. logits = scores × scale (+ softcap, mask)", sliceAt(steps.logits, outer), [
      lq,
      lk,
    ]),
    heatmap("weights", "4. weights = softmax(logits)", weights, [lq, lk], true),
    heatmap("output", "5. output = weights · V", sliceAt(steps.output, outer), [lq, ev]),
  ];
  if (expected !== null) {
    const shape = expected.output.shape;
    const size = shape.slice(-2).reduce((a, n) => a * n, 1);
    const offset = outerIndices(shape.slice(0, -2)).findIndex(
      (x) => JSON.stringify(x) === JSON.stringify(outer),
    );
    const flat = expected.output.data.slice(offset * size, (offset + 1) * size);
    const rows = Array.from({ length: lq }, (_, i) => flat.slice(i * ev, (i + 1) * ev));
    figures.push(heatmap("expected", "the oracle's output (50 digits, rounded once)", rows, [lq, ev]));
  }
  $("steps").replaceChildren(...figures);
  $("step-logits").classList.add("clickable");
  drawAllHeads();
  refreshExplanation();
  drawGuide(); // the guide too is redone on every change (causal ticked, a new head, new inputs)
}

/** Every head's weights side by side, each labelled with the key/value head it reads (under
 * grouped-query attention, Hq / Hkv query heads share one). */
function drawAllHeads(): void {
  const holder = $("multi-head");
  const result = state.result;
  const wanted = $<HTMLInputElement>("all-heads").checked;
  if (!wanted || result === null) {
    holder.replaceChildren();
    return;
  }
  const { steps } = result;
  const outerShape = steps.scoresShape.slice(0, -2);
  const [lq, lk] = steps.scoresShape.slice(-2);
  const heads = outerShape.at(-1) ?? 1;
  const kvHeads = shapeOf(result.inputs.key).length >= 3 ? (shapeOf(result.inputs.key).at(-3) ?? 1) : 1;
  const group = Math.max(1, heads / kvHeads);
  const title = element("h2", {}, "Every head side by side: the weights");
  const figures = element("div", { class: "heads" });
  holder.replaceChildren(title, figures);
  figures.replaceChildren(
    ...outerIndices(outerShape).map((outer, n) => {
      const h = outer.at(-1) ?? 0;
      const batch = outer.slice(0, -1);
      const words = [
        ...batch.map((b) => `batch ${b}`),
        outer.length === 0 ? "the only head" : `head ${h}`,
        outer.length === 0 ? "" : `reads key/value head ${Math.floor(h / group)}`,
      ].filter((w) => w !== "");
      return heatmap(`weights@${n}`, `weights, ${words.join(", ")}`, sliceAt(steps.weights, outer), [lq, lk]);
    }),
  );
}

/** The keyboard's cell in each heatmap (a roving tabindex: one Tab stop per heatmap, arrow keys
 * inside), kept across recomputes. */
const cursor: Record<string, { i: number; j: number }> = {};

/** The matrices on screen, by step, for the canvases (which carry no per-cell elements). */
const shown: Record<string, readonly (readonly number[])[]> = {};

function heatmap(
  step: string,
  title: string,
  matrix: readonly (readonly number[])[],
  shape: readonly number[],
  rowSums = false,
): HTMLElement {
  shown[step] = matrix;
  const figure = element("figure", { class: "step", id: `step-${step}` });
  const caption = element("figcaption", { id: `caption-${step}` }, title);
  // The shape is its own text (a description), not run into the heatmap's name.
  const shapeText = element("span", { class: "shape", id: `shape-of-${step}` });
  shapeText.append(element("span", { class: "sr-only" }, "shape "), `[${shape.join(", ")}]`);
  caption.append(" ", shapeText);
  figure.append(caption);
  const [rows, cols] = shape;
  const at = cursor[step] ?? { i: 0, j: 0 };
  cursor[step] = { i: Math.min(at.i, Math.max(rows - 1, 0)), j: Math.min(at.j, Math.max(cols - 1, 0)) };
  const keys = step === "logits" ? "arrow keys move, Enter or Space masks the cell" : "arrow keys move";
  if (cols > NUMBERS_UP_TO) {
    figure.append(canvasHeatmap(step, matrix, rows, cols, `${title}: ${rows} by ${cols}; ${keys}`));
    figure.append(
      element("p", { class: "hint" }, "too many columns for numbers: hover a cell, or use the arrow keys"),
    );
    return figure;
  }
  const [low, high] = finiteRange(matrix);
  const size = cols > 8 ? "heat medium" : "heat";
  // A grid (the WAI-ARIA pattern): one Tab stop, arrow keys inside, each cell named in words.
  const table = element("table", {
    class: size,
    id: `table-${step}`,
    role: "grid",
    "aria-readonly": step === "logits" ? "false" : "true",
    "data-step": step,
    "aria-describedby": `shape-of-${step} heatmap-keys`,
  });
  const { column } = CELL_WORDS[stepKind(step)];
  // Built as one string and written once: many times faster than a node per cell.
  const html: string[] = [`<caption class="sr-only">${title}</caption>`];
  const sr = (words: string) => `<span class="sr-only">${words} </span>`;
  html.push(
    `<tr><td class="corner"></td>${Array.from({ length: cols }, (_, j) => `<th scope="col">${sr(column)}${positionLabel(j, column === "key" ? cols : 0)}</th>`).join("")}${
      rowSums ? '<th scope="col">Σ<span class="sr-only"> (row sum)</span></th>' : ""
    }</tr>`,
  );
  const here = cursor[step];
  matrix.forEach((row, i) => {
    html.push(`<tr><th scope="row">${sr("query")}${positionLabel(i, rows)}</th>`);
    row.forEach((x, j) => {
      let look: string;
      if (x === -Infinity) {
        look = 'class="num masked"';
      } else if (Number.isNaN(x)) {
        look = 'class="num nan"';
      } else {
        const { colour, darkText } = viridis(high > low ? (x - low) / (high - low) : 0.5);
        look = `class="num" style="background:${colour};color:${darkText ? "#000" : "#fff"}"`;
      }
      const tab = i === here.i && j === here.j ? "0" : "-1";
      const name = `${cellName(step, i, j)}: ${spokenNumber(x)}`;
      html.push(
        `<td ${look} data-i="${i}" data-j="${j}" data-value="${numberText(x)}" tabindex="${tab}" aria-label="${name}">${shortNumber(x)}</td>`,
      );
    });
    if (rowSums) {
      const sum = row.reduce((a, x) => a + x, 0);
      html.push(
        `<td class="rowsum" data-row-sum="${numberText(sum)}" aria-label="row ${i} sums to ${spokenNumber(sum)}">${shortNumber(sum)}</td>`,
      );
    }
    html.push("</tr>");
  });
  table.innerHTML = html.join("");
  figure.append(table);
  return figure;
}

/** A row's or column's header: its index, and the token at that position when the loaded case has
 * tokens and `positions` (the count of query rows or key columns; 0 for features) is theirs. */
function positionLabel(index: number, positions: number): string {
  const token = state.tokens?.length === positions ? state.tokens[index] : undefined;
  if (token === undefined) {
    return String(index);
  }
  const safe = token.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  return `${index}<span class="token"> ${safe}</span>`;
}

/** What a heatmap's cells are, in words: for a cell's name and the headers. */
const CELL_WORDS = {
  scores: { cell: (i: number, j: number) => `score of query ${i} against key ${j}`, column: "key" },
  logits: { cell: (i: number, j: number) => `logit of query ${i} for key ${j}`, column: "key" },
  weights: { cell: (i: number, j: number) => `weight of query ${i} on key ${j}`, column: "key" },
  output: { cell: (i: number, j: number) => `output of query ${i}, feature ${j}`, column: "feature" },
  expected: {
    cell: (i: number, j: number) => `the oracle's output of query ${i}, feature ${j}`,
    column: "feature",
  },
} as const;

/** The kind of a heatmap: its step, or "weights" for a head of the side-by-side view. */
function stepKind(step: string): keyof typeof CELL_WORDS {
  const kind = step.split("@")[0];
  return kind in CELL_WORDS ? (kind as keyof typeof CELL_WORDS) : "weights";
}

function cellName(step: string, i: number, j: number): string {
  return CELL_WORDS[stepKind(step)].cell(i, j);
}

/** A number as a screen reader should say it: the cell's short form, −∞ and NaN in words. */
function spokenNumber(x: number): string {
  return x === -Infinity ? "minus infinity, masked" : Number.isNaN(x) ? "not a number" : shortNumber(x);
}

/** One short sentence for the live region on each move: how the current cell came about (its name
 * and value are the focused cell's own; the whole arithmetic is in the panel, not spoken). */
function cellSentence(step: string, i: number, j: number): string {
  const result = state.result;
  const outer = currentOuter();
  const value = shown[step]?.[i]?.[j];
  const head = `${cellName(step, i, j)} is ${spokenNumber(value ?? NaN)}`;
  if (result === null || outer === null || step.includes("@")) {
    return `${head}.`;
  }
  const { steps, scale } = result;
  switch (stepKind(step)) {
    case "scores":
      return `${head}: the dot product of query row ${i} and key row ${j}.`;
    case "logits": {
      const score = sliceAt(steps.scores, outer)[i][j];
      return value === -Infinity
        ? `${head}: its weight is 0.`
        : `${head}: score ${shortNumber(score)} times scale ${shortNumber(scale)}, then softcap and mask.`;
    }
    case "weights":
      return `${head}: row ${i} of the logits through softmax, so row ${i} sums to 1.`;
    default:
      return `${head}: weights row ${i} times value column ${j}.`;
  }
}

const CANVAS_CELL = 7; // CSS pixels per cell of a canvas heatmap
const MASKED_RGB: [number, number, number] = [0xe4, 0xe4, 0xea];
const NAN_RGB: [number, number, number] = [0xff, 0x8a, 0x80];

/** A heatmap too wide for numbers, painted on one canvas: one element where a table would have
 * Lq x Lk cells to build, style and lay out (the slow part at 64 x 64). */
function canvasHeatmap(
  step: string,
  matrix: readonly (readonly number[])[],
  rows: number,
  cols: number,
  label: string,
): HTMLElement {
  const holder = element("div", { class: "canvas-holder" });
  // One pixel per cell, drawn as one ImageData write and enlarged by CSS (image-rendering:
  // pixelated): no per-cell fill style to parse.
  const canvas = element("canvas", {
    id: `canvas-${step}`,
    class: "heat-canvas",
    "data-step": step,
    width: String(cols),
    height: String(rows),
    style: `width:${cols * CANVAS_CELL}px;height:${rows * CANVAS_CELL}px`,
    tabindex: "0",
    role: "img",
    "aria-label": label,
    "aria-describedby": "heatmap-keys",
  });
  const context = canvas.getContext("2d");
  const [low, high] = finiteRange(matrix);
  if (context !== null && rows > 0 && cols > 0) {
    const image = context.createImageData(cols, rows);
    const pixels = image.data; // [rows, cols, 4] RGBA
    matrix.forEach((row, i) => {
      row.forEach((x, j) => {
        const [r, g, b] =
          x === -Infinity
            ? MASKED_RGB
            : Number.isNaN(x)
              ? NAN_RGB
              : viridisRgb(high > low ? (x - low) / (high - low) : 0.5);
        const at = (i * cols + j) * 4;
        pixels[at] = r;
        pixels[at + 1] = g;
        pixels[at + 2] = b;
        pixels[at + 3] = 255;
      });
    });
    context.putImageData(image, 0, 0);
  }
  holder.append(canvas, element("div", { class: "canvas-cursor", hidden: "" }));
  return holder;
}

/** Show (i, j) as the current cell of a heatmap: focus it (table) or move the cursor (canvas). */
function placeCursor(step: string, i: number, j: number, focus: boolean): void {
  cursor[step] = { i, j };
  const table = document.getElementById(`table-${step}`);
  if (table !== null) {
    for (const td of table.querySelectorAll<HTMLElement>('td.num[tabindex="0"]')) {
      td.tabIndex = -1;
    }
    const td = table.querySelector<HTMLElement>(`td.num[data-i="${i}"][data-j="${j}"]`);
    if (td !== null) {
      td.tabIndex = 0;
      if (focus) {
        td.focus();
      }
    }
    return;
  }
  const canvas = document.getElementById(`canvas-${step}`);
  const mark = canvas?.nextElementSibling as HTMLElement | null;
  if (canvas !== null && mark !== null) {
    mark.hidden = false;
    mark.style.left = `${j * CANVAS_CELL - 1}px`;
    mark.style.top = `${i * CANVAS_CELL - 1}px`;
    if (focus) {
      canvas.focus();
    }
  }
}

/** The heatmap cell an event is about: a table cell, a point on a canvas, or, for a key pressed on
 * a canvas, its cursor. */
function cellOf(event: Event): { step: string; i: number; j: number } | null {
  const target = event.target as HTMLElement;
  if (target instanceof HTMLCanvasElement && target.dataset.step !== undefined) {
    const step = target.dataset.step;
    const rows = shown[step]?.length ?? 0;
    const cols = shown[step]?.[0]?.length ?? 0;
    if (event instanceof MouseEvent) {
      const i = Math.floor(event.offsetY / CANVAS_CELL);
      const j = Math.floor(event.offsetX / CANVAS_CELL);
      return i >= 0 && i < rows && j >= 0 && j < cols ? { step, i, j } : null;
    }
    const at = cursor[step] ?? { i: 0, j: 0 };
    return { step, ...at };
  }
  const td = target.closest?.("td.num") as HTMLElement | null;
  const table = td?.closest("table.heat") as HTMLElement | null;
  if (td === null || td === undefined || table === null) {
    return null;
  }
  return { step: table.dataset.step ?? "", i: Number(td.dataset.i), j: Number(td.dataset.j) };
}

/** Outline the cell and its row and column; in every step's heatmap, or with `onlyOwn` (the guide,
 * which is at one step) in the cell's own heatmap only. */
function highlight(step: string, i: number, j: number, onlyOwn = false): void {
  for (const node of document.querySelectorAll(".lit-row, .lit-col, .lit-cell, tr.lit")) {
    node.classList.remove("lit-row", "lit-col", "lit-cell", "lit");
  }
  if (step.includes("@")) {
    // A head of the side-by-side view: only its own cell (the step view may show another head).
    document
      .getElementById(`table-${step}`)
      ?.querySelector(`td.num[data-i="${i}"][data-j="${j}"]`)
      ?.classList.add("lit-cell");
    return;
  }
  const square = step === "scores" || step === "logits" || step === "weights";
  for (const table of document.querySelectorAll<HTMLElement>("#steps table.heat")) {
    const own = table.dataset.step === step;
    if (onlyOwn && !own) {
      continue;
    }
    for (const td of table.querySelectorAll<HTMLElement>(`td.num[data-i="${i}"]`)) {
      td.classList.add("lit-row");
    }
    if (square && ["scores", "logits", "weights"].includes(table.dataset.step ?? "")) {
      for (const td of table.querySelectorAll<HTMLElement>(`td.num[data-j="${j}"]`)) {
        td.classList.add("lit-col");
      }
    }
    if (own) {
      table.querySelector(`td.num[data-i="${i}"][data-j="${j}"]`)?.classList.add("lit-cell");
    }
  }
  if (document.getElementById(`canvas-${step}`) !== null) {
    placeCursor(step, i, j, false);
  }
  // The query row i and the key row j in the cell editors.
  document.querySelector(`table.cells-edit[data-input="query"] tr[data-row="${i}"]`)?.classList.add("lit");
  if (square) {
    document.querySelector(`table.cells-edit[data-input="key"] tr[data-row="${j}"]`)?.classList.add("lit");
  }
}

/** After every recompute or change of view: the explanation is redone for the same cell, or
 * cleared when that cell no longer exists, so it never describes numbers that are not on screen. */
function refreshExplanation(): void {
  const lit = state.lit;
  const matrix = lit === null ? undefined : shown[lit.step];
  if (lit === null || matrix === undefined || lit.i >= matrix.length || lit.j >= (matrix[0]?.length ?? 0)) {
    state.lit = null;
    $("arithmetic").replaceChildren(element("p", { class: "hint" }, ARITHMETIC_HINT));
    $("cell-said").textContent = "";
    return;
  }
  highlight(lit.step, lit.i, lit.j);
  explain(lit.step, lit.i, lit.j);
}

const ARITHMETIC_HINT = "Hover, tap or focus a weight, logit, score or output cell to see its arithmetic.";

function explain(step: string, i: number, j: number): void {
  const result = state.result;
  if (result === null) {
    return;
  }
  state.lit = { step, i, j };
  const said = cellSentence(step, i, j);
  if ($("cell-said").textContent !== said) {
    $("cell-said").textContent = said;
  }
  if (step.includes("@")) {
    // A head of the side-by-side view: its value; the full arithmetic is in the step view.
    const value = shown[step]?.[i]?.[j];
    const title = $(`caption-${step}`).firstChild?.textContent ?? step;
    $("arithmetic").replaceChildren(
      element("p", { class: "mono" }, `${title}: [${i}][${j}] = ${numberText(value)}`),
      element("p", { class: "hint" }, "Choose this head under “view” to see its arithmetic step by step."),
    );
    return;
  }
  const outer = currentOuter();
  if (outer === null) {
    return;
  }
  const { steps, options, scale } = result;
  const box = $("arithmetic");
  let lines: string[];
  if (step === "output" || step === "expected") {
    const value = inputMatrix("value", outer);
    const weightsRow = sliceAt(steps.weights, outer)[i];
    const output = sliceAt(steps.output, outer)[i][j];
    lines =
      value === null
        ? [`output[${i}][${j}] = ${numberText(output)}`]
        : outputArithmetic(
            weightsRow,
            value.map((row) => row[j]),
            output,
            i,
            j,
          );
    const fixture = state.fixture?.expected;
    if (fixture && step === "expected") {
      const cell = Number(
        $("table-expected").querySelector(`td[data-i="${i}"][data-j="${j}"]`)?.getAttribute("data-value"),
      );
      lines.push(`oracle: ${numberText(cell)}, |difference| = ${Math.abs(output - cell).toExponential(2)}`);
    }
  } else {
    const query = inputMatrix("query", outer);
    const key = inputMatrix("key", outer);
    const maskCell = maskCellAt(result.inputs.attnMask, steps.scoresShape, outer, i, j);
    lines =
      query === null || key === null
        ? [`${step}[${i}][${j}]`]
        : weightArithmetic({
            queryRow: query[i],
            keyRow: key[j],
            score: sliceAt(steps.scores, outer)[i][j],
            scale,
            softcap: Number(options.softcap ?? 0),
            logitsRow: sliceAt(steps.logits, outer)[i],
            weight: sliceAt(steps.weights, outer)[i][j],
            i,
            j,
            isCausal: options.isCausal === true,
            maskCell,
          });
  }
  box.replaceChildren(...lines.map((line) => element("p", { class: "mono" }, line)));
}

/** The mask's cell for (outer, i, j), broadcast numpy-style (right-aligned, size-1 dims repeat). */
function maskCellAt(
  mask: unknown,
  scoresShape: readonly number[],
  outer: readonly number[],
  i: number,
  j: number,
): boolean | number | null {
  if (!Array.isArray(mask)) {
    return null;
  }
  const index = [...outer, i, j];
  const shape = shapeOf(mask);
  const offset = scoresShape.length - shape.length;
  let node: unknown = mask;
  for (let d = 0; d < shape.length; d++) {
    node = (node as unknown[])[shape[d] === 1 ? 0 : index[offset + d]];
  }
  return typeof node === "boolean" || typeof node === "number" ? node : null;
}

/** The mask as a full [B..., Hq, Lq, Lk] array of its cells (broadcast numpy-style), so that one
 * head's cell can change alone. */
function expandedMask(mask: unknown, scoresShape: readonly number[]): unknown[] {
  const build = (prefix: number[]): unknown[] => {
    const depth = prefix.length;
    if (depth === scoresShape.length - 2) {
      const [lq, lk] = scoresShape.slice(-2);
      return Array.from({ length: lq }, (_, i) =>
        Array.from({ length: lk }, (_, j) => maskCellAt(mask, scoresShape, prefix, i, j)),
      );
    }
    return Array.from({ length: scoresShape[depth] }, (_, n) => build([...prefix, n]));
  };
  return build([]);
}

/** Click, Enter or a long press on a logits cell: flip that cell of the viewed head in the mask,
 * making one if there is none. With one head the mask is [Lq, Lk]; with several it becomes
 * [B..., Hq, Lq, Lk] so the other heads keep theirs. The mode decides what is written: a boolean
 * (false: may not attend), or the float value added to the logit (a boolean mask is turned into
 * its float form first: true is 0, false is -Infinity). */
async function toggleMask(i: number, j: number): Promise<void> {
  const result = state.result;
  const outer = currentOuter();
  if (result === null || outer === null) {
    return;
  }
  const { scoresShape } = result.steps;
  const parsed = parseTensorText(textOf("attnMask").value);
  const floatMode = $<HTMLSelectElement>("mask-mode").value === "float";
  const maskValueText = parseTensorText($<HTMLInputElement>("mask-value").value);
  const maskValue = maskValueText.ok ? maskValueText.value : $<HTMLInputElement>("mask-value").value;
  const old = parsed.ok ? parsed.value : null;
  const oneHead = outer.length === 0;
  const mapCells = (x: unknown, f: (cell: unknown) => unknown): unknown =>
    Array.isArray(x) ? x.map((y) => mapCells(y, f)) : f(x);
  let mask: unknown[];
  if (old === null) {
    mask = mapCells(expandedMask(null, scoresShape), () => (floatMode ? 0 : true)) as unknown[];
  } else {
    const shape = shapeOf(old);
    if (!Array.isArray(old) || shape.length > scoresShape.length) {
      $("error-attnMask").textContent =
        `clicking edits a mask of up to ${JSON.stringify(scoresShape)}; this one is ${JSON.stringify(shape)}: edit it as text, or clear it`;
      return;
    }
    mask =
      JSON.stringify(shape) === JSON.stringify(scoresShape)
        ? (old as unknown[])
        : expandedMask(old, scoresShape);
  }
  if (floatMode) {
    mask = mapCells(mask, (x) => (x === true ? 0 : x === false ? -Infinity : x)) as unknown[];
  }
  const rows = sliceAt(mask as never, outer) as unknown[][];
  const cell = rows[i][j];
  if (floatMode) {
    rows[i][j] = cell === 0 ? maskValue : 0;
  } else {
    rows[i][j] = typeof cell === "boolean" ? !cell : cell === -Infinity ? 0 : -Infinity;
  }
  textOf("attnMask").value = formatTensorText(mask);
  const heads = outerIndices(scoresShape.slice(0, -2)).length;
  $("mask-note").textContent = oneHead
    ? ""
    : `the last click changed query ${i}, key ${j} of ${$<HTMLSelectElement>("head").selectedOptions[0]?.textContent ?? "this head"} only (of ${heads})`;
  state.fixture = null;
  await recompute();
}

const LONG_PRESS_MS = 500;

function wireHeatmaps(): void {
  for (const holder of [$("steps"), $("multi-head")]) {
    wireHeatmapsIn(holder);
  }
}

function wireHeatmapsIn(steps: HTMLElement): void {
  const show = (event: Event) => {
    const cell = cellOf(event);
    if (cell !== null) {
      highlight(cell.step, cell.i, cell.j);
      explain(cell.step, cell.i, cell.j);
    }
  };
  steps.addEventListener("mouseover", show);
  steps.addEventListener("mousemove", (event) => {
    if (event.target instanceof HTMLCanvasElement) {
      show(event);
    }
  });
  steps.addEventListener("focusin", show);
  // On touch a tap explains (a finger has no hover); a long press masks. With a mouse, a click on
  // a logits cell masks it.
  let touch = { down: false, masked: false, timer: 0 };
  steps.addEventListener("pointerdown", (event) => {
    touch = { down: event.pointerType === "touch", masked: false, timer: 0 };
    const cell = cellOf(event);
    if (touch.down && cell?.step === "logits") {
      touch.timer = window.setTimeout(() => {
        touch.masked = true;
        toggleMask(cell.i, cell.j);
      }, LONG_PRESS_MS);
    }
  });
  for (const name of ["pointerup", "pointercancel", "pointerleave"] as const) {
    steps.addEventListener(name, () => window.clearTimeout(touch.timer));
  }
  steps.addEventListener("click", (event) => {
    const cell = cellOf(event);
    if (cell === null) {
      return;
    }
    if (touch.down) {
      if (!touch.masked) {
        show(event);
      }
      return;
    }
    if (cell.step === "logits") {
      toggleMask(cell.i, cell.j);
    }
  });
  steps.addEventListener("keydown", (event) => {
    const cell = cellOf(event);
    if (cell === null) {
      return;
    }
    const matrix = shown[cell.step] ?? [];
    const moved = gridMove(event.key, cell.i, cell.j, matrix.length, matrix[0]?.length ?? 0);
    if (moved !== null) {
      event.preventDefault();
      const { i, j } = moved;
      placeCursor(cell.step, i, j, true);
      highlight(cell.step, i, j);
      explain(cell.step, i, j);
    } else if (cell.step === "logits" && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      toggleMask(cell.i, cell.j).then(() => placeCursor("logits", cell.i, cell.j, true));
    }
  });
}

// ---- A fixture case: the oracle beside the port -----------------------------------------------------

function drawFixturePanel(steps: AttentionSteps | null): void {
  const panel = $("fixture-panel");
  panel.replaceChildren();
  const fixture = state.fixture;
  if (fixture === null || steps === null) {
    if (fixture === null && $<HTMLSelectElement>("preset").value.startsWith("case:")) {
      panel.append(
        element(
          "p",
          { class: "hint" },
          "inputs or options changed: the oracle's values apply to the case as loaded (choose it again)",
        ),
      );
    }
    return;
  }
  if (fixture.expected === null) {
    return; // an invalid case: the port's error is shown next to the input, beside the expected one
  }
  const { dtype, source } = state.backend; // the rule takes the unit roundoff of the backend's dtype
  const outside = outsideContract(fixture.expected, dtype);
  if (outside !== null) {
    const why =
      dtype === "float64"
        ? "a dot product beyond the largest double"
        : `${dtype} cannot hold this case's inputs or scores`;
    panel.append(
      element(
        "p",
        { id: "fixture-verdict", class: "verdict-good", "data-used": "outside" },
        `${outside} (${why}; no answer to judge)`,
      ),
    );
    return;
  }
  const output = { shape: fixture.expected.output.shape, data: flatten(steps.output) };
  const check = checkOutput(output, { expected: fixture.expected }, dtype);
  const used = Number.isFinite(check.budgetUsed) ? `${(100 * check.budgetUsed).toFixed(1)}%` : "∞";
  const verdict = element(
    "p",
    {
      id: "fixture-verdict",
      class: check.passed ? "verdict-good" : "verdict-bad",
      "data-used": String(check.budgetUsed),
    },
    check.passed
      ? `within budget: ${used} of the error budget used`
      : `OUT OF BUDGET: ${used} of the error budget used`,
  );
  const u = dtype === "float64" ? "2⁻⁵³ (float64)" : "2⁻²⁴ (float32)";
  panel.append(
    verdict,
    element(
      "p",
      { class: "hint" },
      `fixture ${fixture.id}: ${source.split("/").at(-1)}'s output against the oracle's (exact, then 256-bit, rounded once to float64), ` +
        `every head; largest |difference| ${check.maxAbsError.toExponential(2)}. ` +
        `The rule, as compare.py: |x − expected| ≤ the fixture's ${dtype} budget, which the oracle derives as 16 · u · (1 + spread) · magnitude + 16 · error_floor, u = ${u}; ` +
        "NaN must meet NaN, an infinity the same infinity, a fully-masked row must be exactly +0.0.",
    ),
  );
  if (check.problem !== null) {
    panel.append(element("p", { class: "verdict-bad" }, check.problem));
  }
}

/** For a fixture case that must raise an error: whether the page's error is that one. */
function drawErrorVerdict(got: { kind: string; message: string } | null): void {
  const fixture = state.fixture;
  if (fixture === null || fixture.expectedError === null) {
    return;
  }
  const { passed, text } = errorVerdict(fixture.expectedError, got);
  $("fixture-panel").replaceChildren(
    element("p", { id: "fixture-verdict", class: passed ? "verdict-good" : "verdict-bad" }, text),
  );
}

// ---- Narrow screens -------------------------------------------------------------------------------

/** At 480 px or less the page is one column, and the heatmaps would sit below every input: they
 * move to just after the input box being edited (and back, on a wider screen). */
const NARROW = "(max-width: 480px)";

function wireNarrowScreens(): void {
  const narrow = window.matchMedia(NARROW);
  const home = $("steps-home");
  const place = (box: Element | null) => {
    const steps = $("steps");
    if (narrow.matches && box !== null) {
      box.after(steps);
    } else if (!narrow.matches && steps.previousElementSibling !== home) {
      home.after(steps);
    }
  };
  $("inputs-panel").addEventListener("focusin", (event) => {
    if (!guide.open) {
      // While the guide is open the heatmaps stay under it, beside the explanation.
      place((event.target as HTMLElement).closest(".input-box, fieldset, .row"));
    }
  });
  narrow.addEventListener("change", () => place(narrow.matches ? $("preset").closest(".row") : null));
  if (narrow.matches) {
    place($("preset").closest(".row"));
  }
}

// ---- Step by step ------------------------------------------------------------------------------------

declare global {
  interface Window {
    EXPLORER_SOURCES?: Record<"typescript" | "python", { steps: Record<number, string>; softmax: string }>;
  }
}

const GUIDE_STEPS = ["scores", "scale", "mask", "weights", "output"] as const;
const guide = { open: false, step: 0 };

/** A row of numbers at full precision, the first 8 and a count beyond. */
function rowText(row: readonly number[]): string {
  const shown = row.slice(0, 8).map(numberText);
  return `[${shown.join(", ")}${row.length > 8 ? `, … (${row.length})` : ""}]`;
}

function guideLines(step: number, i: number, j: number): string[] {
  const result = state.result;
  const outer = currentOuter();
  if (result === null || outer === null) {
    return ["Nothing to walk through: the inputs have an error."];
  }
  const { steps, options, scale } = result;
  const query = inputMatrix("query", outer);
  const key = inputMatrix("key", outer);
  const value = inputMatrix("value", outer);
  const scores = sliceAt(steps.scores, outer);
  const logits = sliceAt(steps.logits, outer);
  const weights = sliceAt(steps.weights, outer);
  const output = sliceAt(steps.output, outer);
  const E = query?.[0]?.length ?? 0;
  switch (GUIDE_STEPS[step]) {
    case "scores":
      return [
        `Query row ${i} asks; key row ${j} answers. Their dot product says how well they match:`,
        `q${i} = ${query === null ? "…" : rowText(query[i])}`,
        `k${j} = ${key === null ? "…" : rowText(key[j])}`,
        `q${i}·k${j} = ${
          query === null || key === null
            ? "…"
            : query[i]
                .map((q, t) => `${operand(q)}×${operand(key[j][t])}`)
                .slice(0, 8)
                .join(" + ")
        } = ${numberText(scores[i][j])}`,
        `Every query meets every key this way: scores = Q·Kᵀ, one row per query, one column per key (highlighted: row ${i}, column ${j}).`,
      ];
    case "scale":
      return [
        options.scale === null || options.scale === undefined
          ? `scale = 1/√d_k = 1/√${E} = ${numberText(scale)}: it keeps the logits' spread near 1 whatever d_k is (the √d_k panel below shows why).`
          : `scale = ${numberText(scale)} (chosen above; the default would be 1/√${E}).`,
        `logit = score × scale = ${operand(scores[i][j])} × ${numberText(scale)} = ${numberText(scores[i][j] * scale)}`,
        ...(Number(options.softcap ?? 0) > 0
          ? [
              `then softcap ${numberText(Number(options.softcap))}·tanh(x / ${numberText(Number(options.softcap))}) squashes it into (−softcap, softcap).`,
            ]
          : []),
      ];
    case "mask": {
      const causal = options.isCausal === true;
      const masked = logits[i][j] === -Infinity;
      return [
        causal
          ? `causal is on: query ${i} may look at keys 0…${i} only; key ${j} ${j > i ? "is later, so its logit becomes −∞" : "is allowed"}.`
          : "causal is off: every query may look at every key (tick causal to hide the later keys).",
        options.attnMask === null
          ? "No attnMask (click a logits cell to mask it: the cell becomes −∞ and its weight exactly 0)."
          : "attnMask is set: false (or −∞ added) hides a key; a finite number is added to the logit as a bias.",
        `logits[${i}][${j}] = ${masked ? "−∞ (masked: exp(−∞) = 0)" : numberText(logits[i][j])}`,
      ];
    }
    case "weights": {
      const row = logits[i];
      const max = Math.max(...row);
      if (max === -Infinity) {
        return [
          `Every key of row ${i} is masked: its weights are all 0 and its output is 0 (nothing to attend to).`,
        ];
      }
      const shifted = row.map((x) => x - max);
      const exps = shifted.map((x) => Math.exp(x));
      const sum = exps.reduce((a, x) => a + x, 0);
      return [
        `Softmax turns row ${i} of the logits into weights that sum to 1:`,
        `logits row ${i} = ${rowText(row)}`,
        `row max m = ${numberText(max)}; subtract it first, so every exp is of a number ≤ 0 and cannot overflow:`,
        `x − m = ${rowText(shifted)}`,
        `exp(x − m) = ${rowText(exps)}, sum = ${numberText(sum)}`,
        `weights row ${i} = exp(x − m) / sum = ${rowText(weights[i])}`,
      ];
    }
    case "output": {
      const terms = weights[i]
        .map((w, k) => `${operand(w)}·v${k}`)
        .slice(0, 6)
        .join(" + ");
      return [
        `Output row ${i} is the weights-average of the value rows: Σ_j w${i}j · v_j`,
        ...(value === null ? [] : value.slice(0, 6).map((v, k) => `v${k} = ${rowText(v)}`)),
        `out${i} = ${terms}${weights[i].length > 6 ? " + …" : ""}`,
        `= ${rowText(output[i])}`,
      ];
    }
  }
}

/** On a narrow screen the guide box sticks to the top of the screen (index.html) and the heatmaps
 * follow it; the heatmap of the step is scrolled to just below the box, so that the explanation
 * and the cell it explains are on screen together. */
function keepGuideBesideItsHeatmap(name: (typeof GUIDE_STEPS)[number], scroll: boolean): void {
  if (!window.matchMedia(NARROW).matches) {
    return;
  }
  const box = $("guide");
  if (box.nextElementSibling !== $("steps")) {
    box.after($("steps"));
  }
  if (!scroll) {
    return; // a recompute while the guide is open (an input typed in) leaves the page where it is
  }
  const target =
    name === "scores" ? "scores" : name === "weights" ? "weights" : name === "output" ? "output" : "logits";
  const figure = document.getElementById(`step-${target}`);
  if (figure !== null) {
    const below = box.getBoundingClientRect().height + 8;
    window.scrollTo({
      top: figure.getBoundingClientRect().top + window.scrollY - below,
      behavior: "instant",
    });
  }
}

/** Draw the guide at its step: the words, the highlighted rows and cell, and the source lines;
 * `moved` when the step or its rows were just chosen (on a narrow screen, its heatmap is then
 * scrolled to). */
function drawGuide(moved = false): void {
  if (!guide.open) {
    return;
  }
  const result = state.result;
  const rows = result === null ? 0 : (result.steps.scoresShape.at(-2) ?? 0);
  const cols = result === null ? 0 : (result.steps.scoresShape.at(-1) ?? 0);
  for (const [id, count] of [
    ["guide-row", rows],
    ["guide-key", cols],
  ] as const) {
    const picker = $<HTMLSelectElement>(id);
    if (picker.options.length !== count) {
      const keep = Number(picker.value) || 0;
      picker.replaceChildren(
        ...Array.from({ length: count }, (_, n) => element("option", { value: String(n) }, String(n))),
      );
      picker.value = String(Math.min(keep, Math.max(count - 1, 0)));
    }
  }
  const i = Number($<HTMLSelectElement>("guide-row").value) || 0;
  const j = Number($<HTMLSelectElement>("guide-key").value) || 0;
  const name = GUIDE_STEPS[guide.step];
  // The key row chooser only where a key row is used: the output step takes every key of the row.
  $("guide-key-label").hidden = name === "output";
  $("guide-name").textContent = `${guide.step + 1}. ${name}`;
  $("guide-count").textContent = `step ${guide.step + 1} of ${GUIDE_STEPS.length}`;
  $<HTMLButtonElement>("guide-prev").disabled = guide.step === 0;
  $<HTMLButtonElement>("guide-next").disabled = guide.step === GUIDE_STEPS.length - 1;
  $("guide-text").replaceChildren(
    ...guideLines(guide.step, i, j).map((line) => element("p", { class: "mono" }, line)),
  );
  const sources = window.EXPLORER_SOURCES;
  for (const language of ["typescript", "python"] as const) {
    const source = sources?.[language];
    // Step 4 calls softmax: its body is where the row max is subtracted, so it is shown too.
    const extra = name === "weights" && source !== undefined ? `\n\n${source.softmax}` : "";
    $(`guide-${language}`).textContent = `${source?.steps[guide.step + 1] ?? ""}${extra}`;
  }
  document.body.dataset.guideStep = name;
  keepGuideBesideItsHeatmap(name, moved);
  if (rows > 0 && cols > 0) {
    const target =
      name === "scores" ? "scores" : name === "weights" ? "weights" : name === "output" ? "output" : "logits";
    const shownJ = name === "output" ? 0 : j;
    highlight(target, i, shownJ, true); // the step's own heatmap only: the later ones come later
    explain(target, i, shownJ);
    if (name === "output") {
      for (const tr of document.querySelectorAll('table.cells-edit[data-input="value"] tr')) {
        tr.classList.add("lit");
      }
    }
  }
}

function wireGuide(): void {
  const move = (by: number) => {
    guide.step = Math.min(GUIDE_STEPS.length - 1, Math.max(0, guide.step + by));
    drawGuide(true);
  };
  $("guide-start").addEventListener("click", () => {
    guide.open = true;
    guide.step = 0;
    // Key row: the last one, so it differs from query row 0 (and causal would hide it).
    const keys = state.result?.steps.scoresShape.at(-1) ?? 1;
    $<HTMLSelectElement>("guide-key").replaceChildren(
      ...Array.from({ length: keys }, (_, n) => element("option", { value: String(n) }, String(n))),
    );
    $<HTMLSelectElement>("guide-key").value = String(Math.max(keys - 1, 0));
    $("guide").hidden = false;
    $("guide-code").hidden = false;
    drawGuide(true);
    $("guide-next").focus();
  });
  $("guide-close").addEventListener("click", () => {
    guide.open = false;
    $("guide").hidden = true;
    $("guide-code").hidden = true;
    delete document.body.dataset.guideStep;
    if (window.matchMedia(NARROW).matches) {
      $("preset").closest(".row")?.after($("steps"));
    }
    $("guide-start").focus();
  });
  $("guide-prev").addEventListener("click", () => move(-1));
  $("guide-next").addEventListener("click", () => move(1));
  for (const id of ["guide-row", "guide-key"]) {
    $(id).addEventListener("change", () => drawGuide(true));
  }
  $("guide").addEventListener("keydown", (event) => {
    if (event.target instanceof HTMLSelectElement) {
      return; // arrows there choose a row
    }
    if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
      event.preventDefault();
      move(event.key === "ArrowRight" ? 1 : -1);
    }
  });
}

// ---- Copy as a TypeScript call ------------------------------------------------------------------------

/** The package's module of each backend: what a project that installed attention-port imports. */
function packageModule(backend: Backend): string {
  return backend.name === DEFAULT_BACKEND ? "attention-port" : `attention-port/${backend.name}`;
}

/** The last good inputs and options as a call of the chosen backend's scaledDotProductAttention,
 * to paste into a file at the repository's root (or, with the package installed, to import from
 * the package's module instead). */
function typescriptCall(): string {
  const result = state.result;
  if (result === null) {
    return "";
  }
  const { inputs, options } = result;
  const backend = state.backend;
  const given: string[] = [];
  if (inputs.attnMask !== null) {
    given.push(`attnMask`);
  }
  if (options.isCausal === true) {
    given.push("isCausal: true");
  }
  if (options.scale !== null && options.scale !== undefined) {
    given.push(`scale: ${numberText(options.scale)}`);
  }
  if (Number(options.softcap ?? 0) !== 0) {
    given.push(`softcap: ${numberText(options.softcap)}`);
  }
  if (options.enableGqa === true) {
    given.push("enableGqa: true");
  }
  if (options.queryOffset !== undefined) {
    given.push(`queryOffset: ${numberText(options.queryOffset)}`);
  }
  const tensor = (name: string, x: unknown) => `const ${name} = ${formatTensorText(x)};`;
  // The GPU port hands its work to the device and answers later: its call is awaited.
  const wait = backend.name === "webgpu" ? "await " : "";
  return [
    `// computed by ${backend.label}; with the package installed, import from "${packageModule(backend)}"`,
    `import { scaledDotProductAttention } from "./${backend.nodeSource ?? backend.source}";`,
    "",
    tensor("query", inputs.query),
    tensor("key", inputs.key),
    tensor("value", inputs.value),
    ...(inputs.attnMask !== null ? [tensor("attnMask", inputs.attnMask)] : []),
    "",
    `const output = ${wait}scaledDotProductAttention(query, key, value${given.length > 0 ? `, { ${given.join(", ")} }` : ""});`,
    "console.log(output);",
    "",
  ].join("\n");
}

/** Once the copy box is open it follows every change: rewritten for the new inputs, options or
 * backend (and said so, since the clipboard still holds the old call). */
function refreshCopy(): void {
  if ($("copy-panel").hidden) {
    return;
  }
  const box = $<HTMLTextAreaElement>("copy-text");
  const text = typescriptCall();
  if (box.value !== text) {
    box.value = text;
    $("copy-note").textContent =
      "Rewritten for the current inputs and options: press “Copy as a TypeScript call” again to copy it.";
  }
}

/** While the inputs have an error there is no call to copy: the box is emptied and says why. */
function clearCopy(why: string): void {
  if ($("copy-panel").hidden) {
    return;
  }
  $<HTMLTextAreaElement>("copy-text").value = "";
  $("copy-note").textContent = `Nothing to copy: ${why}`;
}

function wireCopy(): void {
  $("copy-call").addEventListener("click", async () => {
    const box = $<HTMLTextAreaElement>("copy-text");
    $("copy-panel").hidden = false;
    if ($("steps").classList.contains("stale")) {
      clearCopy("fix the red line first.");
      return;
    }
    const text = typescriptCall();
    box.value = text;
    let copied = false;
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch {
      box.select(); // no clipboard here (a file:// page may not have one): selected, for Ctrl-C
    }
    $("copy-note").textContent = copied
      ? "Copied. Paste it into a .ts file at the repository's root and run it with node."
      : "Selected below: press Ctrl-C (or ⌘-C) to copy it.";
  });
}

// ---- Backends ----------------------------------------------------------------------------------------

async function fillBackends(): Promise<void> {
  const picker = $<HTMLSelectElement>("backend");
  picker.replaceChildren(...BACKENDS.map((b) => element("option", { value: b.name }, b.label)));
  picker.value = state.backend.name;
  const why = await Promise.all(BACKENDS.map((b) => b.unavailable()));
  const notes: string[] = [];
  BACKENDS.forEach((b, n) => {
    const option = picker.options[n];
    if (why[n] !== null) {
      option.disabled = true;
      option.title = why[n] ?? "";
      option.textContent = `${b.label} (not here: see beside)`; // the reason is beside the picker
      notes.push(`${b.name}: ${why[n]}`);
    }
  });
  $("backend-note").textContent = notes.join("; ");
  picker.addEventListener("change", () => {
    state.backend = backendNamed(picker.value) ?? state.backend;
    recompute();
  });
}

// ---- Presets -----------------------------------------------------------------------------------------

function fillPresets(): void {
  const preset = $<HTMLSelectElement>("preset");
  preset.append(element("option", { value: "tutorial" }, "tutorial example (3 tokens, d_k = 4)"));
  preset.append(element("option", { value: "random" }, "seeded random (sizes below)"));
  if (cases.some((c) => c.id === REAL_MODEL_PRESET.caseId)) {
    const words = `a real model: all-MiniLM-L6-v2's ${REAL_MODEL_PRESET.tokens.length} tokens, 12 heads`;
    preset.append(element("option", { value: "real-model" }, words));
  }
  const valid = element("optgroup", { label: "fixture cases (with the oracle's values)" });
  const invalid = element("optgroup", { label: "fixture cases that must raise an error" });
  for (const c of cases) {
    (c.expected === null ? invalid : valid).append(element("option", { value: `case:${c.id}` }, c.id));
  }
  preset.append(valid, invalid);
  preset.addEventListener("change", loadPreset);
}

function loadPreset(): void {
  const choice = $<HTMLSelectElement>("preset").value;
  const description = $("case-description");
  $<HTMLSelectElement>("head").value = "0";
  state.fixture = null;
  state.tokens = null;
  if (choice === "tutorial") {
    setInputs({ ...tutorialInputs(), attnMask: null });
    applyParams({ isCausal: false, scale: null, enableGqa: false, softcap: 0 });
    description.textContent =
      "The tutorial's first example: Q = K, three tokens of d_k = 4, V = [[1,2],[3,4],[5,6]].";
  } else if (choice === "random") {
    drawRandom();
    return;
  } else {
    const id = choice === "real-model" ? REAL_MODEL_PRESET.caseId : choice.slice("case:".length);
    const fixture = cases.find((c) => c.id === id);
    if (fixture === undefined) {
      return;
    }
    setInputs(fixture.inputs);
    applyParams(fixture.params);
    state.fixture = fixture;
    state.tokens = caseTokens(fixture);
    if (choice === "real-model") {
      $<HTMLInputElement>("all-heads").checked = true; // the point of the preset: its 12 heads at once
    }
    description.textContent = `${fixture.description} [${fixture.tags.join(", ")}]`;
    if (fixture.expectedError !== null) {
      description.textContent += ` Expected: AttentionInputError (${fixture.expectedError.kind}): ${camelCaseMessage(fixture.expectedError.message)}`;
    }
  }
  $<HTMLSelectElement>("head").dataset.shape = "";
  recompute();
}

function drawRandom(): void {
  rawFlags = {};
  const read = (id: string) => Number($<HTMLInputElement>(id).value);
  const sizes = {
    lq: read("random-lq"),
    lk: read("random-lk"),
    e: read("random-e"),
    ev: read("random-ev"),
    hq: read("random-hq"),
    hkv: read("random-hkv"),
    seed: read("random-seed"),
  };
  const bad = Object.entries(sizes).find(
    ([name, x]) =>
      !Number.isInteger(x) ||
      x < (name === "seed" ? 0 : 1) ||
      x > (name === "seed" ? 2 ** 31 : name.startsWith("h") ? 8 : RANDOM_LIMIT),
  );
  const error = $("error-random");
  if (bad !== undefined) {
    error.textContent = `${bad[0]} must be a whole number from ${bad[0] === "seed" ? 0 : 1} to ${bad[0] === "seed" ? 2 ** 31 : bad[0].startsWith("h") ? 8 : RANDOM_LIMIT}, got ${$<HTMLInputElement>(`random-${bad[0]}`).value}`;
    return;
  }
  error.textContent = "";
  $<HTMLSelectElement>("preset").value = "random";
  state.fixture = null;
  state.tokens = null;
  setInputs({ ...randomInputs(sizes), attnMask: null } as Record<InputName, unknown>);
  $<HTMLInputElement>("gqa").checked = sizes.hq !== sizes.hkv;
  $("case-description").textContent =
    `Seeded random, seed ${sizes.seed}: standard normal entries kept to 3 significant digits.`;
  $<HTMLSelectElement>("head").dataset.shape = "";
  recompute();
}

// ---- The √d_k experiment ----------------------------------------------------------------------------

let sqrtDkCurve: SqrtDkPoint[] | null = null;

const METRICS: readonly {
  key: "scoreSpread" | "maxWeight" | "entropy" | "jacobian";
  title: string;
}[] = [
  { key: "scoreSpread", title: "spread of the logits (std)" },
  { key: "maxWeight", title: "largest weight per row (mean)" },
  { key: "entropy", title: "row entropy (nats, mean)" },
  { key: "jacobian", title: "‖diag(p) − ppᵀ‖_F (mean)" },
];

function metricPair(
  point: SqrtDkPoint,
  key: (typeof METRICS)[number]["key"],
): { scaled: number; unscaled: number } {
  if (key === "scoreSpread") {
    return { scaled: point.scaledSpread, unscaled: point.scoreSpread };
  }
  return point[key];
}

/** The slider is log2(d_k), so d_k 1-16 has as much of the track as 64-1024, as on the charts. */
function drawSqrtDk(): void {
  const dk = Math.round(2 ** Number($<HTMLInputElement>("dk").value));
  $("dk").setAttribute("aria-valuetext", `d_k = ${dk}`);
  $("dk-value").textContent = String(dk);
  sqrtDkCurve ??= SQRT_DK_GRID.map((d) => sqrtDkPoint(d));
  $("sqrt-dk-draws").textContent = String(SQRT_DK_DRAWS);
  // The slider stops at the curves' points: the table shows the very numbers the charts plot.
  const here = sqrtDkCurve.find((p) => p.dk === dk) ?? sqrtDkPoint(dk);
  const table = element("table", { id: "sqrt-dk-values" });
  const head = element("tr");
  head.append(
    element("th", {}, `at d_k = ${dk}`),
    element("th", {}, "with 1/√d_k"),
    element("th", {}, "without"),
  );
  table.append(head);
  for (const metric of METRICS) {
    const pair = metricPair(here, metric.key);
    const tr = element("tr");
    tr.append(
      element("th", {}, metric.title),
      element("td", { "data-series": "scaled" }, pair.scaled.toPrecision(3)),
      element("td", { "data-series": "unscaled" }, pair.unscaled.toPrecision(3)),
    );
    table.append(tr);
  }
  $("sqrt-dk-table").replaceChildren(table);
  $("sqrt-dk-charts").replaceChildren(...METRICS.map((m) => chart(m.key, m.title, sqrtDkCurve ?? [], dk)));
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag: string, attributes: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, String(value));
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function chart(
  key: (typeof METRICS)[number]["key"],
  title: string,
  curve: readonly SqrtDkPoint[],
  dk: number,
): SVGElement {
  const [width, height, left, right, top, bottom] = [250, 150, 34, 8, 16, 22];
  const values = curve.flatMap((p) => Object.values(metricPair(p, key)));
  const yMax = Math.max(...values) * 1.05 || 1;
  const x = (d: number) => left + (Math.log2(d) / 10) * (width - left - right);
  const y = (v: number) => height - bottom - (v / yMax) * (height - top - bottom);
  const root = svg("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "data-metric": key,
  });
  root.append(svg("title", {}, `${title} against d_k, with and without 1/√d_k`));
  root.append(svg("text", { x: left, y: 11, class: "title" }, `${title} vs d_k`));
  root.append(
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#999" }),
  );
  root.append(svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#999" }));
  for (const d of [1, 8, 64, 1024]) {
    root.append(
      svg("text", { x: x(d), y: height - 8, "text-anchor": d === 1024 ? "end" : "middle" }, String(d)),
    );
  }
  for (const v of [0, yMax / 2 / 1.05, yMax / 1.05]) {
    root.append(
      svg("text", { x: left - 3, y: y(v) + 3, "text-anchor": "end" }, Number(v.toPrecision(2)).toString()),
    );
  }
  root.append(
    svg("line", {
      x1: x(dk),
      y1: top,
      x2: x(dk),
      y2: height - bottom,
      stroke: "#888",
      "stroke-dasharray": "2 2",
    }),
  );
  for (const [series, colour, dash] of [
    ["scaled", "#0072b2", ""],
    ["unscaled", "#d55e00", "5 3"],
  ] as const) {
    const points = curve.map((p) => `${x(p.dk)},${y(metricPair(p, key)[series])}`).join(" ");
    root.append(
      svg("polyline", { points, fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": dash }),
    );
    for (const p of curve) {
      const v = metricPair(p, key)[series];
      root.append(
        svg("circle", {
          cx: x(p.dk),
          cy: y(v),
          r: 2.5,
          fill: colour,
          "data-series": series,
          "data-dk": p.dk,
          "data-value": v,
        }),
      );
    }
  }
  return root;
}

// ---- Start -------------------------------------------------------------------------------------------

async function start(): Promise<void> {
  buildInputBoxes();
  fillPresets();
  wireHeatmaps();
  for (const id of ["causal", "gqa", "softcap", "scale-custom"]) {
    $(id).addEventListener("input", () => {
      if (id === "causal") {
        delete rawFlags.isCausal;
      } else if (id === "gqa") {
        delete rawFlags.enableGqa;
      }
      state.fixture = null;
      recompute();
    });
  }
  $("scale-mode").addEventListener("change", () => {
    $<HTMLInputElement>("scale-custom").disabled = $<HTMLSelectElement>("scale-mode").value !== "custom";
    state.fixture = null;
    recompute();
  });
  $("head").addEventListener("change", drawSteps);
  $("all-heads").addEventListener("change", drawAllHeads);
  // Seeded random: a new size or seed draws at once (no button to press first).
  for (const field of ["lq", "lk", "e", "ev", "hq", "hkv", "seed"]) {
    $(`random-${field}`).addEventListener("input", drawRandom);
  }
  wireNarrowScreens();
  $("show-numbers").addEventListener("change", () => {
    document.body.classList.toggle("show-numbers", $<HTMLInputElement>("show-numbers").checked);
  });
  $("mask-clear").addEventListener("click", () => {
    textOf("attnMask").value = "";
    state.fixture = null;
    recompute();
  });
  $("random-draw").addEventListener("click", drawRandom);
  $("dk").addEventListener("input", drawSqrtDk);
  $<HTMLSelectElement>("preset").value = "tutorial";
  wireGuide();
  wireCopy();
  await fillBackends();
  loadPreset();
  // The experiment's 11 × 8 draws take a moment: drawn after the heatmaps are on screen.
  window.setTimeout(drawSqrtDk, 0);
  startLayerViews();
  startDecodeView();
}

start().catch((error: unknown) => {
  // Never a bare exception in the console: say what broke on the page itself.
  document.body.prepend(element("p", { class: "error" }, `the explorer could not start: ${String(error)}`));
});
