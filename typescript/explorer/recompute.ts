/**
 * The explorer's recompute: the inputs and options through the chosen backend, timed off its
 * warm-up, then every core view redrawn; an AttentionInputError is shown next to the input it
 * names while the last good result stays on screen (dimmed).
 */

import { AttentionInputError, type AttentionSteps } from "../src/attention.ts";
import type { Backend } from "./backends.ts";
import { clearCopy, refreshCopy } from "./copy-call.ts";
import { drawSteps, fillHeadPicker } from "./core-view.ts";
import { drawErrorVerdict, drawFixturePanel } from "./fixture-panel.ts";
import { drawCellEditors, readOptions } from "./inputs.ts";
import { errorTarget, parseTensorText } from "./model.ts";
import { $, element, guide, INPUT_NAMES, type InputName, shapeOf, state, textOf } from "./page.ts";

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
export async function recompute(): Promise<void> {
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
