// Type checks of the entries' public signatures, run by `npm run typecheck` (tsc reads every file
// under typescript/test/); nothing here is executed. Each @ts-expect-error must meet an error, or
// tsc fails: the narrow overloads really narrow.

import { attentionSteps, ERROR_KINDS, type ErrorKind, scaledDotProductAttention } from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import type { NestedArray } from "../src/inputs.ts";
import * as simd from "../src/simd.ts";
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

// The fast ports' entries (entries.ts's overloads) take and give what the readable port's do,
// the WebGPU port's a Promise of it: attention.ts writes its entries out, entries.ts once for the
// others, and these hold the two together.
type Same<X, Y> = (<T>() => T extends X ? 1 : 2) extends <T>() => T extends Y ? 1 : 2 ? true : false;
function same<X, Y>(_ours: X, _readable: Y, _same: Same<X, Y>): void {}

export async function theFastPortsEntriesAreTheReadablePorts(): Promise<void> {
  const shaped = { shape: [1, 2, 2], data: [1, 0, 0, 1] };
  for (const port of [flash, simd]) {
    same(
      port.scaledDotProductAttention(matrix, matrix, matrix),
      scaledDotProductAttention(matrix, matrix, matrix),
      true,
    );
    same(
      port.scaledDotProductAttention(shaped, shaped, shaped),
      scaledDotProductAttention(shaped, shaped, shaped),
      true,
    );
    same(port.attentionSteps(matrix, matrix, matrix), attentionSteps(matrix, matrix, matrix), true);
    same(port.attentionSteps(shaped, shaped, shaped), attentionSteps(shaped, shaped, shaped), true);
  }
  same(
    await webgpu.scaledDotProductAttention(matrix, matrix, matrix),
    scaledDotProductAttention(matrix, matrix, matrix),
    true,
  );
  same(await webgpu.attentionSteps(matrix, matrix, matrix), attentionSteps(matrix, matrix, matrix), true);
  same(await webgpu.attentionSteps(shaped, shaped, shaped), attentionSteps(shaped, shaped, shaped), true);
  type Readable = Parameters<typeof scaledDotProductAttention>;
  same<Parameters<typeof flash.scaledDotProductAttention>, Readable>(
    [matrix, matrix, matrix],
    [matrix, matrix, matrix],
    true,
  );
  same<Parameters<typeof webgpu.attentionSteps>, Parameters<typeof attentionSteps>>(
    [matrix, matrix, matrix],
    [matrix, matrix, matrix],
    true,
  );
  // The SIMD port's options are the readable port's and `workers`: not the same.
  same<Parameters<typeof simd.scaledDotProductAttention>, Readable>(
    [matrix, matrix, matrix],
    [matrix, matrix, matrix],
    false,
  );
}
