// A learner file with one mistake: float_mask_as_boolean.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("float_mask_as_boolean");
