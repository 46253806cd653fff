// A learner that returns an array that holds itself.
export function scaledDotProductAttention(_query, _key, _value) {
  const output = [];
  output.push(output);
  return output;
}
