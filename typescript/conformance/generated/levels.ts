// Generated from contract/levels.json by `attention-port contract` (scripts/generate-contract): do not
// edit. Edit the records there and regenerate; a test holds this file to them.

/** One level of `attention-port check`: its name, and the tags that put a case on it. */
export interface Level {
  readonly name: string;
  readonly tags: readonly string[];
}

/** The attention core's levels, easiest first, numbered from 1: the conformance kit's. */
export const LEVELS: readonly Level[] = [
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
  { name: "sliding windows", tags: ["window"] },
  { name: "attention sinks (sink_tokens, sink_logits)", tags: ["sinks"] },
  { name: "ragged batches (kv_seqlen, a query_offset per sequence)", tags: ["ragged"] },
  { name: "invalid input", tags: ["error"] },
  {
    name: "edge cases (empty dims, NaN and +-inf, float64's extremes)",
    tags: ["empty", "nan", "inf", "subnormal", "extreme"],
  },
];

/** The level of a case whose tags name no level. */
export const PLAIN_LEVEL = 2;
