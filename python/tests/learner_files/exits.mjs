// A learner file whose function ends the process.
export function scaledDotProductAttention(_query, _key, _value) {
  process.exit(3);
}
