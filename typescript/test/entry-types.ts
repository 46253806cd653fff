// Type checks of the entries' public signatures, run by `npm run typecheck` (tsc reads every file
// under typescript/test/); nothing here is executed. Each @ts-expect-error must meet an error, or
// tsc fails: the narrow overloads really narrow.

import { ERROR_KINDS, type ErrorKind, scaledDotProductAttention } from "../src/attention.ts";
import type { NestedArray } from "../src/inputs.ts";
import * as webgpu from "../src/webgpu.ts";

const matrix = [
  [1, 0],
  [0, 1],
];

export async function webgpuMatricesNeedNoCast(attention: webgpu.WebGpuAttention): Promise<number[][][]> {
  // Matrices in, a matrix out, with no cast: as the readable port's entry.
  const shared: number[][] = await webgpu.scaledDotProductAttention(matrix, matrix, matrix);
  const own: number[][] = await attention.scaledDotProductAttention(matrix, matrix, matrix, {
    isCausal: true,
  });
  const readable: number[][] = scaledDotProductAttention(matrix, matrix, matrix);
  const shaped = { shape: [1, 2, 2], data: [1, 0, 0, 1] };
  // A shaped tensor's output has no rank the types know: NestedArray, not a matrix.
  const any: NestedArray = await webgpu.scaledDotProductAttention(shaped, shaped, shaped);
  // @ts-expect-error a shaped tensor's output is not known to be a matrix
  const wrong: number[][] = await webgpu.scaledDotProductAttention(shaped, shaped, shaped);
  return [shared, own, readable, any as number[][], wrong];
}

// The npm entry's error kinds, the same names as Python's attention_port.ERROR_KINDS.
export const kinds: readonly ErrorKind[] = ERROR_KINDS;
// @ts-expect-error not a kind
export const notAKind: ErrorKind = "overflow";
