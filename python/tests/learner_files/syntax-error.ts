// A TypeScript learner file that does not parse: a parenthesis is missing on line 2.
export function scaledDotProductAttention(query: number[][], key: number[][], value: number[][] {
  return query;
}
