// A learner file whose function throws.
export function scaledDotProductAttention(_query, _key, _value) {
  throw new Error("not written yet");
}
