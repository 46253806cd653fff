// A learner that returns an array whose first row is a getter that throws when it is read.
export function scaledDotProductAttention(query, _key, _value) {
  const output = query.map(() => [0, 0]);
  Object.defineProperty(output, 0, {
    get() {
      throw new Error("row 0 is not ready");
    },
  });
  return output;
}
