// Small helpers shared by the tests. None of them imports a port: the fixture helpers run the
// port they are given, so that every port is held to the same rule.

import assert from "node:assert/strict";
import { type FixtureCase, type FixtureTensor, portTensor } from "../golden/reader.ts";
import type { AttentionOptions, NestedArray, TensorInput } from "../src/attention.ts";
import { AttentionInputError, type ErrorKind } from "../src/inputs.ts";
import { spelled } from "../src/vocabulary.ts";

/** Every number of a nested array, row-major. */
export function flatten(x: NestedArray | number): number[] {
  return Array.isArray(x) ? (x as NestedArray[]).flatMap((y) => flatten(y)) : [x];
}

export function product(shape: readonly number[]): number {
  return shape.reduce((a, n) => a * n, 1);
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

/** numpy-style broadcast of a flat tensor to a larger shape (right-aligned, size-1 dims repeat),
 * written out cell by cell apart from the ports' batching.ts, so that a test building a full-size
 * mask with it does not share a broadcasting bug with the port it checks. */
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

// ---- Fixtures: every TypeScript port is held to them by python/tests/test_cross_language.py,
// under compare.py's rule (the only place that decides pass or fail); these helpers run a port
// on a case and check the error contract. ----

/** A port's attentionSteps or scaledDotProductAttention, as attention.ts and flash.ts export them. */
export type PortFunction<T> = (
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options?: AttentionOptions,
) => T;

/** A TypeScript message in Python's spelling (attnMask is attn_mask), so that both languages'
 * messages can be compared, as compare.py's normalize_message does. */
export function normalizeMessage(message: string): string {
  return spelled(message, "python");
}

/** One fixture case through `port`: a valid case's tensors as the port takes them (golden/reader.ts's
 * portTensor), an invalid case's inputs exactly as written. */
export function runCase<T>(port: PortFunction<T>, c: FixtureCase): T {
  const tensor = (x: unknown) =>
    c.expected === null ? x : x === null ? null : portTensor(x as FixtureTensor);
  const options = { attnMask: tensor(c.inputs.attnMask), ...c.params } as unknown as AttentionOptions;
  const input = (x: unknown) => tensor(x) as TensorInput;
  return port(input(c.inputs.query), input(c.inputs.key), input(c.inputs.value), options);
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

/** `run` throws an AttentionInputError of `kind` whose message is `message` (or matches it). */
export function expectError(run: () => unknown, kind: ErrorKind, message: string | RegExp): void {
  assert.throws(run, (error: unknown) => {
    assert.ok(error instanceof AttentionInputError, `not an AttentionInputError: ${String(error)}`);
    assert.equal(error.name, "AttentionInputError");
    assert.equal(error.kind, kind);
    if (typeof message === "string") {
      assert.equal(error.message, message);
    } else {
      assert.match(error.message, message);
    }
    return true;
  });
}
