// Small helpers shared by the tests. None of them calls the port.

import type { NestedArray } from "../src/attention.ts";

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
  return Array.from({ length: shape[0] }, (_, n) => unflatten(data.slice(n * size, (n + 1) * size), shape.slice(1)));
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
