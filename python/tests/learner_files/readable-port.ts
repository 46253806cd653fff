// The project's readable port as a learner's module, declaring that it takes shaped tensors
// ({shape, data}), the only way to give it a tensor with a zero-size dimension.
export { attentionSteps, scaledDotProductAttention } from "../../../typescript/src/attention.ts";
export const acceptsShapedTensors = true;
