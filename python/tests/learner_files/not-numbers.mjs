// A learner file that returns something other than numbers in one cell.
export function scaledDotProductAttention(query, _key, value) {
  return query.map((_, i) => value[0].map((_, c) => (i === 0 && c === 1 ? undefined : 0)));
}
