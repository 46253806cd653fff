// A browser app's use of the npm package, bundled by Vite (the dev server and a production build):
// the readable port, flash.ts, the SIMD port and the conformance kit, imported as any project
// imports them. The page
// exposes window.attentionPage for a test or a measurement to drive; it computes nothing by itself.
//
//     npm install attention-port vite
//     npx vite            (or: npx vite build && npx vite preview)

import { scaledDotProductAttention } from "attention-port";
import { runCases } from "attention-port/conformance";
import * as flash from "attention-port/flash";
import * as simd from "attention-port/simd";

/** A tensor { shape, data } (data flat, row-major) as the nested entries take it: nested arrays,
 * or the shaped form itself where a dim is 0 (nested [] cannot say the shape). */
function nestedForm({ shape, data }) {
  if (shape.includes(0)) {
    return { shape, data };
  }
  const nest = (offset, dims) => {
    if (dims.length === 0) {
      return data[offset];
    }
    const stride = dims.slice(1).reduce((a, b) => a * b, 1);
    return Array.from({ length: dims[0] }, (_, i) => nest(offset + i * stride, dims.slice(1)));
  };
  return nest(0, shape);
}

/** A tensor { shape, data } as the flat entry takes it: data a `Type` array. */
function flatForm({ shape, data }, Type) {
  return { shape, data: Type.from(data, Number) };
}

/** One case's output from each port, flat: the readable port, flash.ts and simd.ts through the
 * nested entry (float64), and simd.ts's flat entry on Float32Array inputs (computed in float32).
 * `options.attnMask` is a tensor too, with `bool` saying which kind. */
function outputs({ query, key, value, options }) {
  const { attnMask, ...rest } = options;
  const nestedOptions = { ...rest, attnMask: attnMask ? nestedForm(attnMask) : null };
  const nested = (sdpa) => {
    const output = sdpa(nestedForm(query), nestedForm(key), nestedForm(value), nestedOptions);
    return Array.isArray(output) ? output.flat(Number.POSITIVE_INFINITY) : Array.from(output.data);
  };
  const flatMask = !attnMask
    ? null
    : attnMask.bool
      ? { dtype: "bool", ...flatForm(attnMask, Uint8Array) }
      : { dtype: "float", ...flatForm(attnMask, Float32Array) };
  const float32 = simd.scaledDotProductAttentionFlat(
    flatForm(query, Float32Array),
    flatForm(key, Float32Array),
    flatForm(value, Float32Array),
    { ...rest, attnMask: flatMask },
  );
  return {
    readable: nested(scaledDotProductAttention),
    flash: nested(flash.scaledDotProductAttention),
    simd: nested(simd.scaledDotProductAttention),
    simdFloat32: Array.from(float32.data),
  };
}

/** simd.ts's flat float32 entry at [n, d] (one thread unless `workers`): the best GFLOP/s of
 * `repeats` calls, counting 4 n² d operations (two n x n x d matrix products). */
function gflops(n, d, repeats, workers = 1) {
  const random = (length) => Float32Array.from({ length }, () => Math.random() * 2 - 1);
  const [query, key, value] = [0, 1, 2].map(() => ({ shape: [n, d], data: random(n * d) }));
  simd.scaledDotProductAttentionFlat(query, key, value, { workers }); // warm up
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < repeats; r++) {
    const start = performance.now();
    simd.scaledDotProductAttentionFlat(query, key, value, { workers });
    best = Math.min(best, performance.now() - start);
  }
  return (4 * n * n * d) / (best / 1000) / 1e9;
}

/** simd.ts's flat float32 output at [n, d] with `workers` threads, as plain numbers. */
function withWorkers(n, d, workers) {
  const data = Float32Array.from({ length: n * d }, (_, i) => Math.sin(i));
  const input = { shape: [n, d], data };
  return Array.from(simd.scaledDotProductAttentionFlat(input, input, input, { workers }).data);
}

/** The conformance kit in the page: every fixture case through each port, judged in the dtype it
 * computes in; per port, the verdicts counted and the failures named. */
async function conformance() {
  const simdFloat32 = (query, key, value, options) => {
    // The nested entry first: bad input (ragged, wrong types) meets its checks and errors, which
    // flattening below would hide; then the flat entry computes in float32.
    simd.scaledDotProductAttention(query, key, value, options);
    const nested = { query, key, value };
    const flatOf = (x) => (x !== null && typeof x === "object" && "shape" in x ? x : null);
    // The kit hands nested arrays (or { shape, data } where a dim is 0): flatten for the flat entry.
    const tensor = (x) => {
      const given = flatOf(x);
      if (given) {
        return { shape: given.shape, data: Float32Array.from(given.data) };
      }
      const shape = [];
      for (let level = x; Array.isArray(level); level = level[0]) {
        shape.push(level.length);
      }
      return { shape, data: Float32Array.from(x.flat(Number.POSITIVE_INFINITY)) };
    };
    const mask = options.attnMask;
    let attnMask = null;
    if (mask !== null && mask !== undefined) {
      const t = tensor(mask);
      const bool = typeof (flatOf(mask)?.data ?? mask.flat(Number.POSITIVE_INFINITY))[0] === "boolean";
      attnMask = bool ? { dtype: "bool", shape: t.shape, data: Uint8Array.from(t.data) } : { dtype: "float", ...t };
    }
    const [q, k, v] = [nested.query, nested.key, nested.value].map(tensor);
    const out = simd.scaledDotProductAttentionFlat(q, k, v, { ...options, attnMask });
    return { shape: out.shape, data: Array.from(out.data) };
  };
  const ports = {
    readable: [scaledDotProductAttention, "float64"],
    flash: [flash.scaledDotProductAttention, "float64"],
    simd: [simd.scaledDotProductAttention, "float64"],
    simdFloat32: [simdFloat32, "float32"],
  };
  const report = {};
  for (const [name, [fn, dtype]] of Object.entries(ports)) {
    const counts = { pass: 0, fail: 0, outside: 0, failures: [] };
    for await (const verdict of runCases(fn, { dtype })) {
      counts[verdict.verdict] += 1;
      if (verdict.verdict === "fail") {
        counts.failures.push(`${verdict.caseId}: ${verdict.problem}`);
      }
    }
    report[name] = counts;
  }
  return report;
}

window.attentionPage = {
  /** Loads the SIMD kernel (the package's own loading: the .wasm Vite emitted beside the page). */
  init: (options) => simd.initSimd(undefined, options),
  outputs: (cases) => cases.map(outputs),
  gflops,
  withWorkers,
  conformance,
  kernelBuild: () => simd.kernelBuild(),
  crossOriginIsolated: () => globalThis.crossOriginIsolated === true,
};
document.querySelector("#status").textContent = "ready";
