// A learner file that returns every step, with the scale forgotten: the scores are right, the
// logits are the first step that differs. Rank 2, no options.
export function attentionSteps(query, key, value) {
  const scores = query.map((q) => key.map((k) => q.reduce((sum, x, t) => sum + x * k[t], 0)));
  const logits = scores.map((row) => row.map((s) => s)); // the 1/sqrt(d_k) is missing here
  const weights = logits.map((row) => {
    const max = Math.max(...row);
    const exps = row.map((x) => Math.exp(x - max));
    const sum = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / sum);
  });
  const output = weights.map((w) => value[0].map((_, c) => w.reduce((sum, x, j) => sum + x * value[j][c], 0)));
  return { scores, logits, weights, output };
}

export function scaledDotProductAttention(query, key, value) {
  return attentionSteps(query, key, value).output;
}
