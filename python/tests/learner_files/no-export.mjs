// A learner file that names its function differently.
export function attention(query, _key, _value) {
  return query;
}
