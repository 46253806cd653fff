// A learner file that refuses a rank-1 query on purpose and crashes on a query that is a number
// (reading .length of undefined), and otherwise returns zeros of the right shape for rank 2.
export function scaledDotProductAttention(query, key, value) {
  const features = value[0].length + query[0].length * 0; // crashes when query is a number
  if (!Array.isArray(query[0])) {
    throw new Error("query must have at least 2 dimensions");
  }
  return query.map(() => Array(features).fill(0));
}
