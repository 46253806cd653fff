/**
 * The attention explorer's page: reads the controls, calls typescript/src/attention.ts, draws the
 * steps. Bundled for the browser by build.ts (esbuild); the logic it leans on is in model.ts.
 *
 * Nothing here throws to the console: every input goes through the port's own checks, and an
 * AttentionInputError is shown next to the input it names while the last good result stays on
 * screen (dimmed).
 */

import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionSteps,
  attentionSteps,
} from "../src/attention.ts";
import {
  checkOutput,
  type ExplorerCase,
  errorTarget,
  finiteRange,
  flatten,
  formatTensorText,
  numberText,
  outerIndices,
  outputArithmetic,
  parseTensorText,
  RANDOM_LIMIT,
  randomInputs,
  SQRT_DK_GRID,
  type SqrtDkPoint,
  shortNumber,
  sliceAt,
  sqrtDkPoint,
  tutorialInputs,
  viridis,
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
const FOCUSABLE_UP_TO = 256; // heatmap cells a keyboard can tab through (beyond: hover only)

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
  result: null as Result | null, // the last good result (kept on screen when an input goes bad)
  lit: null as { step: string; i: number; j: number } | null,
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
  const table = element("table", { class: "cells-edit", "data-input": name });
  rows.forEach((row, r) => {
    const tr = element("tr", { "data-row": String(r) });
    row.forEach((x, c) => {
      const td = element("td");
      const input = element("input", {
        type: "text",
        value: numberText(x),
        "aria-label": `${name}[${r}][${c}]`,
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
  holder.append(table);
}

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
  };
}

// A fixture case may hold a flag that is not a boolean (to test the port's check), which a checkbox
// cannot show: it is passed to the port as it is until the checkbox is touched.
let rawFlags: { isCausal?: unknown; enableGqa?: unknown } = {};

function applyParams(params: ExplorerCase["params"]): void {
  rawFlags = {};
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

function clearErrors(): void {
  for (const name of [...INPUT_NAMES, "options"]) {
    $(`error-${name}`).textContent = "";
  }
}

function showError(target: InputName | "options", message: string): void {
  clearErrors();
  $(`error-${target}`).textContent = message;
  $("steps").classList.add("stale");
  $("status").textContent = "showing the last good result";
  drawFixturePanel(null);
}

function recompute(): void {
  const inputs = {} as Record<InputName, unknown>;
  for (const name of INPUT_NAMES) {
    const parsed = parseTensorText(textOf(name).value);
    if (!parsed.ok) {
      showError(name, `${name} is ${parsed.message}`);
      return;
    }
    inputs[name] = parsed.value;
  }
  const options = readOptions(inputs.attnMask);
  let steps: AttentionSteps;
  const started = performance.now();
  try {
    steps = attentionSteps(
      inputs.query as Parameters<typeof attentionSteps>[0],
      inputs.key as Parameters<typeof attentionSteps>[1],
      inputs.value as Parameters<typeof attentionSteps>[2],
      options,
    );
  } catch (error) {
    if (error instanceof AttentionInputError) {
      showError(errorTarget(error.message), `AttentionInputError (${error.kind}): ${error.message}`);
    } else {
      showError("options", `unexpected error: ${String(error)}`);
    }
    return;
  }
  const computeMs = performance.now() - started;
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
  const drawMs = performance.now() - drawStart;
  $("steps").classList.remove("stale");
  const status = $("status");
  status.textContent = `attention.ts ${computeMs.toFixed(1)} ms, drawing ${drawMs.toFixed(1)} ms`;
  status.dataset.computeMs = String(computeMs);
  status.dataset.totalMs = String(computeMs + drawMs);
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
  const logits = $("table-logits");
  logits.classList.add("clickable");
}

function heatmap(
  step: string,
  title: string,
  matrix: readonly (readonly number[])[],
  shape: readonly number[],
  rowSums = false,
): HTMLElement {
  const figure = element("figure", { class: "step", id: `step-${step}` });
  const caption = element("figcaption", {}, title);
  caption.append(element("span", { class: "shape" }, `[${shape.join(", ")}]`));
  figure.append(caption);
  const [low, high] = finiteRange(matrix);
  const cols = shape[1];
  const dense = cols > NUMBERS_UP_TO;
  const focusable = shape[0] * cols <= FOCUSABLE_UP_TO;
  const size = dense ? "heat dense" : cols > 8 ? "heat medium" : "heat";
  const table = element("table", { class: size, id: `table-${step}`, "data-step": step });
  // Built as one string: for 64 x 64 matrices that is many times faster than a node per cell.
  const html: string[] = [];
  if (!dense) {
    html.push(`<tr><th></th>${Array.from({ length: cols }, (_, j) => `<th>${j}</th>`).join("")}</tr>`);
  }
  const tab = focusable ? ' tabindex="0"' : "";
  matrix.forEach((row, i) => {
    html.push(`<tr><th>${dense ? "" : i}</th>`);
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
      const text = dense ? "" : shortNumber(x);
      html.push(`<td ${look} data-i="${i}" data-j="${j}" data-value="${numberText(x)}"${tab}>${text}</td>`);
    });
    if (rowSums) {
      const sum = row.reduce((a, x) => a + x, 0);
      html.push(`<td class="rowsum" data-row-sum="${numberText(sum)}">Σ ${shortNumber(sum)}</td>`);
    }
    html.push("</tr>");
  });
  table.innerHTML = html.join("");
  figure.append(table);
  if (dense) {
    figure.append(element("p", { class: "hint" }, "too many columns for numbers: hover a cell"));
  }
  return figure;
}

function cellOf(event: Event): { step: string; i: number; j: number; td: HTMLElement } | null {
  const td = (event.target as HTMLElement).closest?.("td.num") as HTMLElement | null;
  const table = td?.closest("table.heat") as HTMLElement | null;
  if (td === null || table === null || td === undefined) {
    return null;
  }
  return { step: table.dataset.step ?? "", i: Number(td.dataset.i), j: Number(td.dataset.j), td };
}

function highlight(step: string, i: number, j: number): void {
  for (const node of document.querySelectorAll(".lit-row, .lit-col, .lit-cell, tr.lit")) {
    node.classList.remove("lit-row", "lit-col", "lit-cell", "lit");
  }
  const square = step === "scores" || step === "logits" || step === "weights";
  for (const table of document.querySelectorAll<HTMLElement>("table.heat")) {
    const own = table.dataset.step === step;
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
  // The query row i and the key row j in the cell editors.
  document.querySelector(`table.cells-edit[data-input="query"] tr[data-row="${i}"]`)?.classList.add("lit");
  if (square) {
    document.querySelector(`table.cells-edit[data-input="key"] tr[data-row="${j}"]`)?.classList.add("lit");
  }
}

function explain(step: string, i: number, j: number): void {
  const result = state.result;
  if (result === null) {
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

/** Click (or Enter on) a logits cell: flip it in a 2-D [Lq, Lk] mask, making one if there is none. */
function toggleMask(i: number, j: number): void {
  const result = state.result;
  if (result === null) {
    return;
  }
  const [lq, lk] = result.steps.scoresShape.slice(-2);
  const parsed = parseTensorText(textOf("attnMask").value);
  let mask = parsed.ok ? parsed.value : null;
  const floatMode = $<HTMLSelectElement>("mask-mode").value === "float";
  const maskValueText = parseTensorText($<HTMLInputElement>("mask-value").value);
  const maskValue = maskValueText.ok ? maskValueText.value : $<HTMLInputElement>("mask-value").value;
  if (mask === null) {
    mask = Array.from({ length: lq }, () => Array.from({ length: lk }, () => (floatMode ? 0 : true)));
  }
  const shape = shapeOf(mask);
  if (shape.length !== 2 || shape[0] !== lq || shape[1] !== lk) {
    $("error-attnMask").textContent =
      `clicking edits a 2-D [${lq}, ${lk}] mask; this one is ${JSON.stringify(shape)}: edit it as text, or clear it`;
    return;
  }
  const rows = mask as unknown[][];
  const cell = rows[i][j];
  rows[i][j] = typeof cell === "boolean" ? !cell : cell === 0 ? maskValue : 0;
  textOf("attnMask").value = formatTensorText(rows);
  state.fixture = null;
  recompute();
}

function wireHeatmaps(): void {
  const steps = $("steps");
  const show = (event: Event) => {
    const cell = cellOf(event);
    if (cell !== null) {
      highlight(cell.step, cell.i, cell.j);
      explain(cell.step, cell.i, cell.j);
    }
  };
  steps.addEventListener("mouseover", show);
  steps.addEventListener("focusin", show);
  steps.addEventListener("click", (event) => {
    const cell = cellOf(event);
    if (cell?.step === "logits") {
      toggleMask(cell.i, cell.j);
    }
  });
  steps.addEventListener("keydown", (event) => {
    const cell = cellOf(event);
    if (cell?.step === "logits" && (event.key === "Enter" || event.key === " ")) {
      event.preventDefault();
      toggleMask(cell.i, cell.j);
      $("table-logits").querySelector<HTMLElement>(`td[data-i="${cell.i}"][data-j="${cell.j}"]`)?.focus();
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
  const check = checkOutput(
    flatten(steps.output),
    fixture.expected.output.data,
    fixture.expected.errorScale.data,
  );
  const used = Number.isFinite(check.used) ? `${(100 * check.used).toFixed(1)}%` : "∞";
  const verdict = element(
    "p",
    {
      id: "fixture-verdict",
      class: check.passed ? "verdict-good" : "verdict-bad",
      "data-used": String(check.used),
    },
    check.passed
      ? `within budget: ${used} of the error budget used`
      : `OUT OF BUDGET: ${used} of the error budget used`,
  );
  panel.append(
    verdict,
    element(
      "p",
      { class: "hint" },
      `fixture ${fixture.id}: attention.ts's output against the oracle's (50-digit decimal, rounded once to float64), ` +
        `every head; largest |difference| ${check.maxAbsError.toExponential(2)}. ` +
        "The rule, as compare.py: |x − expected| ≤ 16 · u · error_scale, u = 2⁻⁵³, error_scale from the fixture; " +
        "NaN must meet NaN, a fully-masked row must be exactly +0.0.",
    ),
  );
  if (check.problem !== null) {
    panel.append(element("p", { class: "verdict-bad" }, check.problem));
  }
}

// ---- Presets -----------------------------------------------------------------------------------------

function fillPresets(): void {
  const preset = $<HTMLSelectElement>("preset");
  preset.append(element("option", { value: "tutorial" }, "tutorial example (3 tokens, d_k = 4)"));
  preset.append(element("option", { value: "random" }, "seeded random (sizes below)"));
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
  if (choice === "tutorial") {
    setInputs({ ...tutorialInputs(), attnMask: null });
    applyParams({ isCausal: false, scale: null, enableGqa: false, softcap: 0 });
    description.textContent =
      "The tutorial's first example: Q = K, three tokens of d_k = 4, V = [[1,2],[3,4],[5,6]].";
  } else if (choice === "random") {
    drawRandom();
    return;
  } else {
    const fixture = cases.find((c) => `case:${c.id}` === choice);
    if (fixture === undefined) {
      return;
    }
    setInputs(fixture.inputs);
    applyParams(fixture.params);
    state.fixture = fixture;
    description.textContent = `${fixture.description} [${fixture.tags.join(", ")}]`;
    if (fixture.expectedError !== null) {
      description.textContent += ` Expected: AttentionInputError (${fixture.expectedError.kind}): ${fixture.expectedError.message}`;
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

function drawSqrtDk(): void {
  const dk = Number($<HTMLInputElement>("dk").value);
  $("dk-value").textContent = String(dk);
  sqrtDkCurve ??= SQRT_DK_GRID.map((d) => sqrtDkPoint(d));
  const here = sqrtDkPoint(dk);
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

function start(): void {
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
  $("head").addEventListener("change", () => {
    drawSteps();
  });
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
  loadPreset();
  drawSqrtDk();
}

try {
  start();
} catch (error) {
  // Never a bare exception in the console: say what broke on the page itself.
  document.body.prepend(element("p", { class: "error" }, `the explorer could not start: ${String(error)}`));
}
