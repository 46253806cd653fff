/**
 * One heatmap of the core view: a WAI-ARIA grid (one Tab stop, arrow keys inside, each cell named
 * in words), or a canvas when the numbers no longer fit, with its keyboard cursor.
 */

import { finiteRange, numberText, shortNumber, viridis, viridisRgb } from "./model.ts";
import { element, NUMBERS_UP_TO, state } from "./page.ts";

/** The keyboard's cell in each heatmap (a roving tabindex: one Tab stop per heatmap, arrow keys
 * inside), kept across recomputes. */
const cursor: Record<string, { i: number; j: number }> = {};

/** The matrices on screen, by step, for the canvases (which carry no per-cell elements). */
export const shown: Record<string, readonly (readonly number[])[]> = {};

export function heatmap(
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
export function stepKind(step: string): keyof typeof CELL_WORDS {
  const kind = step.split("@")[0];
  return kind in CELL_WORDS ? (kind as keyof typeof CELL_WORDS) : "weights";
}

export function cellName(step: string, i: number, j: number): string {
  return CELL_WORDS[stepKind(step)].cell(i, j);
}

/** A number as a screen reader should say it: the cell's short form, −∞ and NaN in words. */
export function spokenNumber(x: number): string {
  return x === -Infinity ? "minus infinity, masked" : Number.isNaN(x) ? "not a number" : shortNumber(x);
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
export function placeCursor(step: string, i: number, j: number, focus: boolean): void {
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
export function cellOf(event: Event): { step: string; i: number; j: number } | null {
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
