/**
 * The explorer's layer view and RoPE view (layer-model.ts computes what they show).
 *
 * The layer view steps through the six steps of the layer lessons, each with its lines of
 * typescript/src/layer.ts and python/attention_port/layer.py (cut at their `Step N:` labels by
 * `attention-port side-by-side`, into docs/lesson-steps.json), as the guided mode does for the core.
 * The RoPE view turns a query and a key by their positions and shows why their dot product then
 * depends on the distance between the positions only.
 *
 * The page's conventions hold (grid.ts draws the heatmaps): every heatmap is a WAI-ARIA grid with
 * one Tab stop (arrow keys, Home and End inside), each cell named in words, and each move says one
 * short sentence in a live region.
 */

import type { RopeOptions } from "../src/layer.ts";
import { element, type GridWords, grid, wireGrids } from "./grid.ts";
import {
  LAYER_SIZES,
  LAYER_STEPS,
  type LayerWalk,
  layerExample,
  pairFeatures,
  ROPE_POSITIONS,
  type RopeView,
  ropeView,
  walkLayer,
} from "./layer-model.ts";
import { shortNumber } from "./model.ts";

declare global {
  interface Window {
    /** The layer lessons' six steps by number, as docs/lesson-steps.json holds them. */
    EXPLORER_LAYER_SOURCES?: Record<"typescript" | "python", { steps: Record<string, string> }>;
  }
}

type Matrix = readonly (readonly number[])[];

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;

// ---- The layer view ---------------------------------------------------------------------------

const layer = { step: 0, walk: null as LayerWalk | null };

function ropeChoice(): RopeOptions | null {
  const chosen = $<HTMLSelectElement>("layer-rope").value;
  return chosen === "off" ? null : { theta: 10000, interleaved: chosen === "interleaved" };
}

function recomputeLayer(): void {
  const seed = Number($<HTMLInputElement>("layer-seed").value) || 0;
  layer.walk = walkLayer(layerExample(seed), ropeChoice());
  drawLayer();
}

/** A weight's grid: a row per output feature, a column per input feature. */
function weightWords(name: string): GridWords {
  const cell = (i: number, j: number) =>
    `${name} row ${i} (output feature ${i}), column ${j} (input feature ${j})`;
  return {
    row: "output feature",
    column: "input feature",
    cell,
    sentence: (i, j, x) =>
      `${cell(i, j)} is ${shortNumber(x)}: a learned weight, fixed while the layer runs.`,
  };
}

/** A token-by-feature grid of the layer view. */
function tokens(name: string, what: string, column = "feature"): GridWords {
  return {
    row: "token",
    column,
    cell: (i, j) => `${name} of token ${i}, ${column} ${j}`,
    sentence: (i, j, x) => `${name} of token ${i}, ${column} ${j} is ${shortNumber(x)}: ${what}`,
  };
}

/** A grid of the layer view: its ids start "layer-", apart from the core's heatmaps. */
function layerGrid(id: string, title: string, matrix: Matrix, words: GridWords, said: string): HTMLElement {
  return grid(`layer-${id.replaceAll(" ", "-")}`, title, matrix, words, said);
}

function layerMaps(walk: LayerWalk, step: number): { text: string[]; maps: HTMLElement[] } {
  const { L, D, H, E, Ev, Dout } = LAYER_SIZES;
  const said = "layer-said";
  const heads = (name: string, list: Matrix[], what: (h: number) => string) =>
    list.map((m, h) =>
      layerGrid(`${name}-${h}`, `${name} head ${h}`, m, tokens(`${name} head ${h}`, what(h)), said),
    );
  const example = layerExample(Number($<HTMLInputElement>("layer-seed").value) || 0);
  switch (LAYER_STEPS[step]) {
    case "project":
      return {
        text: [
          `X holds ${L} tokens of D = ${D} features. Three learned weights read the queries, keys and values out of it: Q = X · W_Qᵀ, K = X · W_Kᵀ, V = X · W_Vᵀ, each weight stored [out, in] as nn.Linear stores it.`,
          `Q and K have H · E = ${H} · ${E} = ${H * E} features, V has H · Ev = ${H * Ev}: every head's features side by side, head 0 first.`,
        ],
        maps: [
          layerGrid("x", "X (the input)", example.x, tokens("X", "an input feature"), said),
          ...(["wQ", "wK", "wV"] as const).map((name) =>
            layerGrid(
              name,
              `W_${name[1]} (learned, [out, in])`,
              example[name],
              weightWords(`W_${name[1]}`),
              said,
            ),
          ),
          layerGrid("q", "Q = X · W_Qᵀ", walk.q, tokens("Q", "row i of X times row j of W_Q"), said),
          layerGrid("k", "K = X · W_Kᵀ", walk.k, tokens("K", "row i of X times row j of W_K"), said),
          layerGrid("v", "V = X · W_Vᵀ", walk.v, tokens("V", "row i of X times row j of W_V"), said),
        ],
      };
    case "split heads":
      return {
        text: [
          `Feature h · E + e of Q is head h's feature e: head 0 takes features 0 to ${E - 1}, head 1 features ${E} to ${2 * E - 1}. The transpose puts each head's ${L} rows together, [L, H, E] to [H, L, E], as the core wants them.`,
          "A reshape alone, without the transpose, would hand head 0 the features of the first tokens instead.",
        ],
        maps: [
          ...heads("Q", walk.qHeads, (h) => `features ${h * E} to ${h * E + E - 1} of Q`),
          ...heads("K", walk.kHeads, (h) => `features ${h * E} to ${h * E + E - 1} of K`),
          ...heads("V", walk.vHeads, (h) => `features ${h * Ev} to ${h * Ev + Ev - 1} of V`),
        ],
      };
    case "rotate":
      return {
        text:
          ropeChoice() === null
            ? [
                "RoPE is off (choose it above): queries and keys go to the core as they are. With RoPE, each pair of a head's features turns by an angle that grows with the token's position; the values never turn.",
              ]
            : [
                `RoPE turns every pair of each query and key head's features by position · θ_i, θ_i = 10000^(−2i/E): token 0 stays as it was, token ${L - 1} turns furthest. The values are not turned.`,
                "The RoPE view below shows why: the dot product of a turned query and key depends on the distance between their positions only.",
              ],
        maps: [
          ...heads("rotated Q", walk.qRotated, () => "this head's query after RoPE"),
          ...heads("rotated K", walk.kRotated, () => "this head's key after RoPE"),
        ],
      };
    case "attend":
      return {
        text: [
          "The attention core (attention.ts) runs once per head: softmax(q · kᵀ / √E) · v. Each head has weights of its own, [L, L], every row summing to 1, and its own output, [L, Ev].",
        ],
        maps: walk.weights.flatMap((w, h) => [
          layerGrid(
            `weights-${h}`,
            `weights of head ${h}`,
            w,
            {
              row: "query",
              column: "key",
              cell: (i, j) => `head ${h}'s weight of query ${i} on key ${j}`,
              sentence: (i, j, x) =>
                `head ${h}'s weight of query ${i} on key ${j} is ${shortNumber(x)}: row ${i} of this head sums to 1.`,
            },
            said,
          ),
          layerGrid(
            `head-output-${h}`,
            `output of head ${h}`,
            walk.headOutputs[h],
            tokens(`head ${h}'s output`, `head ${h}'s weights row i times its value column j`),
            said,
          ),
        ]),
      };
    case "merge heads":
      return {
        text: [
          `The transpose back, [H, L, Ev] to [L, H, Ev], then each token's row is the heads' outputs side by side: features 0 to ${Ev - 1} are head 0's, ${Ev} to ${2 * Ev - 1} head 1's.`,
        ],
        maps: [
          layerGrid(
            "merged",
            "merged heads",
            walk.merged,
            tokens("merged", "the heads' outputs side by side, head 0 first"),
            said,
          ),
        ],
      };
    default:
      return {
        text: [
          `One more learned weight mixes the heads: output = merged · W_Oᵀ, [L, ${Dout}]. These are multiHeadAttention's own numbers; the steps above end in them (largest difference ${shortNumber(walk.walkDifference)}).`,
        ],
        maps: [
          layerGrid("wO", "W_O (learned, [out, in])", example.wO, weightWords("W_O"), said),
          layerGrid(
            "output",
            "output = merged · W_Oᵀ",
            walk.output,
            tokens("output", "merged row i times row j of W_O"),
            said,
          ),
        ],
      };
  }
}

function drawLayer(): void {
  const walk = layer.walk;
  if (walk === null) {
    return;
  }
  const step = layer.step;
  const name = LAYER_STEPS[step];
  $("layer-step-name").textContent = `Step ${step + 1}: ${name}`;
  $("layer-count").textContent = `step ${step + 1} of ${LAYER_STEPS.length}: ${name}`;
  $<HTMLButtonElement>("layer-prev").disabled = step === 0;
  $<HTMLButtonElement>("layer-next").disabled = step === LAYER_STEPS.length - 1;
  const { text, maps } = layerMaps(walk, step);
  $("layer-text").replaceChildren(...text.map((line) => element("p", {}, line)));
  $("layer-maps").replaceChildren(...maps);
  const sources = window.EXPLORER_LAYER_SOURCES;
  for (const language of ["typescript", "python"] as const) {
    $(`layer-${language}`).textContent = sources?.[language].steps[String(step + 1)] ?? "";
  }
  document.body.dataset.layerStep = name;
}

// ---- The RoPE view ------------------------------------------------------------------------------

const ROPE_SEED = 3;

function drawRope(): void {
  const m = Number($<HTMLInputElement>("rope-query").value);
  const n = Number($<HTMLInputElement>("rope-key").value);
  const pair = Number($<HTMLSelectElement>("rope-pair").value);
  const interleaved = $<HTMLInputElement>("rope-interleaved").checked;
  const view = ropeView(ROPE_SEED, 10000, interleaved);
  $("rope-query-value").textContent = String(m);
  $("rope-key-value").textContent = String(n);
  drawCircle(view, m, n, pair, interleaved);
  // The vectors before they turn, for whoever wants to redo the arithmetic (the browser tests do).
  $("rope-circle").dataset.query = JSON.stringify(view.query);
  $("rope-circle").dataset.key = JSON.stringify(view.key);
  const [a, b] = pairFeatures(pair, interleaved);
  const theta = view.angles[pair];
  const dot = view.dots[m][n];
  $("rope-text").replaceChildren(
    element(
      "p",
      {},
      `Pair ${pair} is features ${a} and ${b}. It turns by θ_${pair} = 10000^(−2·${pair}/8) = ${shortNumber(theta)} radians per position: the query at position ${m} by ${shortNumber(m * theta)}, the key at position ${n} by ${shortNumber(n * theta)}.`,
    ),
    element(
      "p",
      {},
      `Between them is the turn (${m} − ${n}) · θ_${pair} = ${shortNumber((m - n) * theta)}, besides the angle they had: a dot product reads only the angle between two pairs, so query ${m} · key ${n} = ${shortNumber(dot)}, as for every two positions ${m - n} apart.`,
    ),
    element(
      "p",
      {},
      `Below, query m · key n for every two positions: each diagonal (m − n fixed) holds one number (the largest difference along a diagonal is ${shortNumber(view.diagonalSpread)}).`,
    ),
  );
  const words: GridWords = {
    row: "query position",
    column: "key position",
    cell: (i, j) => `query at position ${i} dot key at position ${j}, distance ${i - j}`,
    sentence: (i, j, x) =>
      `query at position ${i} dot key at position ${j} is ${shortNumber(x)}, as for every pair of positions ${i - j} apart.`,
  };
  $("rope-maps").replaceChildren(grid("rope-dots", "query m · key n", view.dots, words, "rope-said"));
  $("rope-said").textContent = `query at position ${m} dot key at position ${n} is ${shortNumber(dot)}.`;
}

const SVG = "http://www.w3.org/2000/svg";

/** The pair's two features of the query and of the key as arrows from the origin, turned. */
function drawCircle(view: RopeView, m: number, n: number, pair: number, interleaved: boolean): void {
  const [a, b] = pairFeatures(pair, interleaved);
  const size = 180;
  const middle = size / 2;
  const reach = Math.max(...[view.query, view.key].map((v) => Math.hypot(v[a], v[b])), 1e-9);
  const unit = (middle - 14) / reach;
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", String(size));
  svg.setAttribute("height", String(size));
  svg.setAttribute("role", "img");
  const qa = view.queries[m];
  const kb = view.keys[n];
  svg.setAttribute(
    "aria-label",
    `pair ${pair} of the query at position ${m} is (${shortNumber(qa[a])}, ${shortNumber(qa[b])}); of the key at position ${n}, (${shortNumber(kb[a])}, ${shortNumber(kb[b])})`,
  );
  const add = (tag: string, attributes: Record<string, string | number>) => {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes)) {
      node.setAttribute(key, String(value));
    }
    svg.append(node);
    return node;
  };
  add("circle", { cx: middle, cy: middle, r: middle - 14, fill: "none", stroke: "#d4d4dc" });
  for (const [vector, colour, id] of [
    [qa, "#0072b2", "rope-arrow-query"],
    [kb, "#d55e00", "rope-arrow-key"],
  ] as const) {
    add("line", {
      id,
      x1: middle,
      y1: middle,
      x2: middle + vector[a] * unit,
      y2: middle - vector[b] * unit,
      stroke: colour,
      "stroke-width": 3,
    });
  }
  $("rope-circle").replaceChildren(svg);
}

function wireRope(): void {
  const pair = $<HTMLSelectElement>("rope-pair");
  pair.replaceChildren(
    ...Array.from({ length: 4 }, (_, i) => element("option", { value: String(i) }, `pair ${i}`)),
  );
  for (const id of ["rope-query", "rope-key"]) {
    $<HTMLInputElement>(id).max = String(ROPE_POSITIONS - 1);
  }
  for (const id of ["rope-query", "rope-key", "rope-pair", "rope-interleaved"]) {
    $(id).addEventListener("input", drawRope);
  }
  wireGrids($("rope-maps"));
  drawRope();
}

export function startLayerViews(): void {
  const move = (by: number) => {
    layer.step = Math.min(LAYER_STEPS.length - 1, Math.max(0, layer.step + by));
    drawLayer();
  };
  $("layer-prev").addEventListener("click", () => move(-1));
  $("layer-next").addEventListener("click", () => move(1));
  $("layer-seed").addEventListener("input", recomputeLayer);
  $("layer-rope").addEventListener("input", recomputeLayer);
  wireGrids($("layer-maps"));
  recomputeLayer();
  wireRope();
}
