// Generated from contract/options.json by `attention-port contract`: do not edit. Change the
// declaration, then run `attention-port contract` (scripts/generate-contract) to write this again.

/** An integer, or nested arrays of them: one per batch index, [B...] (queryOffset, kvSeqlen). */
export type Integers = number | readonly Integers[];

/** The attention core's options as the ports take them. `Mask` is the mask's form: nested or
 * shaped for the nested entries (AttentionOptions), flat for the flat ones (FlatAttentionOptions);
 * inputs.ts gives both their public names. */
export interface CoreOptions<Mask> {
  /** Boolean (true = may attend) or numeric (added to the scores); broadcasts to [B..., Hq, Lq, Lk]. */
  readonly attnMask?: Mask | null;
  /** Query i may attend to key j only when j <= i + queryOffset. Combines with attnMask: both must allow. */
  readonly isCausal?: boolean;
  /** Multiplies the scores; defaults to 1/sqrt(E). */
  readonly scale?: number | null;
  /** Grouped-query attention: Hq may be a multiple of Hkv. */
  readonly enableGqa?: boolean;
  /** If > 0, logits become softcap * tanh(logits / softcap). */
  readonly softcap?: number;
  /** The position of query row 0 among the keys, for isCausal and window: 0 (the default) is torch's top-
   * left rule, Lk - Lq its causal_lower_right (a decode step after Lk - Lq cached keys). An integer >= 0,
   * or [B...] integers, one per sequence of a ragged batch. */
  readonly queryOffset?: Integers;
  /** A sliding window [left, right]: query row i at position p = i + queryOffset sees only keys p - left
   * <= j <= p + right (left + 1 + right keys at most, FlashAttention's convention); a null side is
   * unbounded, null (the default) no window. isCausal still hides j > p. */
  readonly window?: readonly [left: number | null, right: number | null] | null;
  /** Keys 0..sinkTokens-1 stay visible to every row whatever the window's left side says (StreamingLLM's
   * attention sinks); the mask, isCausal, the window's right side and kvSeqlen still apply. */
  readonly sinkTokens?: number;
  /** A learned sink logit per query head [Hq] (gpt-oss): head h's weights are exp(l - m) / (exp(s_h - m) +
   * sum_j exp(l_j - m)), m = max(s_h, max_j l_j), so a row's weights sum to less than 1; null (the
   * default) is no sink. */
  readonly sinkLogits?: readonly number[] | Float64Array | Float32Array | null;
  /** How many keys are valid in each sequence: an integer, or [B...] integers (the key's batch dims), each
   * 0..Lk; keys j >= kvSeqlen[b] are hidden (ONNX's nonpad_kv_seqlen, a count, not onnxruntime's
   * seqlens_k index). null (the default): every key. */
  readonly kvSeqlen?: Integers | null;
  /** The most bytes one call may need; larger inputs are refused (kind "size"). 2 GiB by default. */
  readonly memoryLimit?: number;
}

/** The layer's options (multiHeadAttention), the core's among them; layer.ts gives it its public
 * name, LayerOptions. */
export interface LayerOptionsOf<Mask, Tensor, Rope> {
  /** The query heads Hq: w_q's rows are Hq times the head size E. */
  readonly numHeads: number;
  /** The key/value heads Hkv, a divisor of numHeads (numHeads by default); fewer is grouped-query
   * attention. */
  readonly numKvHeads?: number | null;
  /** Boolean (true = may attend) or numeric (added to the scores); broadcasts to [B..., Hq, Lq, Lk]. */
  readonly attnMask?: Mask | null;
  /** Query i may attend to key j only when j <= i + queryOffset. Combines with attnMask: both must allow. */
  readonly isCausal?: boolean;
  /** Multiplies the scores; defaults to 1/sqrt(E). */
  readonly scale?: number | null;
  /** If > 0, logits become softcap * tanh(logits / softcap). */
  readonly softcap?: number;
  /** A sliding window [left, right]: query row i at position p = i + queryOffset sees only keys p - left
   * <= j <= p + right (left + 1 + right keys at most, FlashAttention's convention); a null side is
   * unbounded, null (the default) no window. isCausal still hides j > p. */
  readonly window?: readonly [left: number | null, right: number | null] | null;
  /** Keys 0..sinkTokens-1 stay visible to every row whatever the window's left side says (StreamingLLM's
   * attention sinks); the mask, isCausal, the window's right side and kvSeqlen still apply. */
  readonly sinkTokens?: number;
  /** A learned sink logit per query head [Hq] (gpt-oss): head h's weights are exp(l - m) / (exp(s_h - m) +
   * sum_j exp(l_j - m)), m = max(s_h, max_j l_j), so a row's weights sum to less than 1; null (the
   * default) is no sink. */
  readonly sinkLogits?: readonly number[] | Float64Array | Float32Array | null;
  /** How many keys are valid in each sequence: an integer, or [B...] integers (the key's batch dims), each
   * 0..Lk; keys j >= kvSeqlen[b] are hidden (ONNX's nonpad_kv_seqlen, a count, not onnxruntime's
   * seqlens_k index). null (the default): every key. */
  readonly kvSeqlen?: Integers | null;
  /** Rotary position embeddings of queries and keys: an object of the rope options, or null for none. */
  readonly rope?: Rope | null;
  /** Also return each head's attention weights [B..., Hq, Lq, Lk]. */
  readonly needWeights?: boolean;
  /** The KV cache's keys [B..., Hkv, P, E], after RoPE; comes with pastValue. */
  readonly pastKey?: Tensor | null;
  /** The KV cache's values [B..., Hkv, P, Ev]; comes with pastKey. */
  readonly pastValue?: Tensor | null;
  /** Also return the cache after this call: presentKey and presentValue, the past and the new rows. */
  readonly returnCache?: boolean;
  /** The most bytes one call may need; larger inputs are refused (kind "size"). 2 GiB by default. */
  readonly memoryLimit?: number;
}

/** RoPE's options (applyRotary, and the layer's `rope`); layer-inputs.ts names it RopeOptions. */
export interface RotaryOptions {
  /** The base of the rotation frequencies: pair i turns by position * theta^(-2i / rotaryDim). */
  readonly theta?: number;
  /** The features that rotate, from the first (E by default, even); the rest pass through. */
  readonly rotaryDim?: number | null;
  /** Pairs (2i, 2i+1) as GPT-J and Meta's Llama; else (i, i + rotaryDim/2), HF Llama's rotate_half. */
  readonly interleaved?: boolean;
}

/** An option as inputs.ts checks it: its type and range, and the kind and words of the error a
 * wrong value throws ({name}: the option, {value}: what was given, in words; other blanks are
 * the checking code's). */
export interface OptionCheck {
  readonly name: string;
  readonly type: "boolean" | "integer" | "integers" | "number" | "numbers" | "object" | "window";
  readonly nullable: boolean; // null is a value of its own, the default's
  readonly finite: boolean;
  readonly minimum: number | null; // inclusive
  readonly exclusiveMinimum: number | null;
  readonly maximum: number | null; // inclusive
  readonly kind: "shape" | "value";
  readonly message: string;
  // An option of several numbers: the error of one of them ({name}: its path, window[0]), of its
  // shape against the tensors' ({shape}, {batch}, {heads}, {query}, {key}) and of an integer
  // beyond key's length ({length}); null where the option has none.
  readonly element: { readonly kind: "shape" | "value"; readonly message: string } | null;
  readonly shape: { readonly kind: "shape" | "value"; readonly message: string } | null;
  readonly limit: { readonly kind: "shape" | "value"; readonly message: string } | null;
}

/** The core's scalar options in the order they are checked, before any tensor is read: the first
 * failure is thrown. */
export const CORE_CHECKS: readonly OptionCheck[] = [
  {
    name: "isCausal",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "enableGqa",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "scale",
    type: "number",
    nullable: true,
    finite: true,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a finite number, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "softcap",
    type: "number",
    nullable: false,
    finite: true,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a finite number >= 0, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "memoryLimit",
    type: "number",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: 0,
    maximum: null,
    kind: "value",
    message: "{name} must be a number of bytes > 0, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "queryOffset",
    type: "integers",
    nullable: false,
    finite: false,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: 9007199254740991,
    kind: "value",
    message: "{name} must be an integer from 0 to 2^53 - 1, got {value}",
    element: null,
    shape: {
      kind: "shape",
      message:
        "{name} has shape {shape} but key has batch dims {batch}: give one integer, or one per batch index (key {key})",
    },
    limit: null,
  },
  {
    name: "window",
    type: "window",
    nullable: true,
    finite: false,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: 9007199254740991,
    kind: "value",
    message:
      "{name} must be [left, right] (each side an integer from 0 to 2^53 - 1, or null for unbounded), or null for no window, got {value}",
    element: {
      kind: "value",
      message: "{name} must be an integer from 0 to 2^53 - 1, or null (unbounded), got {value}",
    },
    shape: null,
    limit: null,
  },
  {
    name: "sinkTokens",
    type: "integer",
    nullable: false,
    finite: false,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: 9007199254740991,
    kind: "value",
    message: "{name} must be an integer from 0 to 2^53 - 1, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  {
    name: "sinkLogits",
    type: "numbers",
    nullable: true,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be an array of numbers, one per query head, or null, got {value}",
    element: { kind: "value", message: "{name} must be a number, got {value}" },
    shape: {
      kind: "shape",
      message:
        "{name} has shape {shape} but query has Hq = {heads} heads: give one number per query head (query {query})",
    },
    limit: null,
  },
  {
    name: "kvSeqlen",
    type: "integers",
    nullable: true,
    finite: false,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: 9007199254740991,
    kind: "value",
    message: "{name} must be an integer from 0 to 2^53 - 1, got {value}",
    element: null,
    shape: {
      kind: "shape",
      message:
        "{name} has shape {shape} but key has batch dims {batch}: give one integer, or one per batch index (key {key})",
    },
    limit: {
      kind: "value",
      message:
        "{name} is {value}, more than key's length Lk = {length}: it counts the valid keys (key {key})",
    },
  },
];

/** The layer's options that have checks of their own (the core checks its own), by name; the
 * layer checks them among its shapes, in layer-inputs.ts's order. */
export const LAYER_CHECKS = {
  numHeads: {
    name: "numHeads",
    type: "integer",
    nullable: false,
    finite: false,
    minimum: 1,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a positive integer, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  numKvHeads: {
    name: "numKvHeads",
    type: "integer",
    nullable: true,
    finite: false,
    minimum: 1,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a positive integer, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  rope: {
    name: "rope",
    type: "object",
    nullable: true,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be an object of {options}, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  needWeights: {
    name: "needWeights",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  returnCache: {
    name: "returnCache",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
} as const satisfies Readonly<Record<string, OptionCheck>>;

/** RoPE's options' checks, by name: rotaryDim's range is the heads' feature size. */
export const ROPE_CHECKS = {
  theta: {
    name: "theta",
    type: "number",
    nullable: false,
    finite: true,
    minimum: null,
    exclusiveMinimum: 0,
    maximum: null,
    kind: "value",
    message: "{name} must be a finite number > 0, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  rotaryDim: {
    name: "rotaryDim",
    type: "integer",
    nullable: true,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be an even integer from 2 to the feature size {features}, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
  interleaved: {
    name: "interleaved",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
    element: null,
    shape: null,
    limit: null,
  },
} as const satisfies Readonly<Record<string, OptionCheck>>;

/** RoPE's options' defaults (rotaryDim null: the feature size E). */
export const ROPE_DEFAULTS = {
  theta: 10000,
  rotaryDim: null,
  interleaved: false,
} as const;

/** Each option's default, taken where the caller gives none (or undefined). */
export const CORE_DEFAULTS = {
  attnMask: null,
  isCausal: false,
  scale: null,
  enableGqa: false,
  softcap: 0,
  queryOffset: 0,
  window: null,
  sinkTokens: 0,
  sinkLogits: null,
  kvSeqlen: null,
  memoryLimit: 2147483648,
} as const;

/** The options a fixture case holds, by their names in the file (Python's) and in TypeScript:
 * `held` is "inputs" (a tensor among its inputs), "every" (among the params of every case) or
 * "set" (only in the cases that set it). */
export const FIXTURE_OPTIONS = [
  { python: "attn_mask", javascript: "attnMask", held: "inputs" },
  { python: "is_causal", javascript: "isCausal", held: "every" },
  { python: "scale", javascript: "scale", held: "every" },
  { python: "enable_gqa", javascript: "enableGqa", held: "every" },
  { python: "softcap", javascript: "softcap", held: "every" },
  { python: "query_offset", javascript: "queryOffset", held: "set" },
  { python: "window", javascript: "window", held: "set" },
  { python: "sink_tokens", javascript: "sinkTokens", held: "set" },
  { python: "sink_logits", javascript: "sinkLogits", held: "set" },
  { python: "kv_seqlen", javascript: "kvSeqlen", held: "set" },
] as const;

/** A fixture case's options as the TypeScript readers give them (golden/reader.ts, the kit),
 * as written: an invalid case may hold anything. (A type, not an interface: it is a record of
 * strings too.) */
export type FixtureOptions = {
  readonly isCausal: unknown;
  readonly scale: unknown;
  readonly enableGqa: unknown;
  readonly softcap: unknown;
  /** Only where the case sets it. */
  readonly queryOffset?: unknown;
  /** Only where the case sets it. */
  readonly window?: unknown;
  /** Only where the case sets it. */
  readonly sinkTokens?: unknown;
  /** Only where the case sets it. */
  readonly sinkLogits?: unknown;
  /** Only where the case sets it. */
  readonly kvSeqlen?: unknown;
};
