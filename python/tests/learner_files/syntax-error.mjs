// A learner file that does not parse: a parenthesis is missing on line 2.
export function scaledDotProductAttention(query, key, value {
  return query;
}
