/**
 * The arithmetic panel: how the cell under the pointer or the keyboard came about, its row and
 * column outlined in every step's heatmap, and one short sentence for the live region.
 */

import { cellName, placeCursor, shown, spokenNumber, stepKind } from "./heatmap.ts";
import { numberText, outputArithmetic, shortNumber, sliceAt, weightArithmetic } from "./model.ts";
import { $, currentOuter, element, inputMatrix, shapeOf, state } from "./page.ts";

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

/** Outline the cell and its row and column; in every step's heatmap, or with `onlyOwn` (the guide,
 * which is at one step) in the cell's own heatmap only. */
export function highlight(step: string, i: number, j: number, onlyOwn = false): void {
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
export function refreshExplanation(): void {
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

export function explain(step: string, i: number, j: number): void {
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
export function maskCellAt(
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
