// Generated from contract/options.json (the options' names) and contract/words.json by
// `attention-port contract` (python/attention_port/pages/vocabulary.py): do not edit. Edit those
// files, then run `attention-port contract` (scripts/generate-contract).

/** What a word names. */
export type WordKind = "option" | "argument" | "result" | "function" | "literal";

/** A word spelled two ways: as Python writes it (snake_case; True, None, nan) and as JavaScript does
 * (camelCase; true, null, NaN). */
export interface Word {
  readonly python: string;
  readonly javascript: string;
  readonly kind: WordKind;
}

/** Every word of the two spellings: the options spelled two ways, then the other words. */
export const WORDS: readonly Word[] = [
  { python: "attn_mask", javascript: "attnMask", kind: "option" },
  { python: "is_causal", javascript: "isCausal", kind: "option" },
  { python: "enable_gqa", javascript: "enableGqa", kind: "option" },
  { python: "query_offset", javascript: "queryOffset", kind: "option" },
  { python: "sink_tokens", javascript: "sinkTokens", kind: "option" },
  { python: "sink_logits", javascript: "sinkLogits", kind: "option" },
  { python: "kv_seqlen", javascript: "kvSeqlen", kind: "option" },
  { python: "memory_limit", javascript: "memoryLimit", kind: "option" },
  { python: "num_heads", javascript: "numHeads", kind: "option" },
  { python: "num_kv_heads", javascript: "numKvHeads", kind: "option" },
  { python: "need_weights", javascript: "needWeights", kind: "option" },
  { python: "past_key", javascript: "pastKey", kind: "option" },
  { python: "past_value", javascript: "pastValue", kind: "option" },
  { python: "return_cache", javascript: "returnCache", kind: "option" },
  { python: "rotary_dim", javascript: "rotaryDim", kind: "option" },
  { python: "x_q", javascript: "xQ", kind: "argument" },
  { python: "x_kv", javascript: "xKv", kind: "argument" },
  { python: "w_q", javascript: "wQ", kind: "argument" },
  { python: "w_k", javascript: "wK", kind: "argument" },
  { python: "w_v", javascript: "wV", kind: "argument" },
  { python: "w_o", javascript: "wO", kind: "argument" },
  { python: "b_q", javascript: "bQ", kind: "argument" },
  { python: "b_k", javascript: "bK", kind: "argument" },
  { python: "b_v", javascript: "bV", kind: "argument" },
  { python: "b_o", javascript: "bO", kind: "argument" },
  { python: "present_key", javascript: "presentKey", kind: "result" },
  { python: "present_value", javascript: "presentValue", kind: "result" },
  { python: "scaled_dot_product_attention", javascript: "scaledDotProductAttention", kind: "function" },
  { python: "attention_steps", javascript: "attentionSteps", kind: "function" },
  { python: "multi_head_attention", javascript: "multiHeadAttention", kind: "function" },
  { python: "apply_rotary", javascript: "applyRotary", kind: "function" },
  { python: "True", javascript: "true", kind: "literal" },
  { python: "False", javascript: "false", kind: "literal" },
  { python: "None", javascript: "null", kind: "literal" },
  { python: "nan", javascript: "NaN", kind: "literal" },
  { python: "inf", javascript: "Infinity", kind: "literal" },
];
