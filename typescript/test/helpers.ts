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

// ---- Fixtures: one rule for every TypeScript port. ----

const K = 16; // docs/design.md section 5
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
    .replaceAll("isCausal", "is_causal");
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

/** |actual - expected| <= K u error_scale element-wise; NaN meets NaN, an infinity the same
 * infinity; a zero budget means exact equality, and a zero there must be +0.0. Returns the first
 * violation in words, or null. */
export function outputProblem(
  actual: readonly number[],
  expected: readonly number[],
  errorScale: readonly number[],
): string | null {
  for (let n = 0; n < expected.length; n++) {
    const [a, e] = [actual[n], expected[n]];
    if (Number.isNaN(e) || Number.isNaN(a)) {
      if (Number.isNaN(e) !== Number.isNaN(a)) {
        return `output[${n}] is ${a}, expected ${e}`;
      }
      continue;
    }
    // An infinity is met only by the same infinity (Infinity - Infinity is NaN, not an error of 0).
    const budget = !Number.isFinite(a) || !Number.isFinite(e) ? 0 : K * UNIT_ROUNDOFF * errorScale[n];
    if (budget === 0 ? !Object.is(a, e) : !(Math.abs(a - e) <= budget)) {
      return `output[${n}] is ${Object.is(a, -0) ? "-0" : a}, expected ${e} (budget ${budget})`;
    }
  }
  return null;
}

/** The fixture rule for a valid case: shapes exact, NaN in the same places in every step, the
 * output within the tolerance rule. */
export function assertMatchesFixture(steps: AttentionSteps, expected: ExpectedValues): void {
  assert.deepEqual(steps.scoresShape, expected.scores.shape);
  assert.deepEqual(steps.outputShape, expected.output.shape);
  const [scores, weights, output] = [flatten(steps.scores), flatten(steps.weights), flatten(steps.output)];
  assert.equal(scores.length, expected.scores.data.length);
  assert.equal(weights.length, expected.weights.data.length);
  assert.equal(output.length, expected.output.data.length);
  // NaN in the same places in every step.
  scores.forEach((x, n) =>
    assert.equal(Number.isNaN(x), Number.isNaN(expected.scores.data[n]), `scores[${n}]`),
  );
  weights.forEach((x, n) =>
    assert.equal(Number.isNaN(x), Number.isNaN(expected.weights.data[n]), `weights[${n}]`),
  );
  const problem = outputProblem(output, expected.output.data, expected.errorScale.data);
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
