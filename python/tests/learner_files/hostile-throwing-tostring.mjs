// A learner that throws an object whose toString throws, so that even saying what it threw runs code.
export function scaledDotProductAttention(_query, _key, _value) {
  throw {
    toString() {
      throw new Error("no words for this");
    },
  };
}
