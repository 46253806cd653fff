// A learner file with one mistake: scaled_by_dk.
import { makeAttention } from "./learner-base.mjs";

export const scaledDotProductAttention = makeAttention("scaled_by_dk");
