// The WebGPU port (webgpu.ts) where Node can run it, with no GPU: the input checks come before any
// device (every invalid fixture gives its error here), a missing WebGPU is an error of its own kind,
// and the dispatch plan keeps every dispatch within the device's limits. The kernel's numbers are
// checked in Chromium: python/tests/test_webgpu_browser.py runs `verify --ports webgpu`.

import assert from "node:assert/strict";
import { test } from "node:test";

import fc from "fast-check";

import { loadFixtures } from "../golden/reader.ts";
import { AttentionInputError, checkShapes, type ErrorKind } from "../src/inputs.ts";
import {
  attentionSteps,
  createAttention,
  type DispatchLimits,
  describeAdapter,
  planDispatches,
  scaledDotProductAttention,
  scaledDotProductAttentionFlat,
  WebGpuUnavailableError,
} from "../src/webgpu.ts";
import { ATTENTION_WGSL, KEY_TILE, QUERY_BLOCK, VALUE_COLUMNS } from "../src/webgpu-kernel.ts";
import { normalizeMessage, runCase } from "./helpers.ts";

const cases = loadFixtures();

async function rejectsWith(run: () => Promise<unknown>, kind: ErrorKind, message: string | RegExp) {
  await assert.rejects(run, (thrown: unknown) => {
    assert.ok(thrown instanceof AttentionInputError, `threw ${String(thrown)}`);
    assert.equal(thrown.kind, kind);
    if (typeof message === "string") {
      assert.equal(normalizeMessage(thrown.message), message);
    } else {
      assert.match(thrown.message, message);
    }
    return true;
  });
}

test("every invalid fixture gives its error before any device is asked for (Node has no WebGPU)", async () => {
  const invalid = cases.filter((c) => c.expectedError !== null);
  assert.ok(invalid.length > 30);
  for (const c of invalid) {
    const { kind, message } = c.expectedError!;
    await rejectsWith(() => runCase(scaledDotProductAttention, c), kind, message);
    await rejectsWith(() => runCase(attentionSteps, c), kind, message);
  }
});

test("valid input where there is no WebGPU: WebGpuUnavailableError, saying what to do", async () => {
  const tutorial = cases.find((c) => c.id === "tutorial_seq3_dk4")!;
  await assert.rejects(
    () => runCase(scaledDotProductAttention, tutorial),
    (error: unknown) => {
      assert.ok(error instanceof WebGpuUnavailableError);
      assert.equal(error.name, "WebGpuUnavailableError");
      assert.ok(!(error instanceof AttentionInputError)); // the input is fine
      assert.match(error.message, /navigator\.gpu is undefined/);
      assert.match(error.message, /createAttention\(\{ gpu \}\)/);
      return true;
    },
  );
  const flat = { shape: [1, 1], data: Float32Array.of(1) };
  await assert.rejects(() => scaledDotProductAttentionFlat(flat, flat, flat), WebGpuUnavailableError);
});

test("a GPU object that finds no adapter, or gives no device, is WebGpuUnavailableError", async () => {
  const noAdapter = { requestAdapter: async () => null } as unknown as GPU;
  await assert.rejects(() => createAttention({ gpu: noAdapter }), /WebGPU has no adapter here/);
  const noDevice = {
    requestAdapter: async () => ({
      limits: { maxStorageBufferBindingSize: 1 << 27, maxBufferSize: 1 << 28 },
      requestDevice: async () => {
        throw new Error("device limit exceeded");
      },
    }),
  } as unknown as GPU;
  await assert.rejects(
    () => createAttention({ gpu: noDevice }),
    (error: unknown) =>
      error instanceof WebGpuUnavailableError && /device limit exceeded/.test(error.message),
  );
});

test("navigator.gpu whose requestAdapter() rejects is WebGpuUnavailableError", async () => {
  const gpu = {
    requestAdapter: async () => {
      throw new Error("adapter request refused");
    },
  };
  const original = Object.getOwnPropertyDescriptor(globalThis, "navigator");
  Object.defineProperty(globalThis, "navigator", { value: { gpu }, configurable: true });
  try {
    await assert.rejects(
      () => createAttention(),
      (error: unknown) =>
        error instanceof WebGpuUnavailableError && /adapter request refused/.test(error.message),
    );
  } finally {
    if (original === undefined) {
      delete (globalThis as { navigator?: unknown }).navigator;
    } else {
      Object.defineProperty(globalThis, "navigator", original);
    }
  }
});

test("the adapter's description says when WebGPU is a CPU emulation", () => {
  const swiftshader = describeAdapter({ info: { vendor: "google", architecture: "swiftshader" } });
  assert.equal(swiftshader.emulated, true);
  assert.equal(swiftshader.summary, "google swiftshader (CPU emulation)");
  const lavapipe = describeAdapter({
    info: { vendor: "mesa", architecture: "", description: "llvmpipe (LLVM 15)" },
  });
  assert.equal(lavapipe.emulated, true);
  const gpu = describeAdapter({ info: { vendor: "nvidia", architecture: "hopper", device: "" } });
  assert.deepEqual([gpu.emulated, gpu.summary], [false, "nvidia hopper"]);
  assert.equal(describeAdapter({}).summary, "unnamed");
});

// ---- The dispatch plan. ----

interface PlanCase {
  readonly batch: number[];
  readonly Hkv: number;
  readonly group: number;
  readonly Lq: number;
  readonly Lk: number;
  readonly E: number;
  readonly Ev: number;
  readonly mask: "none" | "full" | "rows" | "head" | "heads";
  readonly bytes: number;
  readonly groups: number;
}

/** The planned dispatches, and every check that they are a partition within the limits. */
function checkPlan(p: PlanCase): void {
  const Hq = p.Hkv * p.group;
  const query = [...p.batch, Hq, p.Lq, p.E];
  const key = [...p.batch, p.Hkv, p.Lk, p.E];
  const value = [...p.batch, p.Hkv, p.Lk, p.Ev];
  const shapes = checkShapes(query, key, value, null, p.group > 1);
  const maskShape = {
    none: null,
    full: shapes.scoresShape,
    rows: [p.Lq, p.Lk], // broadcast over batch and heads
    head: [...p.batch, Hq, 1, p.Lk], // broadcast over query rows
    heads: [Hq, p.Lq, p.Lk], // broadcast over the batch dims: starts again at each batch
  }[p.mask];
  // The mask cells row i of slice s (row-major over [B..., Hq]) reads, written out per shape.
  const cells = (s: number, i: number): [number, number] => {
    const start = {
      none: 0,
      full: (s * p.Lq + i) * p.Lk,
      rows: i * p.Lk,
      head: s * p.Lk,
      heads: ((s % Hq) * p.Lq + i) * p.Lk,
    }[p.mask];
    return [start, start + p.Lk];
  };
  const maskSize = maskShape === null ? 0 : maskShape.reduce((a, n) => a * n, 1);
  const limits: DispatchLimits = {
    maxStorageBufferBindingSize: p.bytes,
    maxComputeWorkgroupsPerDimension: p.groups,
  };
  let plan: ReturnType<typeof planDispatches>;
  try {
    plan = planDispatches(shapes, maskShape, 1, limits);
  } catch (error) {
    // A refusal only when something that cannot be cut is too large, and then kind "size".
    assert.ok(error instanceof AttentionInputError && error.kind === "size", String(error));
    const slice = 4 * p.Lk * Math.max(p.E, p.Ev);
    const block = 4 * QUERY_BLOCK * Math.max(p.E, p.Ev);
    const blockMask = maskShape === null ? 0 : Math.min(maskSize, QUERY_BLOCK * p.Lk); // a bound
    assert.ok(
      slice > p.bytes || block > p.bytes || blockMask > p.bytes || Math.ceil(p.Ev / VALUE_COLUMNS) > p.groups,
      `refused although everything fits: ${error.message}`,
    );
    return;
  }
  const slices = shapes.scoresShape.slice(0, -2).reduce((a, n) => a * n, 1);
  const covered = new Uint8Array(slices * p.Lq);
  for (const d of plan) {
    const rows = (d.slice1 - d.slice0) * (d.row1 - d.row0);
    assert.ok(d.slice1 - d.slice0 === 1 || (d.row0 === 0 && d.row1 === p.Lq), "several slices take all rows");
    assert.ok(4 * rows * Math.max(p.E, p.Ev) <= p.bytes, "query or output over the limit");
    assert.ok(4 * (d.kv1 - d.kv0) * p.Lk * Math.max(p.E, p.Ev) <= p.bytes, "key or value over the limit");
    assert.ok(d.mask1 - d.mask0 <= p.bytes && d.mask0 >= 0 && d.mask1 <= Math.max(maskSize, 0));
    assert.ok(d.slice1 - d.slice0 <= p.groups && Math.ceil((d.row1 - d.row0) / QUERY_BLOCK) <= p.groups);
    for (let s = d.slice0; s < d.slice1; s++) {
      for (let i = d.row0; i < d.row1; i++) {
        const [first, end] = cells(s, i);
        assert.ok(
          maskShape === null || p.Lk === 0 || (d.mask0 <= first && end <= d.mask1),
          "mask cells left out",
        );
        assert.equal(covered[s * p.Lq + i], 0, "a row computed twice");
        covered[s * p.Lq + i] = 1;
      }
    }
  }
  assert.ok(covered.every((x) => x === 1) || p.Ev === 0, "a row never computed");
}

test("the plan covers every row once, each dispatch within the limits, or refuses with kind size", () => {
  const planCase = fc.record({
    batch: fc.array(fc.integer({ min: 1, max: 3 }), { maxLength: 2 }),
    Hkv: fc.integer({ min: 1, max: 3 }),
    group: fc.integer({ min: 1, max: 3 }),
    Lq: fc.integer({ min: 1, max: 80 }),
    Lk: fc.integer({ min: 0, max: 80 }),
    E: fc.integer({ min: 1, max: 20 }),
    Ev: fc.integer({ min: 0, max: 140 }),
    mask: fc.constantFrom("none", "full", "rows", "head", "heads"),
    bytes: fc.integer({ min: 64, max: 40_000 }),
    groups: fc.integer({ min: 1, max: 6 }),
  }) as fc.Arbitrary<PlanCase>;
  fc.assert(
    fc.property(planCase, (p) => checkPlan(p)),
    { numRuns: 400 },
  );
});

test("within the limits the plan is one dispatch; at the limits it splits slices, then rows", () => {
  const shapes = checkShapes([2, 4, 40, 8], [2, 4, 20, 8], [2, 4, 20, 8], null, false);
  const roomy = { maxStorageBufferBindingSize: 1 << 30, maxComputeWorkgroupsPerDimension: 65535 };
  assert.equal(planDispatches(shapes, null, 1, roomy).length, 1);
  // Three slices' query (3 x 40 x 8 floats) fit in 4000 bytes, four do not: 8 slices -> 3 + 3 + 2.
  const three = { ...roomy, maxStorageBufferBindingSize: 4000 };
  assert.deepEqual(
    planDispatches(shapes, null, 1, three).map((d) => [d.slice0, d.slice1]),
    [
      [0, 3],
      [3, 6],
      [6, 8],
    ],
  );
  // One slice's 40 query rows take 1280 bytes (its 20 keys 640); 1000 bytes hold 31 rows: one
  // block of 16, then the 24 rows left (a block and a part).
  const rows = { ...roomy, maxStorageBufferBindingSize: 1000 };
  const plan = planDispatches(shapes, null, 1, rows);
  assert.deepEqual(
    plan.slice(0, 2).map((d) => [d.slice0, d.row0, d.row1]),
    [
      [0, 0, 16],
      [0, 16, 40],
    ],
  );
  assert.equal(plan.length, 8 * 2);
  // Two workgroups per dimension: at most two slices, or two blocks of rows, per dispatch.
  const groups = { ...roomy, maxComputeWorkgroupsPerDimension: 2 };
  assert.ok(planDispatches(shapes, null, 1, groups).every((d) => d.slice1 - d.slice0 === 1));
});

test("what cannot be cut and does not fit is refused, naming the limit", () => {
  const shapes = checkShapes([1, 4], [100, 4], [100, 4], null, false);
  const small = { maxStorageBufferBindingSize: 1000, maxComputeWorkgroupsPerDimension: 65535 };
  assert.throws(
    () => planDispatches(shapes, null, 1, small),
    (error: unknown) =>
      error instanceof AttentionInputError &&
      error.kind === "size" &&
      error.message ===
        "the WebGPU port cannot fit one key slice [100, 4] in one dispatch: it needs 1600, more than" +
          " this device's maxStorageBufferBindingSize = 1000 bytes; the output is [1, 4]",
  );
  const wide = checkShapes([1, 4], [1, 4], [1, 200], null, false);
  const fewGroups = { maxStorageBufferBindingSize: 1 << 30, maxComputeWorkgroupsPerDimension: 3 };
  assert.throws(() => planDispatches(wide, null, 1, fewGroups), /Ev = 200 value columns/);
  assert.equal(Math.ceil(200 / VALUE_COLUMNS), 4); // the four groups of columns it would need
  assert.equal(KEY_TILE, VALUE_COLUMNS); // a thread per key when scoring, per column when summing
});

test("the shader never holds an IEEE special value as a number: inputs, mask and output are bit patterns", () => {
  // WGSL lets an implementation assume no NaN or infinity occurs, so the kernel reads every tensor
  // as 32-bit patterns, decides NaN and ±inf from their bits, and writes NaN and ±inf as patterns.
  for (const binding of ["query", "key", "value", "mask"]) {
    assert.match(ATTENTION_WGSL, new RegExp(`var<storage, read> ${binding}: array<u32>;`));
  }
  assert.match(ATTENTION_WGSL, /var<storage, read_write> output: array<u32>;/);
  // No special value comes in as a parameter, and none is tested by a float comparison.
  assert.doesNotMatch(ATTENTION_WGSL, /params\.(nan|negativeInfinity)|isNan|isInf|!= *x\b|x *!= *x/);
  // A number is made of a tensor's bits only through finiteOr0 (0 for NaN and ±inf), or after
  // isFinite said so (the float mask's bias).
  assert.doesNotMatch(ATTENTION_WGSL, /bitcast<f32>\((query|key|value|mask)\[/);
  assert.match(ATTENTION_WGSL, /if \(isFinite\(m\)\) \{\s+x\.value = x\.value \+ bitcast<f32>\(m\);/);
});
