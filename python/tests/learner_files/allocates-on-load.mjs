// A learner whose module allocates 3 GiB when it is loaded, past check's default 2 GiB.
const table = new Float64Array(3 * 2 ** 27);

export function scaledDotProductAttention(query, key, value) {
  return table.length > 0 ? value : query;
}
