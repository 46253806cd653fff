/**
 * The backend picker and the presets: the tutorial example, seeded random inputs, the real model
 * and every fixture case.
 */

import { BACKENDS, backendNamed } from "./backends.ts";
import { applyParams, forgetRawFlags, setInputs } from "./inputs.ts";
import {
  camelCaseMessage,
  caseTokens,
  RANDOM_LIMIT,
  REAL_MODEL_PRESET,
  randomInputs,
  tutorialInputs,
} from "./model.ts";
import { $, cases, element, type InputName, state } from "./page.ts";
import { recompute } from "./recompute.ts";

// ---- Backends ----------------------------------------------------------------------------------------

export async function fillBackends(): Promise<void> {
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

export function fillPresets(): void {
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

export function loadPreset(): void {
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

export function drawRandom(): void {
  forgetRawFlags();
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
