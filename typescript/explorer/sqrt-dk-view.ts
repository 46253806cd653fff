/**
 * The √d_k experiment: why the scores are divided by √d_k, as charts of what the softmax does
 * with and without it across d_k.
 */

import { SQRT_DK_DRAWS, SQRT_DK_GRID, type SqrtDkPoint, sqrtDkPoint } from "./model.ts";
import { $, element } from "./page.ts";

let sqrtDkCurve: SqrtDkPoint[] | null = null;

const METRICS: readonly {
  key: "scoreSpread" | "maxWeight" | "entropy" | "jacobian";
  title: string;
}[] = [
  { key: "scoreSpread", title: "spread of the logits (std)" },
  { key: "maxWeight", title: "largest weight per row (mean)" },
  { key: "entropy", title: "row entropy (nats, mean)" },
  { key: "jacobian", title: "‖diag(p) − ppᵀ‖_F (mean)" },
];

function metricPair(
  point: SqrtDkPoint,
  key: (typeof METRICS)[number]["key"],
): { scaled: number; unscaled: number } {
  if (key === "scoreSpread") {
    return { scaled: point.scaledSpread, unscaled: point.scoreSpread };
  }
  return point[key];
}

/** The slider is log2(d_k), so d_k 1-16 has as much of the track as 64-1024, as on the charts. */
export function drawSqrtDk(): void {
  const dk = Math.round(2 ** Number($<HTMLInputElement>("dk").value));
  $("dk").setAttribute("aria-valuetext", `d_k = ${dk}`);
  $("dk-value").textContent = String(dk);
  sqrtDkCurve ??= SQRT_DK_GRID.map((d) => sqrtDkPoint(d));
  $("sqrt-dk-draws").textContent = String(SQRT_DK_DRAWS);
  // The slider stops at the curves' points: the table shows the very numbers the charts plot.
  const here = sqrtDkCurve.find((p) => p.dk === dk) ?? sqrtDkPoint(dk);
  const table = element("table", { id: "sqrt-dk-values" });
  const head = element("tr");
  head.append(
    element("th", {}, `at d_k = ${dk}`),
    element("th", {}, "with 1/√d_k"),
    element("th", {}, "without"),
  );
  table.append(head);
  for (const metric of METRICS) {
    const pair = metricPair(here, metric.key);
    const tr = element("tr");
    tr.append(
      element("th", {}, metric.title),
      element("td", { "data-series": "scaled" }, pair.scaled.toPrecision(3)),
      element("td", { "data-series": "unscaled" }, pair.unscaled.toPrecision(3)),
    );
    table.append(tr);
  }
  $("sqrt-dk-table").replaceChildren(table);
  $("sqrt-dk-charts").replaceChildren(...METRICS.map((m) => chart(m.key, m.title, sqrtDkCurve ?? [], dk)));
}

const SVG = "http://www.w3.org/2000/svg";

function svg(tag: string, attributes: Record<string, string | number>, text?: string): SVGElement {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) {
    node.setAttribute(name, String(value));
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

function chart(
  key: (typeof METRICS)[number]["key"],
  title: string,
  curve: readonly SqrtDkPoint[],
  dk: number,
): SVGElement {
  const [width, height, left, right, top, bottom] = [250, 150, 34, 8, 16, 22];
  const values = curve.flatMap((p) => Object.values(metricPair(p, key)));
  const yMax = Math.max(...values) * 1.05 || 1;
  const x = (d: number) => left + (Math.log2(d) / 10) * (width - left - right);
  const y = (v: number) => height - bottom - (v / yMax) * (height - top - bottom);
  const root = svg("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "data-metric": key,
  });
  root.append(svg("title", {}, `${title} against d_k, with and without 1/√d_k`));
  root.append(svg("text", { x: left, y: 11, class: "title" }, `${title} vs d_k`));
  root.append(
    svg("line", { x1: left, y1: height - bottom, x2: width - right, y2: height - bottom, stroke: "#999" }),
  );
  root.append(svg("line", { x1: left, y1: top, x2: left, y2: height - bottom, stroke: "#999" }));
  for (const d of [1, 8, 64, 1024]) {
    root.append(
      svg("text", { x: x(d), y: height - 8, "text-anchor": d === 1024 ? "end" : "middle" }, String(d)),
    );
  }
  for (const v of [0, yMax / 2 / 1.05, yMax / 1.05]) {
    root.append(
      svg("text", { x: left - 3, y: y(v) + 3, "text-anchor": "end" }, Number(v.toPrecision(2)).toString()),
    );
  }
  root.append(
    svg("line", {
      x1: x(dk),
      y1: top,
      x2: x(dk),
      y2: height - bottom,
      stroke: "#888",
      "stroke-dasharray": "2 2",
    }),
  );
  for (const [series, colour, dash] of [
    ["scaled", "#0072b2", ""],
    ["unscaled", "#d55e00", "5 3"],
  ] as const) {
    const points = curve.map((p) => `${x(p.dk)},${y(metricPair(p, key)[series])}`).join(" ");
    root.append(
      svg("polyline", { points, fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": dash }),
    );
    for (const p of curve) {
      const v = metricPair(p, key)[series];
      root.append(
        svg("circle", {
          cx: x(p.dk),
          cy: y(v),
          r: 2.5,
          fill: colour,
          "data-series": series,
          "data-dk": p.dk,
          "data-value": v,
        }),
      );
    }
  }
  return root;
}
