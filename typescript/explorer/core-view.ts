/**
 * The explorer's core view: the steps of attention (scores, logits, weights, output, and the
 * oracle's output for a fixture case) as heatmaps for the head picked, every head's weights side
 * by side, and the mask edited by clicking a logit.
 */

import { explain, highlight, maskCellAt, refreshExplanation } from "./explain.ts";
import { gridMove } from "./grid.ts";
import { drawGuide } from "./guide.ts";
import { cellOf, heatmap, placeCursor, shown } from "./heatmap.ts";
import { formatTensorText, outerIndices, parseTensorText, sliceAt } from "./model.ts";
import { $, currentOuter, element, requestRecompute, shapeOf, state, textOf } from "./page.ts";

// ---- Head picker -------------------------------------------------------------------------------------

export function fillHeadPicker(outerShape: readonly number[]): void {
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

// ---- Heatmaps ----------------------------------------------------------------------------------------

export function drawSteps(): void {
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
export function drawAllHeads(): void {
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
  await requestRecompute();
}

const LONG_PRESS_MS = 500;

export function wireHeatmaps(): void {
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
