/**
 * The explorer's input boxes (a text box per tensor, cell editors for a small one) and its options
 * (scale, softcap, causal, grouped-query heads), read as the port is called with them.
 */

import type { AttentionOptions } from "../src/attention.ts";
import { type ExplorerCase, formatTensorText, numberText, parseTensorText } from "./model.ts";
import {
  $,
  EDITABLE_CELLS,
  element,
  INPUT_LABELS,
  INPUT_NAMES,
  type InputName,
  requestRecompute,
  state,
  textOf,
} from "./page.ts";

// ---- Input boxes -------------------------------------------------------------------------------------

export function buildInputBoxes(): void {
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
      requestRecompute();
    });
  }
}

export function setInputs(inputs: Record<InputName, unknown>): void {
  for (const name of INPUT_NAMES) {
    textOf(name).value =
      inputs[name] === null || inputs[name] === undefined ? "" : formatTensorText(inputs[name]);
  }
}

/** Cell editors for a small rank-2 numeric input; larger ones are edited as text. */
export function drawCellEditors(name: InputName, value: unknown): void {
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
        requestRecompute();
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

export function readOptions(attnMask: unknown): AttentionOptions {
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
    ...caseOptions,
  };
}

// A fixture case may hold a flag that is not a boolean (to test the port's check), which a checkbox
// cannot show: it is passed to the port as it is until the checkbox is touched.
let rawFlags: { isCausal?: unknown; enableGqa?: unknown } = {};
// A case's options the page has no control for (queryOffset, window, sinkTokens, sinkLogits,
// kvSeqlen): passed to the port as the case gives them, until another case (or the reset) is loaded.
let caseOptions: Record<string, unknown> = {};
const PAGE_CONTROLS = new Set(["isCausal", "enableGqa", "scale", "softcap"]);

/** Seeded random inputs set no flag: the checkboxes say them again. */
export function forgetRawFlags(): void {
  rawFlags = {};
}

export function applyParams(params: ExplorerCase["params"]): void {
  rawFlags = {};
  caseOptions = Object.fromEntries(Object.entries(params).filter(([name]) => !PAGE_CONTROLS.has(name)));
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

/** A change of an option recomputes; a flag's checkbox, once touched, says the flag again. */
export function wireOptions(): void {
  for (const id of ["causal", "gqa", "softcap", "scale-custom"]) {
    $(id).addEventListener("input", () => {
      if (id === "causal") {
        delete rawFlags.isCausal;
      } else if (id === "gqa") {
        delete rawFlags.enableGqa;
      }
      state.fixture = null;
      requestRecompute();
    });
  }
  $("scale-mode").addEventListener("change", () => {
    $<HTMLInputElement>("scale-custom").disabled = $<HTMLSelectElement>("scale-mode").value !== "custom";
    state.fixture = null;
    requestRecompute();
  });
  $("mask-clear").addEventListener("click", () => {
    textOf("attnMask").value = "";
    state.fixture = null;
    requestRecompute();
  });
}
