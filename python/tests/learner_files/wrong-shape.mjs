// A learner file that returns the weights instead of the output: [Lq, Lk], not [Lq, Ev].
export function scaledDotProductAttention(query, key, _value) {
  return query.map(() => key.map(() => 1 / key.length));
}
