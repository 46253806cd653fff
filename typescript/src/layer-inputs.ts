/**
 * The checks of the multi-head attention layer and of rotary position embeddings (the attention
 * core checks its own inputs: inputs.ts). The twin of python/attention_port/layer_inputs.py: the
 * same kinds and messages, with argument names in camelCase (numHeads, wQ, xKv, rotaryDim).
 */

import {
  CORE_CHECKS,
  LAYER_CHECKS,
  ROPE_CHECKS,
  ROPE_DEFAULTS,
  type RotaryOptions,
} from "./generated/options.ts";
import {
  AttentionInputError,
  checkOption,
  describeValue,
  formatShape,
  optionError,
  product,
} from "./inputs.ts";

export interface LayerShapes {
  readonly numHeads: number; // Hq
  readonly numKvHeads: number; // Hkv
  readonly features: number; // E, per head, of queries and keys
  readonly valueFeatures: number; // Ev, per head, of values
  readonly outFeatures: number; // Dout
}

/** RoPE's options, as contract/options.json declares them (generated/options.ts holds their docs). */
export interface RopeOptions extends RotaryOptions {}

export interface CheckedRope {
  readonly theta: number;
  readonly rotaryDim: number;
  readonly interleaved: boolean;
}

const positiveInt = (x: unknown): x is number => typeof x === "number" && Number.isInteger(x) && x > 0;

export function checkHeads(numHeads: unknown, numKvHeads: unknown): [number, number] {
  if (!positiveInt(numHeads)) {
    throw optionError(LAYER_CHECKS.numHeads, numHeads);
  }
  if (numKvHeads === undefined || numKvHeads === null) {
    return [numHeads, numHeads];
  }
  if (!positiveInt(numKvHeads)) {
    throw optionError(LAYER_CHECKS.numKvHeads, numKvHeads);
  }
  if (numHeads % numKvHeads !== 0) {
    throw new AttentionInputError(
      "heads",
      `numHeads (${String(numHeads)}) must be a multiple of numKvHeads (${String(numKvHeads)})`,
    );
  }
  return [numHeads, numKvHeads];
}

type Shape = readonly number[];

export function checkLayerShapes(
  xQ: Shape,
  xKv: Shape,
  weights: { readonly wQ: Shape; readonly wK: Shape; readonly wV: Shape; readonly wO: Shape },
  biases: Readonly<Record<"bQ" | "bK" | "bV" | "bO", Shape | null>>,
  numHeads: number,
  numKvHeads: number,
): LayerShapes {
  const f = formatShape;
  for (const [name, shape] of [
    ["xQ", xQ],
    ["xKv", xKv],
  ] as const) {
    if (shape.length < 2) {
      throw new AttentionInputError(
        "rank",
        `${name} must have at least 2 dimensions ([L, D]), got shape ${f(shape)}`,
      );
    }
  }
  if (f(xKv.slice(0, -2)) !== f(xQ.slice(0, -2))) {
    throw new AttentionInputError(
      "shape",
      `xKv has batch dims ${f(xKv.slice(0, -2))} but xQ has ${f(xQ.slice(0, -2))} (xQ ${f(xQ)}, xKv ${f(xKv)})`,
    );
  }
  for (const [name, shape] of Object.entries(weights)) {
    if (shape.length !== 2) {
      throw new AttentionInputError(
        "rank",
        `${name} must be a matrix [out, in] as nn.Linear stores it, got shape ${f(shape)}`,
      );
    }
  }
  const { wQ, wK, wV, wO } = weights;
  for (const [name, weight, source, x] of [
    ["wQ", wQ, "xQ", xQ],
    ["wK", wK, "xKv", xKv],
    ["wV", wV, "xKv", xKv],
  ] as const) {
    if (weight[1] !== x[x.length - 1]) {
      throw new AttentionInputError(
        "shape",
        `${name} has ${String(weight[1])} columns but ${source} has feature size ${String(x[x.length - 1])}` +
          ` (${source} ${f(x)}, ${name} ${f(weight)})`,
      );
    }
  }
  for (const [name, weight, heads, headsName] of [
    ["wQ", wQ, numHeads, "numHeads"],
    ["wK", wK, numKvHeads, "numKvHeads"],
    ["wV", wV, numKvHeads, "numKvHeads"],
  ] as const) {
    if (weight[0] % heads !== 0) {
      throw new AttentionInputError(
        "heads",
        `${name} has ${String(weight[0])} rows, not a multiple of ${headsName} (${String(heads)}) (${name} ${f(weight)})`,
      );
    }
  }
  const features = wQ[0] / numHeads;
  const valueFeatures = wV[0] / numKvHeads;
  if (wK[0] !== numKvHeads * features) {
    throw new AttentionInputError(
      "heads",
      `wK has ${String(wK[0])} rows but numKvHeads (${String(numKvHeads)}) times the query heads' feature size` +
        ` (${String(features)}) is ${String(numKvHeads * features)} (wQ ${f(wQ)}, wK ${f(wK)})`,
    );
  }
  if (wO[1] !== numHeads * valueFeatures) {
    throw new AttentionInputError(
      "shape",
      `wO has ${String(wO[1])} columns but numHeads (${String(numHeads)}) times the value heads' feature size` +
        ` (${String(valueFeatures)}) is ${String(numHeads * valueFeatures)} (wV ${f(wV)}, wO ${f(wO)})`,
    );
  }
  for (const [name, shape] of Object.entries(biases)) {
    const rows = weights[`w${name.slice(1)}` as keyof typeof weights][0];
    if (shape !== null && (shape.length !== 1 || shape[0] !== rows)) {
      throw new AttentionInputError(
        "shape",
        `${name} must have shape [${String(rows)}] (the rows of w${name.slice(1)}), got ${f(shape)}`,
      );
    }
  }
  return { numHeads, numKvHeads, features, valueFeatures, outFeatures: wO[0] };
}

/** "theta, rotaryDim and interleaved". */
const listed = (names: readonly string[]) => `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`;

/** rope = { theta, rotaryDim, interleaved } (each optional: RoPE's options of contract/options.json),
 * checked against E. */
export function checkRope(rope: unknown, features: number): CheckedRope {
  if (typeof rope !== "object" || rope === null || Array.isArray(rope)) {
    throw optionError(LAYER_CHECKS.rope, rope, { options: listed(Object.keys(ROPE_DEFAULTS)) });
  }
  const unknown = Object.keys(rope)
    .filter((k) => !Object.hasOwn(ROPE_DEFAULTS, k))
    .sort();
  if (unknown.length > 0) {
    throw new AttentionInputError("value", `rope has an unknown option '${unknown[0]}'`);
  }
  // An option left out (or undefined) has its default; null is a value of its own, refused for a
  // number or a boolean as Python refuses None (only rotaryDim takes it, as "E").
  const { theta, rotaryDim, interleaved } = rope as RopeOptions;
  return checkRotaryOptions(
    theta === undefined ? ROPE_DEFAULTS.theta : theta,
    rotaryDim,
    interleaved === undefined ? ROPE_DEFAULTS.interleaved : interleaved,
    features,
  );
}

export function checkRotaryOptions(
  theta: unknown,
  rotaryDim: unknown,
  interleaved: unknown,
  features: number,
): CheckedRope {
  // theta, interleaved, then rotaryDim, whose range is the heads' feature size E (null: E).
  checkOption(ROPE_CHECKS.theta, theta);
  checkOption(ROPE_CHECKS.interleaved, interleaved);
  const dim = rotaryDim === undefined || rotaryDim === null ? features : rotaryDim;
  if (!(typeof dim === "number" && Number.isInteger(dim) && dim > 0 && dim <= features && dim % 2 === 0)) {
    throw optionError(ROPE_CHECKS.rotaryDim, dim, { features: String(features) });
  }
  return { theta: theta as number, rotaryDim: dim, interleaved: interleaved as boolean };
}

/** positions [L] or [B..., L] for x [B..., H, L, E]: whole numbers >= 0. */
export function checkPositions(x: Shape, positions: Shape, values: ArrayLike<number>): void {
  const L = x[x.length - 2];
  const lead = positions.slice(0, -1);
  if (
    positions.length === 0 ||
    positions[positions.length - 1] !== L ||
    (positions.length > 1 && formatShape(lead) !== formatShape(x.slice(0, -3)))
  ) {
    throw new AttentionInputError(
      "shape",
      `positions must have shape [L] or [B..., L] with L = ${String(L)} (x ${formatShape(x)},` +
        ` positions ${formatShape(positions)})`,
    );
  }
  for (const p of Array.from(values)) {
    if (!(Number.isFinite(p) && p >= 0 && Number.isInteger(p))) {
      throw new AttentionInputError("value", `positions must be whole numbers >= 0, got ${describeValue(p)}`);
    }
  }
}

/** params and options are objects: TypeScript's own check, as Python has keyword arguments
 * instead (options carries numHeads, so it cannot be left out). */
export function checkLayerArguments(params: unknown, options: unknown): void {
  const isObject = (x: unknown) => typeof x === "object" && x !== null && !Array.isArray(x);
  if (!isObject(params)) {
    throw new AttentionInputError(
      "value",
      `params must be an object of wQ, wK, wV and wO (bQ, bK, bV and bO optional), got ${describeValue(params)}`,
    );
  }
  if (!isObject(options)) {
    throw new AttentionInputError(
      "value",
      `options must be an object with numHeads, got ${describeValue(options)}`,
    );
  }
}

const MEMORY_LIMIT = CORE_CHECKS.find((option) => option.name === "memoryLimit")!;

/** memoryLimit as the core declares it (a number of bytes > 0), checked before any tensor is
 * read: the layer reads its inputs and computes within it. */
export function checkMemoryLimit(memoryLimit: unknown): void {
  checkOption(MEMORY_LIMIT, memoryLimit);
}

/** needWeights is true or false: whether the layer also returns each head's weights. */
export function checkNeedWeights(needWeights: unknown): void {
  checkOption(LAYER_CHECKS.needWeights, needWeights);
}

/** returnCache is true or false: whether the layer also returns the grown cache. */
export function checkReturnCache(returnCache: unknown): void {
  checkOption(LAYER_CHECKS.returnCache, returnCache);
}

/** Refuse, before the projections, a call whose own tensors need more than memoryLimit bytes: the
 * queries, the keys and values with the cache, the merged heads and the output, one float64 copy
 * of each (the core holds its steps to the same limit). In the Python twin's order of arithmetic. */
export function checkLayerSize(
  xQ: Shape,
  xKv: Shape,
  shapes: LayerShapes,
  cached: number,
  memoryLimit: number,
): void {
  const batch = xQ.slice(0, -2); // B...
  const L = xQ[xQ.length - 2]; // Lq
  const keys = cached + xKv[xKv.length - 2]; // P+Lk
  const tensors = [
    [...batch, shapes.numHeads, L, shapes.features], // queries
    [...batch, shapes.numKvHeads, keys, shapes.features], // keys
    [...batch, shapes.numKvHeads, keys, shapes.valueFeatures], // values
    [...batch, L, shapes.numHeads * shapes.valueFeatures], // merged heads
    [...batch, L, shapes.outFeatures], // output
  ];
  const needed = 8 * tensors.reduce((sum, shape) => sum + product(shape), 0);
  if (needed > memoryLimit) {
    const [q, k, v, merged, output] = tensors.map((shape) => formatShape(shape));
    throw new AttentionInputError(
      "size",
      `the layer needs ${String(needed)} bytes as float64 for queries ${q}, keys ${k},` +
        ` values ${v}, merged heads ${merged} and output ${output}, more than memoryLimit =` +
        ` ${String(memoryLimit)}; pass a larger memoryLimit to compute them`,
    );
  }
}

/** pastKey [B..., Hkv, P, E] and pastValue [B..., Hkv, P, Ev], both or neither: the cache of
 * earlier keys (after RoPE) and values, with the key/value heads (never expanded to Hq). Returns
 * P, the number of cached positions (0 without a cache). */
export function checkPast(
  pastKey: Shape | null,
  pastValue: Shape | null,
  xQ: Shape,
  shapes: LayerShapes,
): number {
  const f = formatShape;
  if (pastKey === null && pastValue === null) {
    return 0;
  }
  for (const [name, shape] of [
    ["pastKey", pastKey],
    ["pastValue", pastValue],
  ] as const) {
    if (shape === null) {
      throw new AttentionInputError(
        "value",
        `${name} is missing: pastKey and pastValue come together, give both or neither`,
      );
    }
  }
  const key = pastKey as Shape;
  const value = pastValue as Shape;
  for (const [name, shape, width, letter] of [
    ["pastKey", key, shapes.features, "E"],
    ["pastValue", value, shapes.valueFeatures, "Ev"],
  ] as const) {
    if (shape.length < 3) {
      throw new AttentionInputError(
        "rank",
        `${name} must have at least 3 dimensions ([Hkv, P, ${letter}]), got shape ${f(shape)}`,
      );
    }
    if (f(shape.slice(0, -3)) !== f(xQ.slice(0, -2))) {
      throw new AttentionInputError(
        "shape",
        `${name} has batch dims ${f(shape.slice(0, -3))} but xQ has ${f(xQ.slice(0, -2))} (xQ ${f(xQ)}, ${name} ${f(shape)})`,
      );
    }
    if (shape[shape.length - 3] !== shapes.numKvHeads) {
      throw new AttentionInputError(
        "heads",
        `${name} has ${String(shape[shape.length - 3])} heads but the layer has numKvHeads = ${String(shapes.numKvHeads)}` +
          ` (${name} ${f(shape)}): the cache keeps the key/value heads, never expanded`,
      );
    }
    if (shape[shape.length - 1] !== width) {
      throw new AttentionInputError(
        "shape",
        `${name} has feature size ${String(shape[shape.length - 1])} but the layer's heads have ${letter} = ${String(width)}` +
          ` (${name} ${f(shape)})`,
      );
    }
  }
  if (key[key.length - 2] !== value[value.length - 2]) {
    throw new AttentionInputError(
      "shape",
      `pastKey holds ${String(key[key.length - 2])} positions but pastValue holds ${String(value[value.length - 2])}` +
        ` (pastKey ${f(key)}, pastValue ${f(value)})`,
    );
  }
  return key[key.length - 2];
}
