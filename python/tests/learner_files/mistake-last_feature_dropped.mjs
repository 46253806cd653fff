// A learner file with one mistake: last_feature_dropped.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("last_feature_dropped");
