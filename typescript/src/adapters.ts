/**
 * Adapters onto the layer's contract (weights [out, in] as nn.Linear stores them, SDPA's mask
 * polarity: true = may attend), from the layouts ported code meets; the twin of
 * python/attention_port/adapters.py.
 *
 *   fromConv1d     GPT-2's Conv1D and ONNX Runtime's contrib Attention store weights [in, out];
 *   fromPacked     torch's in_proj_weight and nanoGPT's c_attn hold q | k | v by rows;
 *   torchMhaMask   nn.MultiheadAttention's masks: a boolean true means "ignore", a key padding
 *                  mask is [N, S], a 3-D attn_mask [N·H, L, S]; float masks are added.
 *
 * and, onto the core's options, the engines' window, sink and key-count parameters (below).
 */

import { AttentionInputError, describeValue } from "./inputs.ts";

type Matrix = readonly (readonly number[])[];

/** A weight stored [in, out] (y = x · W + b) as [out, in] (y = x · Wᵀ + b). */
export function fromConv1d(weight: Matrix): number[][] {
  const columns = weight[0]?.length ?? 0;
  return Array.from({ length: columns }, (_, c) => weight.map((row) => row[c]));
}

/** wQ, wK, wV (and bQ, bK, bV) from one packed weight whose rows are q | k | v, in thirds or in
 * the row counts `sizes` (q, k, v) for grouped-query heads or Ev != E. */
export function fromPacked(
  weight: Matrix,
  bias: readonly number[] | null = null,
  sizes: readonly [number, number, number] | null = null,
): { wQ: number[][]; wK: number[][]; wV: number[][]; bQ?: number[]; bK?: number[]; bV?: number[] } {
  const [q, k] = sizes ?? [weight.length / 3, weight.length / 3, weight.length / 3];
  const cut = <T>(x: readonly T[]) => [x.slice(0, q), x.slice(q, q + k), x.slice(q + k)];
  const [wQ, wK, wV] = cut(weight).map((rows) => rows.map((row) => [...row]));
  if (bias === null) {
    return { wQ, wK, wV };
  }
  const [bQ, bK, bV] = cut(bias);
  return { wQ, wK, wV, bQ, bK, bV };
}

type BoolOrFloat = boolean | number;
type Nested = BoolOrFloat | Nested[];

/** nn.MultiheadAttention's attnMask ([L, S] or [N·H, L, S]) and keyPaddingMask ([N, S]) as one
 * mask of this contract, broadcasting to [N, H, L, S] (or [L, S]): a boolean true there (ignore)
 * becomes false here; float masks are added, as the module adds them, and a boolean one meeting
 * a float one becomes 0 / -inf first. */
export function torchMhaMask(
  attnMask: readonly unknown[] | null,
  keyPaddingMask: readonly (readonly BoolOrFloat[])[] | null,
  numHeads: number,
): Nested[] | null {
  const parts: Nested[][] = [];
  if (attnMask !== null) {
    const mask = attnMask as Nested[];
    const threeD = Array.isArray(mask[0]) && Array.isArray((mask[0] as Nested[])[0]);
    // [N·H, L, S] is batch-major then head: [N, H, L, S].
    parts.push(
      threeD
        ? Array.from({ length: mask.length / numHeads }, (_, n) =>
            mask.slice(n * numHeads, (n + 1) * numHeads),
          )
        : mask,
    );
  }
  if (keyPaddingMask !== null) {
    parts.push(keyPaddingMask.map((row) => [[[...row]]])); // [N, 1, 1, S]
  }
  if (parts.length === 0) {
    return null;
  }
  const leaves = (x: Nested): BoolOrFloat[] => (Array.isArray(x) ? x.flatMap(leaves) : [x]);
  const allBool = parts.every((p) => leaves(p).every((v) => typeof v === "boolean"));
  const map = (x: Nested, f: (v: BoolOrFloat) => BoolOrFloat): Nested =>
    Array.isArray(x) ? x.map((y) => map(y, f)) : f(x);
  const converted = parts.map((p) =>
    map(p, (v) => (typeof v === "boolean" ? (allBool ? !v : v ? -Infinity : 0) : v)),
  );
  return converted.reduce((a, b) =>
    broadcastWith(a, b, (x, y) =>
      allBool ? (x as boolean) && (y as boolean) : (x as number) + (y as number),
    ),
  ) as Nested[];
}

/** a ∘ b, numpy-broadcast (aligned on the right). */
function broadcastWith(a: Nested, b: Nested, f: (x: BoolOrFloat, y: BoolOrFloat) => BoolOrFloat): Nested {
  const depth = (x: Nested): number => (Array.isArray(x) ? 1 + depth(x[0] as Nested) : 0);
  const lift = (x: Nested, d: number): Nested => (d <= 0 ? x : lift([x], d - 1));
  const [da, db] = [depth(a), depth(b)];
  const [x, y] = [lift(a, db - da), lift(b, da - db)];
  if (!Array.isArray(x) || !Array.isArray(y)) {
    return f(x as BoolOrFloat, y as BoolOrFloat);
  }
  const length = Math.max(x.length, y.length);
  return Array.from({ length }, (_, i) =>
    broadcastWith(x[x.length === 1 ? 0 : i] as Nested, y[y.length === 1 ? 0 : i] as Nested, f),
  );
}

// ---- engines' window, sink and key-count parameters, as this contract's options ----------------
//
// Each adapter below takes one engine's parameters, spelled as that engine spells them (in both
// languages, so that the messages match byte for byte), and returns the options of this
// contract's core (window, isCausal, queryOffset, kvSeqlen, sinkTokens, sinkLogits), to spread
// into a port's options: the port then sees the keys the engine sees (docs/design.md's table of
// engines says which, row by row). Positions: this contract puts query row i at i + queryOffset
// and key j at j, so an engine that aligns its queries with the last key (bottom-right) gets
// queryOffset = keys - queries, per sequence where the engine counts keys per sequence. A value
// the engine cannot mean, or one this contract cannot place (a query before key 0), is refused
// with an AttentionInputError naming it. The twin of adapters.py's.

/** The core's options an adapter returns; only those the engine's parameters set are present. */
export interface EngineOptions {
  isCausal: boolean;
  window?: [number | null, number | null];
  queryOffset?: number | number[];
  kvSeqlen?: number[];
  sinkTokens?: number;
  sinkLogits?: number[];
}

/** One integer per sequence: an array, or a typed array (onnxruntime hands an int32 tensor's data
 * as an Int32Array, an int64 one's as a BigInt64Array). */
export type PerSequence = readonly (number | bigint)[] | ArrayLike<number | bigint>;
/** One number per query head: an array or a typed array. */
export type PerHead = readonly number[] | ArrayLike<number>;

function isList(x: unknown): x is ArrayLike<unknown> {
  return Array.isArray(x) || (ArrayBuffer.isView(x) && !(x instanceof DataView));
}

/** `x` as a number, or kind "value": an integer >= minimum (2.5, NaN, true are not). */
function integer(name: string, x: unknown, minimum: number): number {
  const n = typeof x === "bigint" ? Number(x) : x;
  if (typeof n !== "number" || !Number.isInteger(n) || n < minimum) {
    throw new AttentionInputError(
      "value",
      `${name} must be an integer >= ${minimum}, got ${describeValue(x)}`,
    );
  }
  return n;
}

/** One integer per sequence ([B]); kind "type" for anything but an array. */
function perSequence(name: string, values: unknown, minimum: number): number[] {
  if (!isList(values)) {
    throw new AttentionInputError(
      "type",
      `${name} must be an array of integers, one per sequence, got ${describeValue(values)}`,
    );
  }
  return Array.from(values, (x, b) => integer(`${name}[${b}]`, x, minimum));
}

/** A sink logit per query head: NaN and infinities pass (the core's rules say what they do). */
function logits(name: string, values: unknown): number[] {
  if (!isList(values)) {
    throw new AttentionInputError(
      "type",
      `${name} must be an array of numbers, one per query head, got ${describeValue(values)}`,
    );
  }
  return Array.from(values, (x, h) => {
    if (typeof x !== "number") {
      throw new AttentionInputError("type", `${name}[${h}] must be a number, got ${describeValue(x)}`);
    }
    return x;
  });
}

/** A parameter left out (undefined) takes the engine's default; null is a value of its own, as
 * Python's None is (refused where the engine's parameter takes no None). */
function given<T>(x: T | undefined, fallback: T): T {
  return x === undefined ? fallback : x;
}

function boolean(name: string, x: unknown): boolean {
  if (typeof x !== "boolean") {
    throw new AttentionInputError("value", `${name} must be a boolean, got ${describeValue(x)}`);
  }
  return x;
}

/** queryOffset for queries aligned with the last of `keys` keys (bottom-right). */
function offset(what: string, keys: number, queries: string, queryLength: number): number {
  if (keys < queryLength) {
    throw new AttentionInputError(
      "value",
      `${what} = ${keys} is below ${queries} = ${queryLength}: the engine aligns the last query` +
        " row with the last key, so row 0 would sit before key 0, where query_offset (>= 0)" +
        " cannot place it",
    );
  }
  return keys - queryLength;
}

/** onnxruntime's com.microsoft GroupQueryAttention, over its present_key / present_value: always
 * causal; `local_window_size = w` (default -1: none) shows w keys, the query's own included:
 * window [w - 1, 0]; `seqlens_k [B]` is the index of each sequence's last valid key (total - 1,
 * so -1 is a sequence with no key): kvSeqlen = seqlens_k + 1; the first prompt
 * (`sequence_length == total_sequence_length`) starts at position 0, and after it each
 * sequence's new rows sit after its past: queryOffset = seqlens_k + 1 - S per sequence;
 * `head_sink [num_heads]`: sinkLogits. */
export function fromOnnxruntimeGqa(params: {
  readonly sequence_length: number;
  readonly total_sequence_length: number;
  readonly seqlens_k: PerSequence;
  readonly local_window_size?: number;
  readonly head_sink?: PerHead | null;
}): EngineOptions {
  const length = integer("sequence_length", params.sequence_length, 1);
  const total = integer("total_sequence_length", params.total_sequence_length, 1);
  const counts = perSequence("seqlens_k", params.seqlens_k, -1).map((n) => n + 1);
  const window = integer("local_window_size", given(params.local_window_size, -1), -1);
  if (window === 0) {
    throw new AttentionInputError(
      "value",
      "local_window_size must be -1 (no window) or an integer >= 1, got 0",
    );
  }
  const options: EngineOptions = { isCausal: true, kvSeqlen: counts };
  if (window > 0) {
    options.window = [window - 1, 0];
  }
  if (length !== total) {
    // onnxruntime's is_first_prompt is sequence_length == total_sequence_length.
    options.queryOffset = counts.map((n, b) => offset(`seqlens_k[${b}] + 1`, n, "sequence_length", length));
  }
  if (params.head_sink != null) {
    options.sinkLogits = logits("head_sink", params.head_sink);
  }
  return options;
}

/** FlashAttention's side of a window: -1 (or null) unbounded, else an integer >= 0. */
function windowSide(name: string, x: unknown): number | null {
  if (x == null) {
    return null;
  }
  const side = integer(name, x, -1);
  return side === -1 ? null : side;
}

/** FlashAttention's `window_size = [left, right]` (-1, or null as its cute interface's None: that
 * side unbounded) and `causal`, aligned bottom-right: query row i sits at i + Lk - Lq.
 * `seqused_k [B]` counts each sequence's keys (flash_attn_with_kvcache's cache_seqlens after the
 * new keys, varlen's seqused_k, the tests' key_padding_mask row sums): kvSeqlen, and each
 * sequence aligned with its own last key. `causal` makes right 0, as attention_ref does;
 * `sink_token_length` (the cute interface's): sinkTokens; `learnable_sink [num_heads]`:
 * sinkLogits. */
export function fromFlashAttention(params: {
  readonly seqlen_q: number;
  readonly seqlen_k: number;
  readonly window_size?: readonly [number | null, number | null];
  readonly causal?: boolean;
  readonly seqused_k?: PerSequence | null;
  readonly sink_token_length?: number;
  readonly learnable_sink?: PerHead | null;
}): EngineOptions {
  const lengthQ = integer("seqlen_q", params.seqlen_q, 0);
  const lengthK = integer("seqlen_k", params.seqlen_k, 0);
  const windowSize: unknown = given<unknown>(params.window_size, [-1, -1]);
  if (!Array.isArray(windowSize) || windowSize.length !== 2) {
    throw new AttentionInputError(
      "type",
      `window_size must be an array (left, right), got ${describeValue(windowSize)}`,
    );
  }
  const left = windowSide("window_size[0]", windowSize[0]);
  let right = windowSide("window_size[1]", windowSize[1]);
  const causal = boolean("causal", given(params.causal, false));
  if (causal) {
    right = 0;
  }
  const options: EngineOptions = { isCausal: causal };
  if (left !== null || (right !== null && !causal)) {
    options.window = [left, right];
  }
  const aligned = options.window !== undefined || causal;
  if (params.seqused_k != null) {
    const counts = perSequence("seqused_k", params.seqused_k, 0);
    options.kvSeqlen = counts;
    if (aligned) {
      options.queryOffset = counts.map((n, b) => offset(`seqused_k[${b}]`, n, "seqlen_q", lengthQ));
    }
  } else if (aligned) {
    options.queryOffset = offset("seqlen_k", lengthK, "seqlen_q", lengthQ);
  }
  const sinks = integer("sink_token_length", given(params.sink_token_length, 0), 0);
  if (sinks > 0) {
    options.sinkTokens = sinks;
  }
  if (params.learnable_sink != null) {
    options.sinkLogits = logits("learnable_sink", params.learnable_sink);
  }
  return options;
}

/** HF transformers' `sliding_window` (masking_utils): causal, `sliding_window_overlay` keeps
 * `kv_idx > q_idx - sliding_window`, so w keys, the query's own included: window [w - 1, 0];
 * bidirectional, `sliding_window_bidirectional_overlay` keeps `|q_idx - kv_idx| <= w`: window
 * [w, w]. `sliding_window` null: no window. sdpa_mask puts query row i at `q_offset + i` and key
 * j at `kv_offset + j`: queryOffset = q_offset - kv_offset. */
export function fromHfSlidingWindow(params: {
  readonly sliding_window: number | null;
  readonly is_causal?: boolean;
  readonly q_offset?: number;
  readonly kv_offset?: number;
}): EngineOptions {
  const causal = boolean("is_causal", given(params.is_causal, true));
  const options: EngineOptions = { isCausal: causal };
  if (params.sliding_window != null) {
    const w = integer("sliding_window", params.sliding_window, 1);
    options.window = causal ? [w - 1, 0] : [w, w];
  }
  const queries = integer("q_offset", given(params.q_offset, 0), 0);
  const keys = integer("kv_offset", given(params.kv_offset, 0), 0);
  if (queries < keys) {
    throw new AttentionInputError(
      "value",
      `q_offset = ${queries} is below kv_offset = ${keys}: query row 0 would sit before key 0,` +
        " where query_offset (>= 0) cannot place it",
    );
  }
  if (queries > keys) {
    options.queryOffset = queries - keys;
  }
  return options;
}

/** jax-js's nn.dotProductAttention options (src/library/nn.ts). `localWindowSize`
 * `[before, after]` keeps keys i - before .. i + after, and a single number w means [w, w]
 * (symmetric, not w keys back); its masks are aligned top-left (row i at position i).
 * `keyValueSeqLengths [B]` counts each sequence's keys: kvSeqlen. */
export function fromJaxJs(params: {
  readonly localWindowSize?: number | readonly [number, number] | null;
  readonly isCausal?: boolean;
  readonly keyValueSeqLengths?: PerSequence | null;
}): EngineOptions {
  const options: EngineOptions = { isCausal: boolean("isCausal", given(params.isCausal, false)) };
  const size: unknown = params.localWindowSize;
  if (size != null) {
    if (Array.isArray(size)) {
      if (size.length !== 2) {
        throw new AttentionInputError(
          "type",
          `localWindowSize must be an integer or an array [before, after], got an array of ${size.length}`,
        );
      }
      options.window = [integer("localWindowSize[0]", size[0], 0), integer("localWindowSize[1]", size[1], 0)];
    } else {
      const w = integer("localWindowSize", size, 0);
      options.window = [w, w];
    }
  }
  if (params.keyValueSeqLengths != null) {
    options.kvSeqlen = perSequence("keyValueSeqLengths", params.keyValueSeqLengths, 0);
  }
  return options;
}

/** The ONNX Attention operator's `nonpad_kv_seqlen [B]`, a count of valid keys (not onnxruntime
 * GQA's index of the last one): kvSeqlen. Its causal mask is aligned as the reference
 * implementation (onnx/reference/ops/op_attention.py) aligns it: after past_key's
 * `past_sequence_length` keys, else after `nonpad_kv_seqlen[b] - q_sequence_length` keys per
 * sequence (an external cache), else from key 0. */
export function fromOnnxAttention(params: {
  readonly q_sequence_length: number;
  readonly nonpad_kv_seqlen?: PerSequence | null;
  readonly is_causal?: boolean;
  readonly past_sequence_length?: number | null;
}): EngineOptions {
  const length = integer("q_sequence_length", params.q_sequence_length, 0);
  const causal = boolean("is_causal", given(params.is_causal, false));
  const options: EngineOptions = { isCausal: causal };
  let counts: number[] | null = null;
  if (params.nonpad_kv_seqlen != null) {
    counts = perSequence("nonpad_kv_seqlen", params.nonpad_kv_seqlen, 0);
    options.kvSeqlen = counts;
  }
  if (params.past_sequence_length != null) {
    const past = integer("past_sequence_length", params.past_sequence_length, 0);
    if (causal && past > 0) {
      options.queryOffset = past;
    }
  } else if (causal && counts !== null) {
    options.queryOffset = counts.map((n, b) =>
      offset(`nonpad_kv_seqlen[${b}]`, n, "q_sequence_length", length),
    );
  }
  return options;
}

/** gpt-oss's attention (gpt_oss/torch/model.py, `sdpa`): causal; `sliding_window = w > 0` hides
 * keys w or more back, so w keys, the query's own included: window [w - 1, 0]; 0 is full
 * attention. `sinks [num_attention_heads]` (the learned logit concatenated to each row before the
 * softmax, then dropped): sinkLogits. */
export function fromGptOss(params: {
  readonly sliding_window?: number;
  readonly sinks?: PerHead | null;
}): EngineOptions {
  const w = integer("sliding_window", given(params.sliding_window, 0), 0);
  const options: EngineOptions = { isCausal: true };
  if (w > 0) {
    options.window = [w - 1, 0];
  }
  if (params.sinks != null) {
    options.sinkLogits = logits("sinks", params.sinks);
  }
  return options;
}
