/**
 * What flash.ts, simd.ts and webgpu.ts export besides their entries (entries.ts), each by one
 * `export * from "./port-exports.ts"`: the input and option types of the entries, and the error
 * every port throws for a caller's mistake. attention.ts, the lesson, lists its own.
 */

export type {
  AttentionOptions,
  AttentionSteps,
  FlatAttentionOptions,
  FlatMask,
  FlatTensor,
  MaskInput,
  NestedArray,
  TensorInput,
} from "./inputs.ts";
export { AttentionInputError } from "./inputs.ts";
