/**
 * The multi-head attention layer and rotary position embeddings, around an attention core.
 *
 *     output = concat_h attention(xQ · wQₕᵀ, xKv · wKₕᵀ, xKv · wVₕᵀ) · wOᵀ + bO
 *
 * The twin of python/attention_port/layer.py: the same six steps with the same labels (project,
 * split heads, rotate, attend, merge heads, out-project), written as plain loops over flat
 * row-major arrays. Weights are stored as nn.Linear stores them, [out, in]: y = x · Wᵀ + b.
 * `multiHeadAttention` attends with the readable core (attention.ts); `layerWith` builds the same
 * layer over any port's attentionSteps (flash.ts, simd.ts), so that each port's core is the one
 * that attends.
 *
 * Dimension letters, beside attention.ts's: D xQ's features, Dkv xKv's, Dout the output's; E and
 * Ev per head (Hq · E need not be D). Shapes: xQ [B..., Lq, D], xKv [B..., Lk, Dkv],
 * wQ [Hq·E, D], wK [Hkv·E, Dkv], wV [Hkv·Ev, Dkv], wO [Dout, Hq·Ev] -> output [B..., Lq, Dout].
 */

import { attentionSteps } from "./attention.ts";
import { nest } from "./batching.ts";
import type { LayerOptionsOf } from "./generated/options.ts";
import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionSteps,
  DEFAULT_MEMORY_LIMIT,
  type MaskInput,
  type NestedArray,
  product,
  type TensorInput,
  toArray,
} from "./inputs.ts";
import {
  type CheckedRope,
  checkHeads,
  checkLayerArguments,
  checkLayerShapes,
  checkLayerSize,
  checkMemoryLimit,
  checkNeedWeights,
  checkPast,
  checkPositions,
  checkReturnCache,
  checkRope,
  checkRotaryOptions,
  type RopeOptions,
} from "./layer-inputs.ts";

// The adapters serve only the layer's weights and masks, so the package's "attention-port/layer"
// carries them too.
export { fromConv1d, fromPacked, torchMhaMask } from "./adapters.ts";
export type { RopeOptions };
export { AttentionInputError };

export interface LayerParams {
  readonly wQ: TensorInput;
  readonly wK: TensorInput;
  readonly wV: TensorInput;
  readonly wO: TensorInput;
  readonly bQ?: TensorInput | null;
  readonly bK?: TensorInput | null;
  readonly bV?: TensorInput | null;
  readonly bO?: TensorInput | null;
}

/** The layer's options, declared in contract/options.json (generated/options.ts holds each one's doc). */
export interface LayerOptions extends LayerOptionsOf<MaskInput, TensorInput, RopeOptions> {}

/** What needWeights or returnCache asks for: the output, each head's weights (undefined unless
 * needWeights) and the cache after this call (undefined unless returnCache). */
export interface LayerResult {
  readonly output: NestedArray; // [B..., Lq, Dout]
  readonly weights?: NestedArray; // [B..., Hq, Lq, P+Lk]  rows sum to 1, or +0.0 when fully masked
  readonly presentKey?: NestedArray; // [B..., Hkv, P+Lk, E]  pastKey, then the new keys after RoPE
  readonly presentValue?: NestedArray; // [B..., Hkv, P+Lk, Ev]  pastValue, then the new values
}

/** An attention core: some port's attentionSteps. */
export type AttentionCore = (
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions,
) => AttentionSteps;
/** A core that answers later (the WebGPU port's). */
export type AsyncAttentionCore = (...args: Parameters<AttentionCore>) => Promise<AttentionSteps>;

interface Flat {
  readonly shape: readonly number[];
  readonly data: Float64Array;
}

/** Rotate feature pairs of x [B..., H, L, E] by angles that grow with the position: pair i of the
 * first rotaryDim features turns by positions · theta^(-2i/rotaryDim). Half-split pairs are
 * (i, i + rotaryDim/2) (HF Llama's rotate_half); interleaved pairs are (2i, 2i+1) (GPT-J, Meta's
 * Llama). Features past rotaryDim pass through unchanged. */
export function applyRotary(
  x: TensorInput,
  positions: TensorInput,
  { theta = 10000, rotaryDim = null, interleaved = false }: RopeOptions = {},
): NestedArray {
  const xs = toArray("x", x); // [B..., H, L, E]
  const ps = toArray("positions", positions); // [L] or [B..., L]
  if (xs.shape.length < 2) {
    throw new AttentionInputError(
      "rank",
      `x must have at least 2 dimensions ([L, E]), got shape [${xs.shape.join(", ")}]`,
    );
  }
  const options = checkRotaryOptions(theta, rotaryDim, interleaved, xs.shape[xs.shape.length - 1]);
  checkPositions(xs.shape, ps.shape, ps.data);
  return nest(rotate(xs, ps, options).data, xs.shape) as NestedArray;
}

function rotate(x: Flat, positions: Flat, { theta, rotaryDim, interleaved }: CheckedRope): Flat {
  const E = x.shape[x.shape.length - 1];
  const L = x.shape[x.shape.length - 2];
  const H = x.shape.length >= 3 ? x.shape[x.shape.length - 3] : 1;
  const half = rotaryDim / 2;
  const rotated = Float64Array.from(x.data); // [B..., H, L, E]  features past rotaryDim stay, bit for bit
  const rows = product(x.shape) / E; // B... · H · L
  for (let r = 0; r < rows; r++) {
    const l = r % L;
    const b = Math.floor(r / (L * H)); // the batch row of a [B..., L] positions
    const position = positions.shape.length > 1 ? positions.data[b * L + l] : positions.data[l];
    for (let i = 0; i < half; i++) {
      // The frequency of pair i: theta^(-2i/rotaryDim). rotaryDim, not E, is the denominator.
      const angle = position * theta ** ((-2 * i) / rotaryDim);
      const cos = Math.cos(angle);
      const sin = Math.sin(angle);
      const a = r * E + (interleaved ? 2 * i : i); // the pair's first feature
      const c = r * E + (interleaved ? 2 * i + 1 : i + half); // and its second
      const first = x.data[a];
      const second = x.data[c];
      // Each pair (first, second) turns by its angle: the textbook rotation.
      rotated[a] = first * cos - second * sin;
      rotated[c] = first * sin + second * cos;
    }
  }
  return { shape: x.shape, data: rotated };
}

/** nn.Linear: y = x · Wᵀ + b, W stored [out, in]. x [..., in] -> [..., out]. */
function linear(x: Flat, weight: Flat, bias: Flat | null): Flat {
  const [outs, ins] = weight.shape;
  const rows = product(x.shape.slice(0, -1)); // from the shape: ins may be 0
  const y = new Float64Array(rows * outs); // [..., out]
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outs; o++) {
      let sum = 0;
      for (let c = 0; c < ins; c++) {
        sum += x.data[r * ins + c] * weight.data[o * ins + c];
      }
      y[r * outs + o] = bias === null ? sum : sum + bias.data[o];
    }
  }
  return { shape: [...x.shape.slice(0, -1), outs], data: y };
}

/** [B..., L, H·E] -> [B..., H, L, E]: feature h·E + e is head h's feature e (head-major). */
function splitHeads(x: Flat, heads: number, features: number): Flat {
  const L = x.shape[x.shape.length - 2];
  const batches = product(x.shape.slice(0, -2)); // B...  (from the shape: L may be 0)
  const out = new Float64Array(x.data.length); // [B..., H, L, E]
  for (let b = 0; b < batches; b++) {
    for (let h = 0; h < heads; h++) {
      for (let l = 0; l < L; l++) {
        for (let e = 0; e < features; e++) {
          out[((b * heads + h) * L + l) * features + e] =
            x.data[(b * L + l) * heads * features + h * features + e];
        }
      }
    }
  }
  return { shape: [...x.shape.slice(0, -2), heads, L, features], data: out };
}

/** past [B..., H, P, w] then x [B..., H, L, w] along the positions: [B..., H, P+L, w], copied. */
function appendRows(past: Flat, x: Flat): Flat {
  const [P, width] = past.shape.slice(-2);
  const L = x.shape[x.shape.length - 2];
  const blocks = product(x.shape.slice(0, -2)); // B... · H  (from the shape: P or L may be 0)
  const out = new Float64Array(blocks * (P + L) * width); // [B..., H, P+L, w]
  for (let b = 0; b < blocks; b++) {
    out.set(past.data.subarray(b * P * width, (b + 1) * P * width), b * (P + L) * width);
    out.set(x.data.subarray(b * L * width, (b + 1) * L * width), (b * (P + L) + P) * width);
  }
  return { shape: [...x.shape.slice(0, -2), P + L, width], data: out };
}

/** [B..., H, L, Ev] -> [B..., L, H·Ev]: the transpose back, head h's feature e is h·Ev + e again. */
function mergeHeads(x: Flat): Flat {
  const [heads, L, features] = x.shape.slice(-3);
  const batches = product(x.shape.slice(0, -3)); // B...  (from the shape: L may be 0)
  const out = new Float64Array(x.data.length); // [B..., L, H·Ev]
  for (let b = 0; b < batches; b++) {
    for (let h = 0; h < heads; h++) {
      for (let l = 0; l < L; l++) {
        for (let e = 0; e < features; e++) {
          out[(b * L + l) * heads * features + h * features + e] =
            x.data[((b * heads + h) * L + l) * features + e];
        }
      }
    }
  }
  return { shape: [...x.shape.slice(0, -3), L, heads * features], data: out };
}

function flatten(x: NestedArray | number): number[] {
  return Array.isArray(x) ? (x as NestedArray[]).flatMap((row) => flatten(row)) : [x];
}

/** A layer over a core that answers at once, and one over a core that answers later. */
type LayerArguments = [xQ: TensorInput, xKv: TensorInput | null, params: LayerParams, options: LayerOptions];
interface Layer {
  (
    xQ: TensorInput,
    xKv: TensorInput | null,
    params: LayerParams,
    options: LayerOptions & ({ readonly needWeights: true } | { readonly returnCache: true }),
  ): LayerResult;
  (...args: LayerArguments): NestedArray;
}
interface AsyncLayer {
  (
    xQ: TensorInput,
    xKv: TensorInput | null,
    params: LayerParams,
    options: LayerOptions & ({ readonly needWeights: true } | { readonly returnCache: true }),
  ): Promise<LayerResult>;
  (...args: LayerArguments): Promise<NestedArray>;
}

/** The layer over one port's attention core (attentionSteps of attention.ts, flash.ts, simd.ts). */
export function layerWith(core: AttentionCore): Layer {
  return ((...args: LayerArguments) => layerOver(core, ...args)) as Layer;
}

/** The layer over a core that answers later (webgpu.ts's attentionSteps). */
export function layerWithAsync(core: AsyncAttentionCore): AsyncLayer {
  return (async (...args: LayerArguments) => await layerOver(core, ...args)) as AsyncLayer;
}

/** The six steps, over any core. */
function layerOver(
  core: AttentionCore | AsyncAttentionCore,
  xQ: TensorInput,
  xKv: TensorInput | null,
  params: LayerParams,
  options: LayerOptions,
): NestedArray | LayerResult | Promise<NestedArray | LayerResult> {
  checkLayerArguments(params, options);
  const {
    attnMask = null,
    isCausal = false,
    scale = null,
    softcap = 0,
    window = null,
    sinkTokens = 0,
    sinkLogits = null,
    kvSeqlen = null,
    rope = null,
    needWeights = false,
    pastKey = null,
    pastValue = null,
    returnCache = false,
    memoryLimit = DEFAULT_MEMORY_LIMIT,
  } = options;
  const [numHeads, numKvHeads] = checkHeads(options.numHeads, options.numKvHeads);
  checkMemoryLimit(memoryLimit); // before any tensor is read: each is read within it
  if (rope !== null && xKv !== null) {
    throw new AttentionInputError(
      "value",
      "rope rotates by the positions of one sequence: give it with self-attention only (no xKv)",
    );
  }
  const read = (name: string, tensor: TensorInput) => toArray(name, tensor, memoryLimit);
  const x = read("xQ", xQ); // [B..., Lq, D]
  const xk = xKv === null ? x : read("xKv", xKv); // [B..., Lk, Dkv]
  const wQ = read("wQ", params.wQ);
  const wK = read("wK", params.wK);
  const wV = read("wV", params.wV);
  const wO = read("wO", params.wO);
  const bias = (name: string, b: TensorInput | null | undefined) => (b == null ? null : read(name, b));
  const bQ = bias("bQ", params.bQ);
  const bK = bias("bK", params.bK);
  const bV = bias("bV", params.bV);
  const bO = bias("bO", params.bO);
  const shapeOf = (b: Flat | null) => (b === null ? null : b.shape);
  const shapes = checkLayerShapes(
    x.shape,
    xk.shape,
    { wQ: wQ.shape, wK: wK.shape, wV: wV.shape, wO: wO.shape },
    { bQ: shapeOf(bQ), bK: shapeOf(bK), bV: shapeOf(bV), bO: shapeOf(bO) },
    numHeads,
    numKvHeads,
  );
  const rotary = rope === null ? null : checkRope(rope, shapes.features);
  checkNeedWeights(needWeights);
  checkReturnCache(returnCache);
  const pastK = pastKey == null ? null : read("pastKey", pastKey);
  const pastV = pastValue == null ? null : read("pastValue", pastValue);
  const cached = checkPast(shapeOf(pastK), shapeOf(pastV), x.shape, shapes); // P
  checkLayerSize(x.shape, xk.shape, shapes, cached, memoryLimit); // before step 1

  // Step 1: project. Three learned linear maps read queries, keys and values out of the inputs.
  let q = linear(x, wQ, bQ); // [B..., Lq, Hq·E]
  let k = linear(xk, wK, bK); // [B..., Lk, Hkv·E]
  let v = linear(xk, wV, bV); // [B..., Lk, Hkv·Ev]

  // Step 2: split heads. Feature h·E + e is head h's feature e (head-major); the transpose puts
  // each head's rows together, as the core wants them. A reshape alone would mix positions.
  q = splitHeads(q, numHeads, shapes.features); // [B..., Hq, Lq, E]
  k = splitHeads(k, numKvHeads, shapes.features); // [B..., Hkv, Lk, E]
  v = splitHeads(v, numKvHeads, shapes.valueFeatures); // [B..., Hkv, Lk, Ev]

  // Step 3: rotate. RoPE turns queries and keys (never values) by their positions P..P+L-1:
  // after a cache of P positions the new rows are rows P, P+1, ... of the sequence.
  if (rotary !== null) {
    const L = x.shape[x.shape.length - 2];
    const positions = { shape: [L], data: Float64Array.from({ length: L }, (_, l) => cached + l) }; // [L]
    q = rotate(q, positions, rotary); // [B..., Hq, Lq, E]
    k = rotate(k, positions, rotary); // [B..., Hkv, Lk, E]
  }
  // The cache: the earlier keys (already rotated) and values, then these, unchanged.
  if (pastK !== null && pastV !== null) {
    k = appendRows(pastK, k); // [B..., Hkv, P+Lk, E]
    v = appendRows(pastV, v); // [B..., Hkv, P+Lk, Ev]
  }

  // Step 4: attend. The core, once for every head (query head h reads key/value head
  // h // (Hq / Hkv) when there are fewer key/value heads); row i is at position i + P. The window,
  // the sinks and kvSeqlen are the core's, over the P + Lk keys (the core checks them).
  const attended = core(q, k, v, {
    attnMask,
    isCausal,
    scale,
    softcap,
    window,
    sinkTokens,
    sinkLogits,
    kvSeqlen,
    enableGqa: numKvHeads !== numHeads,
    queryOffset: cached,
    memoryLimit,
  });
  // The rest waits for the core where it answers later (the WebGPU port's runs on the GPU).
  return attended instanceof Promise ? attended.then(finish) : finish(attended);

  function finish(steps: AttentionSteps): NestedArray | LayerResult {
    const heads = { shape: steps.outputShape, data: Float64Array.from(flatten(steps.output)) }; // [B..., Hq, Lq, Ev]

    // Step 5: merge heads. The transpose back, then head h's feature e is feature h·Ev + e again.
    const merged = mergeHeads(heads); // [B..., Lq, Hq·Ev]

    // Step 6: out-project. One more linear map mixes the heads; a fully-masked row gives bO.
    const output = linear(merged, wO, bO); // [B..., Lq, Dout]

    const nested = nest(output.data, output.shape) as NestedArray;
    if (!needWeights && !returnCache) {
      return nested;
    }
    return {
      output: nested,
      weights: needWeights ? steps.weights : undefined, // [B..., Hq, Lq, P+Lk]
      presentKey: returnCache ? (nest(k.data, k.shape) as NestedArray) : undefined, // [B..., Hkv, P+Lk, E]
      presentValue: returnCache ? (nest(v.data, v.shape) as NestedArray) : undefined, // [B..., Hkv, P+Lk, Ev]
    };
  }
}

/** Multi-head attention as a layer, over the readable core (attention.ts); xKv null is
 * self-attention. The output [B..., Lq, Dout], or with needWeights or returnCache
 * { output, weights, presentKey, presentValue }. */
export const multiHeadAttention = layerWith(attentionSteps);
