/**
 * The guided mode: the five steps of the core one at a time, for one query row and one key row,
 * each with its numbers worked out and its lines of attention.ts and reference.py.
 */

import { explain, highlight } from "./explain.ts";
import { numberText, operand, sliceAt } from "./model.ts";
import { NARROW } from "./narrow.ts";
import { $, currentOuter, element, guide, inputMatrix, state } from "./page.ts";

declare global {
  interface Window {
    EXPLORER_SOURCES?: Record<"typescript" | "python", { steps: Record<number, string>; softmax: string }>;
  }
}

const GUIDE_STEPS = ["scores", "scale", "mask", "weights", "output"] as const;

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
export function drawGuide(moved = false): void {
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

export function wireGuide(): void {
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
