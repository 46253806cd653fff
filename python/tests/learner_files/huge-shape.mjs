// A learner that returns a shaped tensor whose shape holds 1e600 numbers and whose data holds none.

export function scaledDotProductAttention(_query, _key, _value) {
  return { shape: [1e300, 1e300], data: [] };
}
