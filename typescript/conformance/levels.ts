/**
 * The levels of `attention-port check`, easiest first: the twin of LEVELS in
 * python/attention_port/fixtures/cases.py (a test holds the two equal on every fixture case). A
 * case belongs to the last level that any of its tags names; a case whose tags name no level is
 * plain rank-2 attention, level 2.
 */

export const LEVELS: readonly { readonly name: string; readonly tags: readonly string[] }[] = [
  { name: "the tutorial example", tags: ["tutorial"] },
  { name: "plain rank-2", tags: [] },
  { name: "numerical stability (large logits)", tags: ["stability"] },
  { name: "boolean masks", tags: ["bool_mask"] },
  { name: "float masks and -inf", tags: ["float_mask"] },
  { name: "fully-masked rows", tags: ["fully_masked"] },
  { name: "causal", tags: ["causal"] },
  { name: "batch and heads", tags: ["rank3", "rank4", "rank5", "heads", "batch", "broadcast"] },
  { name: "cross-attention (Lq != Lk, Ev != E)", tags: ["cross", "ev"] },
  { name: "grouped-query heads", tags: ["gqa", "mqa"] },
  { name: "scale and softcap", tags: ["scale", "softcap"] },
  { name: "decoding after a cache (query_offset)", tags: ["decode"] },
  { name: "invalid input", tags: ["error"] },
  {
    name: "edge cases (empty dims, NaN and +-inf, float64's extremes)",
    tags: ["empty", "nan", "inf", "subnormal", "extreme"],
  },
];
const PLAIN_LEVEL = 2;

/** The level (1-based) of a case with these tags. */
export function levelOf(tags: readonly string[]): number {
  const named = LEVELS.flatMap((entry, n) => (entry.tags.some((tag) => tags.includes(tag)) ? [n + 1] : []));
  return named.length === 0 ? PLAIN_LEVEL : Math.max(...named);
}
