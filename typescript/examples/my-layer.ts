/**
 * My layer: multi-head attention as a layer, around my own attention core, the six steps of
 *
 *     output = concat_h attention(xQ WQₕᵀ, xKv WKₕᵀ, xKv WVₕᵀ) WOᵀ + bO
 *
 * (project, split heads, rotate, attend, merge heads, out-project), with the KV cache's way in and
 * out. Step 4 is your own core, scaledDotProductAttention from ./my-attention.ts (grown through
 * check's core levels; import your copy instead if you renamed it); the other steps are stubs,
 * each throwing until you write it. Check it:
 *
 *     attention-port check typescript/examples/my-layer.ts
 *
 * Its first report says where to start: the layer's first level, with every case failing on the
 * first stub. Write the steps in order, running check after each (docs/learn.md walks them); the
 * project's own layer, typescript/src/layer.ts, does each step under the same label.
 *
 * Shapes: xQ [B..., Lq, D], xKv [B..., Lk, Dkv], wQ [Hq·E, D], wK [Hkv·E, Dkv], wV [Hkv·Ev, Dkv],
 * wO [Dout, Hq·Ev] (stored [out, in], as nn.Linear stores them) -> output [B..., Lq, Dout].
 */

// biome-ignore-all lint/correctness/noUnusedFunctionParameters: each stub takes what its step will read
import { scaledDotProductAttention } from "./my-attention.ts";

/** A tensor as nested arrays; one with a zero-size dim (a cache of no positions) comes as {shape, data}. */
type Nested = number[] | Nested[];
type Tensor = Nested | { shape: number[]; data: number[] };
type Rope = { theta?: number; rotaryDim?: number | null; interleaved?: boolean };
type Params = {
  wQ: Nested;
  wK: Nested;
  wV: Nested;
  wO: Nested;
  bQ?: number[];
  bK?: number[];
  bV?: number[];
  bO?: number[];
};
type Options = {
  numHeads: number;
  numKvHeads?: number | null;
  attnMask?: Tensor | null;
  isCausal?: boolean;
  scale?: number | null;
  softcap?: number;
  window?: [number | null, number | null] | null;
  sinkTokens?: number;
  sinkLogits?: number[] | null;
  kvSeqlen?: Nested | number | null;
  rope?: Rope | null;
  needWeights?: boolean;
  pastKey?: Tensor | null;
  pastValue?: Tensor | null;
  returnCache?: boolean;
};
/** Your core, typed as it is once it takes options (the starter's takes three arguments). */
type Core = (query: Tensor, key: Tensor, value: Tensor, options?: object) => Tensor;
const attention = scaledDotProductAttention as unknown as Core;

/** nn.Linear: x [..., in], weight [out, in], bias [out] or undefined -> x · weightᵀ + bias [..., out]. */
function project(x: Tensor, weight: Nested, bias: number[] | undefined): Nested {
  throw new Error("step 1, project, is not written yet: x · weightᵀ + bias");
}

/** [B..., L, H·F] -> [B..., H, L, F]: feature h·F + f is head h's feature f (head-major). */
function splitHeads(x: Nested, heads: number): Nested {
  throw new Error("step 2, split heads, is not written yet: reshape, then swap L and H");
}

/**
 * RoPE: x [B..., H, L, E], positions [L] or [B..., L] -> x with pair i of its first rotaryDim
 * features (E when null) turned by position · theta^(-2i/rotaryDim); the pairs are
 * (i, i + rotaryDim/2), or (2i, 2i+1) when interleaved. The rest pass through unchanged.
 */
export function applyRotary(x: Nested, positions: Nested, options: Rope = {}): Nested {
  throw new Error("step 3, rotate, is not written yet: turn each feature pair by its angle");
}

/** The cache in: past [B..., H, P, F] (P earlier positions), then x [B..., H, L, F]: [B..., H, P+L, F]. */
function appendRows(past: Tensor, x: Nested): Nested {
  throw new Error("the cache in is not written yet: the past's rows, then the new ones");
}

/** [B..., H, L, F] -> [B..., L, H·F]: the split undone, head h's feature f at h·F + f again. */
function mergeHeads(x: Tensor): Nested {
  throw new Error("step 5, merge heads, is not written yet: swap H and L back, then reshape");
}

/** A tensor's shape, nested or {shape, data}. */
function shapeOf(x: Tensor): number[] {
  if (!Array.isArray(x)) return x.shape;
  return x.length === 0 || !Array.isArray(x[0]) ? [x.length] : [x.length, ...shapeOf(x[0])];
}

/**
 * xKv null is self-attention. pastKey [B..., Hkv, P, E] and pastValue [B..., Hkv, P, Ev] are the
 * keys (after RoPE) and values of P earlier positions. Returns the output, or with needWeights or
 * returnCache an object: output, weights, presentKey, presentValue.
 */
export function multiHeadAttention(xQ: Nested, xKv: Nested | null, params: Params, options: Options) {
  const { numHeads, numKvHeads = null, attnMask = null, isCausal = false, scale = null } = options;
  const { softcap = 0, rope = null, needWeights = false } = options;
  const { window = null, sinkTokens = 0, sinkLogits = null, kvSeqlen = null } = options;
  const { pastKey = null, pastValue = null, returnCache = false } = options;
  const kvHeads = numKvHeads ?? numHeads;
  const source = xKv ?? xQ;
  const cached = pastKey === null ? 0 : (shapeOf(pastKey).at(-2) ?? 0); // P

  // Step 1: project. Three learned linear maps read queries, keys and values out of the inputs.
  let q = project(xQ, params.wQ, params.bQ); // [B..., Lq, Hq·E]
  let k = project(source, params.wK, params.bK); // [B..., Lk, Hkv·E]
  let v = project(source, params.wV, params.bV); // [B..., Lk, Hkv·Ev]

  // Step 2: split heads. Each head's rows together, as the core wants them.
  q = splitHeads(q, numHeads); // [B..., Hq, Lq, E]
  k = splitHeads(k, kvHeads); // [B..., Hkv, Lk, E]
  v = splitHeads(v, kvHeads); // [B..., Hkv, Lk, Ev]

  // Step 3: rotate. RoPE turns queries and keys (never values) at their positions P, P+1, ...
  if (rope !== null) {
    const Lq = shapeOf(xQ).at(-2) ?? 0;
    const positions = Array.from({ length: Lq }, (_, l) => cached + l); // [Lq]
    q = applyRotary(q, positions, rope); // [B..., Hq, Lq, E]
    k = applyRotary(k, positions, rope); // [B..., Hkv, Lk, E]
  }

  // The cache in: the earlier keys (already rotated) and values, then the new ones.
  if (pastKey !== null && pastValue !== null) {
    k = appendRows(pastKey, k); // [B..., Hkv, P+Lk, E]
    v = appendRows(pastValue, v); // [B..., Hkv, P+Lk, Ev]
  }

  // Step 4: attend. Your core, over every head at once (query head h reads key/value head
  // floor(h / (Hq / Hkv))); row i is at position i + P. Only the options a call sets are passed;
  // the window, the sinks and the key counts are the core's, handed on as the call gives them.
  const set = { attnMask, isCausal, scale, softcap, enableGqa: kvHeads !== numHeads, queryOffset: cached };
  Object.assign(set, { window, sinkTokens, sinkLogits, kvSeqlen });
  const core = Object.fromEntries(
    Object.entries(set).filter(([, x]) => ![null, false, 0].includes(x as never)),
  );
  const heads = attention(q, k, v, core); // [B..., Hq, Lq, Ev]

  // Step 5: merge heads. The split undone: one row of Hq·Ev features for each position.
  const merged = mergeHeads(heads); // [B..., Lq, Hq·Ev]

  // Step 6: out-project. One more linear map mixes the heads.
  const output = project(merged, params.wO, params.bO); // [B..., Lq, Dout]

  if (!needWeights && !returnCache) return output;
  // The cache out: what the next call takes as its past.
  if (needWeights) {
    throw new Error("needWeights is not written yet: each head's weights, from your core");
  }
  return { output, presentKey: k, presentValue: v }; // [B..., Hkv, P+Lk, E], [B..., Hkv, P+Lk, Ev]
}
