// A learner file with one mistake: gqa_tiled.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("gqa_tiled");
