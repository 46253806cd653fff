// A learner file that scales the query in place (query[i][t] *= scale) before the scores: right
// answers, but the caller's query is changed.
import { makeAttention } from "./learner-base.mjs";

const attention = makeAttention();

export function scaledDotProductAttention(query, key, value, options = {}) {
  const E = query[0].length;
  const scale = options.scale ?? 1 / Math.sqrt(E);
  for (const row of query) {
    for (let t = 0; t < row.length; t++) row[t] *= scale;
  }
  return attention(query, key, value, { ...options, scale: 1 });
}
