// A learner whose function is async and rejects (its promise fails), as an unfinished async port would.
export async function scaledDotProductAttention(_query, _key, _value) {
  throw new Error("not written yet");
}
