/**
 * The heatmap grids of the explorer's layer, RoPE and decode views (layer-view.ts, decode-view.ts).
 *
 * Every grid is a WAI-ARIA grid with one Tab stop (arrow keys, Home and End inside), each cell
 * named in words and carrying its number at full precision (data-value, which the browser tests
 * read), and each move says one short sentence in a live region.
 */

import { finiteRange, shortNumber, viridis } from "./model.ts";

type Matrix = readonly (readonly number[])[];

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

export function element(tag: string, attributes: Record<string, string> = {}, text?: string): HTMLElement {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, value);
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

/** What a grid's cells are, in words: "Q of token 2, feature 1". */
export interface GridWords {
  readonly row: string; // a row header's word: "token"
  readonly column: string; // a column header's word: "feature"
  readonly cell: (i: number, j: number) => string;
  readonly sentence: (i: number, j: number, value: number) => string; // said on a move
}

/** What some grids show besides the numbers. */
export interface GridMarks {
  /** The position of row 0, when a grid holds later rows of a sequence (row headers count from it). */
  readonly rowStart?: number;
  /** A word after each row's or column's index (a token), when the positions stand for words. */
  readonly rowLabels?: readonly string[];
  readonly columnLabels?: readonly string[];
  /** Rows outlined (the rows a step adds or reads). */
  readonly litRows?: readonly number[];
  /** Cells the causal rule hides: hatched instead of coloured, and left out of the colour scale. */
  readonly masked?: (i: number, j: number) => boolean;
  /** Per row, the last key it may see: a line is drawn after that cell (data-boundary holds it). */
  readonly boundary?: readonly number[];
  /** Small cells without their numbers (a wide matrix whose rows matter more than its digits). */
  readonly compact?: boolean;
}

/** The matrices on screen, by grid id, and what their cells are in words. */
const grids: Record<string, { matrix: Matrix; words: GridWords; said: string }> = {};

function escaped(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** A heatmap as a WAI-ARIA grid: one Tab stop, arrow keys inside, each cell named in words. */
export function grid(
  id: string,
  title: string,
  matrix: Matrix,
  words: GridWords,
  said: string,
  marks: GridMarks = {},
): HTMLElement {
  grids[id] = { matrix, words, said };
  const rows = matrix.length;
  const cols = matrix[0]?.length ?? 0;
  const figure = element("figure", { class: "step", id: `figure-${id}` });
  const caption = element("figcaption", {}, title);
  const shape = element("span", { class: "shape", id: `shape-of-${id}` });
  shape.append(element("span", { class: "sr-only" }, "shape "), `[${rows}, ${cols}]`);
  caption.append(" ", shape);
  figure.append(caption);
  const masked = marks.masked ?? (() => false);
  const [low, high] = finiteRange(matrix.map((row, i) => row.map((x, j) => (masked(i, j) ? NaN : x))));
  const table = element("table", {
    class: marks.compact ? "heat compact" : "heat",
    id: `table-${id}`,
    role: "grid",
    "aria-readonly": "true",
    "data-grid": id,
    "aria-describedby": `shape-of-${id} heatmap-keys`,
  });
  const sr = (text: string) => `<span class="sr-only">${text} </span>`;
  const label = (labels: readonly string[] | undefined, index: number) =>
    labels?.[index] === undefined ? "" : `<span class="token"> ${escaped(labels[index])}</span>`;
  const html = [`<caption class="sr-only">${title}</caption>`];
  html.push(
    `<tr><td class="corner"></td>${Array.from({ length: cols }, (_, j) => `<th scope="col">${sr(words.column)}${j}${label(marks.columnLabels, j)}</th>`).join("")}</tr>`,
  );
  const lit = new Set(marks.litRows ?? []);
  matrix.forEach((row, i) => {
    const edge = marks.boundary?.[i];
    html.push(
      `<tr${lit.has(i) ? ' class="lit"' : ""}${edge === undefined ? "" : ` data-boundary="${edge}"`}><th scope="row">${sr(words.row)}${i + (marks.rowStart ?? 0)}${label(marks.rowLabels, i)}</th>`,
    );
    row.forEach((x, j) => {
      const classes = ["num"];
      if (lit.has(i)) {
        classes.push("lit-row");
      }
      if (j === edge) {
        classes.push("boundary");
      }
      let style = "";
      if (masked(i, j)) {
        classes.push("masked");
      } else {
        const { colour, darkText } = viridis(high > low ? (x - low) / (high - low) : 0.5);
        style = ` style="background:${colour};color:${darkText ? "#000" : "#fff"}"`;
      }
      const tab = i === 0 && j === 0 ? "0" : "-1";
      html.push(
        `<td class="${classes.join(" ")}"${style} data-i="${i}" data-j="${j}" data-value="${x}" tabindex="${tab}" aria-label="${words.cell(i, j)}: ${shortNumber(x)}">${shortNumber(x)}</td>`,
      );
    });
    html.push("</tr>");
  });
  table.innerHTML = html.join("");
  figure.append(table);
  return figure;
}

/** Where a key moves the cursor of a rows × cols grid from (i, j): arrow keys one cell, Home and
 * End to the ends of the row, never out of the grid; null for a key that does not move it. */
export function gridMove(
  key: string,
  i: number,
  j: number,
  rows: number,
  cols: number,
): { i: number; j: number } | null {
  const moves: Record<string, [number, number]> = {
    ArrowUp: [-1, 0],
    ArrowDown: [1, 0],
    ArrowLeft: [0, -1],
    ArrowRight: [0, 1],
    Home: [0, -cols],
    End: [0, cols],
  };
  if (!Object.hasOwn(moves, key)) {
    return null;
  }
  const [di, dj] = moves[key];
  return { i: Math.min(rows - 1, Math.max(0, i + di)), j: Math.min(cols - 1, Math.max(0, j + dj)) };
}

/** Arrow keys, Home and End inside the grids of `holder`; each move says one sentence. */
export function wireGrids(holder: HTMLElement): void {
  const cellOf = (event: Event) => {
    const td = (event.target as HTMLElement).closest?.("td.num") as HTMLElement | null;
    const table = td?.closest("table[data-grid]") as HTMLElement | null;
    if (td === null || table === null) {
      return null;
    }
    return { td, table, id: table.dataset.grid!, i: Number(td.dataset.i), j: Number(td.dataset.j) };
  };
  const say = (id: string, i: number, j: number) => {
    const { matrix, words, said } = grids[id];
    $(said).textContent = words.sentence(i, j, matrix[i][j]);
  };
  holder.addEventListener("keydown", (event) => {
    const cell = cellOf(event);
    if (cell === null) {
      return;
    }
    const { matrix } = grids[cell.id];
    const moved = gridMove(event.key, cell.i, cell.j, matrix.length, matrix[0].length);
    if (moved === null) {
      return;
    }
    event.preventDefault();
    const { i, j } = moved;
    const next = cell.table.querySelector<HTMLElement>(`td[data-i="${i}"][data-j="${j}"]`)!;
    cell.td.tabIndex = -1;
    next.tabIndex = 0;
    next.focus();
    say(cell.id, i, j);
  });
  for (const name of ["mouseover", "focusin"] as const) {
    holder.addEventListener(name, (event) => {
      const cell = cellOf(event);
      if (cell !== null) {
        say(cell.id, cell.i, cell.j);
      }
    });
  }
}
