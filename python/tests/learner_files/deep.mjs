// A learner that returns an array nested 100 000 deep.
export function scaledDotProductAttention(_query, _key, _value) {
  let output = [1];
  for (let n = 0; n < 100_000; n++) {
    output = [output];
  }
  return output;
}
