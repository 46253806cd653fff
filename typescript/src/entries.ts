/**
 * A port's three public entries, from the kernel it declares: scaledDotProductAttention (nested
 * arrays or shaped tensors in, nested arrays out), attentionSteps (every step) and
 * scaledDotProductAttentionFlat (flat tensors in and out), with attention.ts's overloads: matrices
 * in, a matrix out.
 *
 * flash.ts, simd.ts and webgpu.ts each declare a PortKernel (its three computations, each checking
 * its inputs first) and export `entriesOf(kernel)` (webgpu.ts `entriesOfAsync`), so that the
 * overloads and the nesting of the output are written here once. attention.ts, the lesson, writes
 * its two entries out; typescript/test/entry-types.ts holds these types to them. What every fast
 * port exports besides its entries is port-exports.ts.
 */

import * as readable from "./attention.ts";
import { nest } from "./batching.ts";
import {
  type AttentionSteps,
  type CheckedInputs,
  type FlatTensor,
  type NestedArray,
  plainArguments,
  type TensorInput,
} from "./inputs.ts";

type Matrix = readonly (readonly number[])[];

/** Nested arrays or shaped tensors, and the options (undefined where none were given). */
type Inputs<Options> = [query: TensorInput, key: TensorInput, value: TensorInput, options?: Options];

/** T, or a Promise of T from a port that answers later (the WebGPU port). */
type Later<Async extends boolean, T> = Async extends true ? Promise<T> : T;

/** A port's public entries, with `Options` for its nested and shaped inputs and `FlatOptions`
 * for its flat ones. */
export interface Entries<Options, FlatOptions, Async extends boolean = false> {
  /** softmax(query · keyᵀ · scale [+ mask]) · value, as torch.nn.functional.scaled_dot_product_attention
   * (without dropout): matrices in, a matrix out; nested arrays or shaped tensors in, nested
   * arrays out. */
  readonly scaledDotProductAttention: {
    (query: Matrix, key: Matrix, value: Matrix, options?: Options): Later<Async, number[][]>;
    (query: TensorInput, key: TensorInput, value: TensorInput, options?: Options): Later<Async, NestedArray>;
  };
  /** Every step, as attention.ts returns them: scores, logits and weights [B..., Hq, Lq, Lk] and
   * the output [B..., Hq, Lq, Ev]. */
  readonly attentionSteps: {
    (query: Matrix, key: Matrix, value: Matrix, options?: Options): Later<Async, AttentionSteps<number[][]>>;
    (
      query: TensorInput,
      key: TensorInput,
      value: TensorInput,
      options?: Options,
    ): Later<Async, AttentionSteps>;
  };
  /** The same as scaledDotProductAttention on flat row-major tensors with explicit shapes; the
   * output has query.data's type. */
  readonly scaledDotProductAttentionFlat: (
    query: FlatTensor,
    key: FlatTensor,
    value: FlatTensor,
    options?: FlatOptions,
  ) => Later<Async, FlatTensor>;
}

/** What a port declares: its kernel's three computations on the caller's inputs, each checking
 * them first (AttentionInputError) and returning the output [B..., Hq, Lq, Ev] flat, with its
 * shape, or every step. The options are the caller's, undefined where none were given. */
export interface PortKernel<Options, FlatOptions, Async extends boolean = false> {
  readonly attend: (
    query: TensorInput,
    key: TensorInput,
    value: TensorInput,
    options?: Options,
  ) => Later<Async, FlatTensor>;
  readonly attendFlat: (
    query: FlatTensor,
    key: FlatTensor,
    value: FlatTensor,
    options?: FlatOptions,
  ) => Later<Async, FlatTensor>;
  readonly attentionSteps: (
    query: TensorInput,
    key: TensorInput,
    value: TensorInput,
    options?: Options,
  ) => Later<Async, AttentionSteps>;
}

/** The entries of a kernel that answers at once. */
export function entriesOf<Options, FlatOptions>(
  kernel: PortKernel<Options, FlatOptions>,
): Entries<Options, FlatOptions> {
  type Own = Entries<Options, FlatOptions>;
  return {
    // One function for both overloads: the rank-2 one is the same call with a narrower type.
    scaledDotProductAttention: ((...args: Inputs<Options>) =>
      nested(kernel.attend(...args))) as Own["scaledDotProductAttention"],
    attentionSteps: kernel.attentionSteps as Own["attentionSteps"],
    scaledDotProductAttentionFlat: kernel.attendFlat,
  };
}

/** The entries of a kernel that answers later: each a Promise, rejected on a bad input. */
export function entriesOfAsync<Options, FlatOptions>(
  kernel: PortKernel<Options, FlatOptions, true>,
): Entries<Options, FlatOptions, true> {
  type Own = Entries<Options, FlatOptions, true>;
  return {
    scaledDotProductAttention: (async (...args: Inputs<Options>) =>
      nested(await kernel.attend(...args))) as Own["scaledDotProductAttention"],
    attentionSteps: kernel.attentionSteps as Own["attentionSteps"],
    scaledDotProductAttentionFlat: kernel.attendFlat,
  };
}

/** Every step of a kernel that never holds a whole [Lq, Lk] step: scores, logits and weights are
 * the readable port's, of the values checked (the caller's objects are not read again; it holds
 * its own memoryLimit), then the output is the kernel's. */
export function readableSteps(
  problem: CheckedInputs<Float64Array | Float32Array>,
  kernelOutput: () => Float64Array | Float32Array,
): AttentionSteps {
  const plain = plainArguments(problem);
  const steps = readable.attentionSteps(plain.query, plain.key, plain.value, plain.options);
  return { ...steps, output: nest(kernelOutput(), problem.shapes.outputShape) as NestedArray };
}

function nested(output: FlatTensor): NestedArray {
  return nest(output.data, output.shape) as NestedArray; // [B..., Hq, Lq, Ev]
}
