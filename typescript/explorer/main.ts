/**
 * The attention explorer's page: it wires the views, each a module of its own, to the page's
 * controls. Bundled for the browser by build.ts (esbuild); the logic the views lean on is in
 * model.ts, layer-model.ts and decode-model.ts, which Node's tests check.
 *
 *     page.ts           the state the core views share, and the inputs for the head on view
 *     inputs.ts         the input boxes, their cell editors and the options
 *     recompute.ts      the chosen backend on the inputs, timed; errors next to what they name
 *     core-view.ts      the steps as heatmaps (heatmap.ts), every head, the mask by clicking
 *     explain.ts        the arithmetic of the cell under the pointer or the keyboard
 *     guide.ts          the guided mode, a step at a time with its source lines
 *     fixture-panel.ts  a fixture case's verdict against the oracle
 *     copy-call.ts      the inputs as a TypeScript call
 *     pickers.ts        the backend picker and the presets
 *     narrow.ts         the one-column layout of a narrow screen
 *     sqrt-dk-view.ts   the √d_k experiment
 *     layer-view.ts, decode-view.ts  the layer, RoPE and decode views
 *     window-view.ts    the window and sink view (window-model.ts computes it)
 *
 * Nothing here throws to the console: every input goes through the port's own checks, and an
 * AttentionInputError is shown next to the input it names while the last good result stays on
 * screen (dimmed).
 */

import { wireCopy } from "./copy-call.ts";
import { drawAllHeads, drawSteps, wireHeatmaps } from "./core-view.ts";
import { startDecodeView } from "./decode-view.ts";
import { wireGuide } from "./guide.ts";
import { buildInputBoxes, wireOptions } from "./inputs.ts";
import { startLayerViews } from "./layer-view.ts";
import { wireNarrowScreens } from "./narrow.ts";
import { $, element, wireRecompute } from "./page.ts";
import { drawRandom, fillBackends, fillPresets, loadPreset } from "./pickers.ts";
import { recompute } from "./recompute.ts";
import { drawSqrtDk } from "./sqrt-dk-view.ts";
import { startWindowView } from "./window-view.ts";

async function start(): Promise<void> {
  wireRecompute(recompute);
  buildInputBoxes();
  fillPresets();
  wireHeatmaps();
  wireOptions();
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
  startWindowView();
}

start().catch((error: unknown) => {
  // Never a bare exception in the console: say what broke on the page itself.
  document.body.prepend(element("p", { class: "error" }, `the explorer could not start: ${String(error)}`));
});
