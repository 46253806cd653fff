// A learner file that doubles the key in place to fold a factor into it, and halves it back
// before it returns (exact in binary, so the caller's key ends as it was). With separate arrays
// that is right; given one array as query and key, as scaledDotProductAttention(Q, Q, V), the
// query is doubled too, and the scores come out twice as large.
import { makeAttention } from "./learner-base.mjs";

const attention = makeAttention();

export function scaledDotProductAttention(query, key, value, options = {}) {
  const E = query[0].length;
  const scale = options.scale ?? 1 / Math.sqrt(E);
  for (const row of key) {
    for (let t = 0; t < row.length; t++) row[t] *= 2;
  }
  const output = attention(query, key, value, { ...options, scale: scale / 2 });
  for (const row of key) {
    for (let t = 0; t < row.length; t++) row[t] /= 2;
  }
  return output;
}
