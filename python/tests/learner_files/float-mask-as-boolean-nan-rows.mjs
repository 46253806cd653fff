// A learner file from before the level on fully-masked rows: rank 2, a mask read as yes/no (so a
// float mask's 0 blocks a key, and a row of zeros blocks them all), and the textbook softmax, which
// gives NaN for a row with nothing to attend to. The mask is the mistake to name first.
export function scaledDotProductAttention(query, key, value, options = {}) {
  const scale = 1 / Math.sqrt(query[0].length);
  const mask = options.attnMask;
  return query.map((q, i) => {
    const logits = key.map((k, j) => {
      const s = q.reduce((sum, x, t) => sum + x * k[t], 0) * scale;
      return mask === undefined || mask[i][j] ? s : Number.NEGATIVE_INFINITY;
    });
    const max = Math.max(...logits);
    const exps = logits.map((x) => Math.exp(x - max));
    const total = exps.reduce((a, b) => a + b, 0);
    return value[0].map((_, c) => exps.reduce((sum, e, j) => sum + (e / total) * value[j][c], 0));
  });
}
