// The project's fast port as a learner's module, declaring that it takes shaped tensors.
export { attentionSteps, scaledDotProductAttention } from "../../../typescript/src/flash.ts";
export const acceptsShapedTensors = true;
