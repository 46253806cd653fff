// A learner file whose output is NaN in every cell, of the right shape.
export function scaledDotProductAttention(query, _key, value) {
  return query.map(() => value[0].map(() => Number.NaN));
}
