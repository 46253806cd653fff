// Small helpers shared by the tests. None of them imports a port: the fixture helpers run the
// port they are given, so that every port is held to the same rule.

import assert from "node:assert/strict";

import type { AttentionOptions, AttentionSteps, NestedArray, TensorInput } from "../src/attention.ts";
import { type ExpectedValues, type FixtureCase, type FixtureTensor, portTensor } from "../src/fixtures.ts";
import { AttentionInputError, type ErrorKind } from "../src/inputs.ts";

/** Every number of a nested array, row-major. */
export function flatten(x: NestedArray | number): number[] {
  return Array.isArray(x) ? (x as NestedArray[]).flatMap((y) => flatten(y)) : [x];
}

export function product(shape: readonly number[]): number {
  return shape.reduce((a, n) => a * n, 1);
}

/** A flat row-major array -> nested arrays of `shape` (shape must have no zero dim but the last). */
export function unflatten<T>(data: readonly T[], shape: readonly number[]): unknown {
  if (shape.length === 0) {
    return data[0];
  }
  const size = product(shape.slice(1));
  return Array.from({ length: shape[0] }, (_, n) =>
    unflatten(data.slice(n * size, (n + 1) * size), shape.slice(1)),
  );
}

/** Row-major strides of a shape. */
export function strides(shape: readonly number[]): number[] {
  const result = new Array<number>(shape.length);
  let stride = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    result[d] = stride;
    stride *= shape[d];
  }
  return result;
}

/** numpy-style broadcast of a flat tensor to a larger shape (right-aligned, size-1 dims repeat). */
export function broadcast<T>(data: readonly T[], shape: readonly number[], target: readonly number[]): T[] {
  const offset = target.length - shape.length;
  const source = strides(shape);
  const out: T[] = [];
  for (let flat = 0; flat < product(target); flat++) {
    let rest = flat;
    let at = 0;
    for (let d = target.length - 1; d >= 0; d--) {
      const index = rest % target[d];
      rest = Math.floor(rest / target[d]);
      const m = d - offset;
      if (m >= 0 && shape[m] !== 1) {
        at += index * source[m];
      }
    }
    out.push(data[at]);
  }
  return out;
}

/** |a - b| <= tolerance, NaN only where NaN is expected. */
export function close(a: number, b: number, tolerance: number): boolean {
  if (Number.isNaN(b)) {
    return Number.isNaN(a);
  }
  return a === b || Math.abs(a - b) <= tolerance;
}

// ---- Fixtures: the tolerance rule's float64 twin. ----
//
// compare.py is the rule; this is its float64 case, so that `npm test` can hold the TypeScript
// ports to the fixtures without Python. python/tests/test_rule_twin.py holds this twin to
// compare.py on every fixture, with right and wrong answers of every kind: if one changes alone,
// that test fails.

const K = 16;
const UNIT_ROUNDOFF = 2 ** -53; // float64

/** A port's attentionSteps or scaledDotProductAttention, as attention.ts and flash.ts export them. */
export type PortFunction<T> = (
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
) => T;

/** The camelCase names back to Python's, so both languages' messages can be compared. */
export function normalizeMessage(message: string): string {
  return message
    .replaceAll("attnMask", "attn_mask")
    .replaceAll("enableGqa", "enable_gqa")
    .replaceAll("isCausal", "is_causal")
    .replaceAll("memoryLimit", "memory_limit");
}

/** One fixture case through `port`: a valid case's tensors as the port takes them (fixtures.ts's
 * portTensor), an invalid case's inputs exactly as written. */
export function runCase<T>(port: PortFunction<T>, c: FixtureCase): T {
  const tensor = (x: unknown) =>
    c.expected === null ? x : x === null ? null : portTensor(x as FixtureTensor);
  const options = {
    attnMask: tensor(c.inputs.attnMask),
    isCausal: c.params.isCausal,
    scale: c.params.scale,
    enableGqa: c.params.enableGqa,
    softcap: c.params.softcap,
  } as unknown as AttentionOptions;
  const input = (x: unknown) => tensor(x) as TensorInput;
  return port(input(c.inputs.query), input(c.inputs.key), input(c.inputs.value), options);
}

/** The contract defines no answer where a score or logit may overflow (compare.py's rule). */
export function outsideContract(expected: ExpectedValues): boolean {
  return expected.scoreBound > Number.MAX_VALUE;
}

/** Per output element [B..., Hq, Lq, Ev], the largest |value| it averages (keys whose logit is not
 * -Infinity): a weighted average is never larger, the rule's fallback when its budget overflows. */
function valueReach(expected: ExpectedValues, value: FixtureTensor): number[] {
  const [Lk, Ev] = value.shape.slice(-2);
  const rows = product(expected.output.shape.slice(0, -1)); // B... x Hq x Lq
  const Lq = expected.output.shape.at(-2) ?? 1;
  const heads = expected.output.shape.length >= 3 ? (expected.output.shape.at(-3) ?? 1) : 1;
  const valueHeads = value.shape.length >= 3 ? (value.shape.at(-3) ?? 1) : 1;
  const group = valueHeads > 0 ? heads / valueHeads : 1;
  const reach = new Array<number>(rows * Ev).fill(0);
  for (let row = 0; row < rows; row++) {
    const head = Math.floor(row / Lq); // (b, h) flattened
    const valueHead = Math.floor(head / heads) * valueHeads + Math.floor((head % heads) / group);
    for (let j = 0; j < Lk; j++) {
      if (expected.logits.data[row * Lk + j] === -Infinity) {
        continue;
      }
      for (let t = 0; t < Ev; t++) {
        const size = Math.abs(value.data[(valueHead * Lk + j) * Ev + t] as number);
        reach[row * Ev + t] = Math.max(reach[row * Ev + t], size);
      }
    }
  }
  return reach;
}

/** compare.py's rule for a float64 port's output: NaN meets NaN, an infinity the same infinity
 * (or a finite value whose budget reaches past the largest double), +0.0 exactly in fully-masked
 * rows, else |actual - expected| <= K u (1 + spread) magnitude + K error_floor (in units of
 * 2^-1074), with the values' reach as the fallback where that overflows. The first violation in
 * words, or null. */
export function outputProblem(
  actual: readonly number[],
  expected: ExpectedValues,
  value: FixtureTensor,
): string | null {
  const Ev = expected.output.shape.at(-1) ?? 0;
  const Lk = expected.logits.shape.at(-1) ?? 0;
  let reach: number[] | null = null;
  for (let n = 0; n < expected.output.data.length; n++) {
    const [a, e] = [actual[n], expected.output.data[n]];
    const row = Ev > 0 ? Math.floor(n / Ev) : 0;
    const shown = Object.is(a, -0) ? "-0" : String(a);
    if (Number.isNaN(e) || Number.isNaN(a)) {
      if (Number.isNaN(e) !== Number.isNaN(a)) {
        return `output[${n}] is ${shown} where ${e} was expected`;
      }
      continue;
    }
    let fullyMasked = true;
    for (let j = 0; j < Lk && fullyMasked; j++) {
      fullyMasked = expected.logits.data[row * Lk + j] === -Infinity;
    }
    if (fullyMasked && !Object.is(a, 0)) {
      return `output[${n}] is ${shown} where +0.0 is required (a fully-masked row)`;
    }
    // The same operations in the same order as compare.output_budget, so the two agree to the bit.
    const budget =
      K * UNIT_ROUNDOFF * (1 + expected.spread.data[row]) * expected.magnitude.data[n] +
      K * expected.errorFloor.data[n];
    if (!Number.isFinite(e) || !Number.isFinite(a)) {
      const reaches =
        Number.isFinite(e) && Math.sign(a) === Math.sign(e) && Math.abs(e) + budget > Number.MAX_VALUE;
      if (a !== e && !reaches) {
        return `output[${n}] is ${shown} where ${e} was expected`;
      }
      continue;
    }
    if (!Number.isFinite(budget)) {
      reach ??= valueReach(expected, value);
      if (Math.abs(a) > reach[n]) {
        return `output[${n}] is ${shown}, beyond every value the row averages`;
      }
      continue;
    }
    if (!(Math.abs(a - e) <= budget)) {
      return `output[${n}] is ${shown}, expected ${e} (budget ${budget})`;
    }
  }
  return null;
}

/** The fixture rule for a valid case: shapes exact, NaN in the same places in the scores, the
 * output within the tolerance rule. A case outside the contract is only run, not judged. */
export function assertMatchesFixture(steps: AttentionSteps, c: FixtureCase): void {
  const expected = c.expected!;
  assert.deepEqual(steps.scoresShape, expected.scores.shape);
  assert.deepEqual(steps.outputShape, expected.output.shape);
  const [scores, weights, output] = [flatten(steps.scores), flatten(steps.weights), flatten(steps.output)];
  assert.equal(scores.length, expected.scores.data.length);
  assert.equal(weights.length, expected.weights.data.length);
  assert.equal(output.length, expected.output.data.length);
  if (outsideContract(expected)) {
    return;
  }
  // NaN in the same places in the scores and the weights.
  scores.forEach((x, n) =>
    assert.equal(Number.isNaN(x), Number.isNaN(expected.scores.data[n]), `scores[${n}]`),
  );
  weights.forEach((x, n) =>
    assert.equal(Number.isNaN(x), Number.isNaN(expected.weights.data[n]), `weights[${n}]`),
  );
  const problem = outputProblem(output, expected, c.inputs.value as FixtureTensor);
  assert.equal(problem, null);
}

/** The fixture rule for an invalid case: an AttentionInputError of the expected kind, with the
 * message Python writes (up to the spelling of argument names). */
export function assertFixtureError(
  run: () => unknown,
  error: { readonly kind: ErrorKind; readonly message: string },
): void {
  assert.throws(run, (thrown: unknown) => {
    assert.ok(thrown instanceof AttentionInputError, `threw ${String(thrown)}`);
    assert.equal(thrown.kind, error.kind);
    assert.equal(normalizeMessage(thrown.message), error.message);
    return true;
  });
}
