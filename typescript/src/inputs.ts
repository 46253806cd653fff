/**
 * Input checking for the TypeScript ports: one error type, one order of checks, one wording.
 *
 * The line-for-line twin of python/attention_port/inputs.py, so that a bad input raises the same
 * `kind` with the same message in every language. The invalid-input fixtures hold the expected
 * kind and message; both test suites check them.
 *
 * Checks run in this order, and the first failure is thrown:
 *   1. options: isCausal, enableGqa (booleans), scale (finite or null), softcap (finite, >= 0),
 *      memoryLimit (a number > 0)                                        kind: value
 *   2. query, key, value: each a rectangular array of numbers           kinds: ragged, type
 *   3. attnMask, if given: a rectangular array of booleans or numbers    kinds: ragged, type
 *   4. shapes: ranks, batch dims, heads, feature sizes, key/value length  kinds: rank, shape, heads
 *   5. attnMask shape: broadcasts to the scores [..., Hq, Lq, Lk]        kind: mask
 *   6. size: the memory the computation needs, within memoryLimit        kind: size
 *
 * A few inputs exist in one language only and are checked where they arise: the options object
 * itself here (`null` is not one); Python numbers too large for a float64, numpy object arrays
 * and torch tensors there.
 *
 * Messages name the argument with its TypeScript spelling (`attnMask`, `enableGqa`, `isCausal`);
 * the Python ports use the same words with their own spelling (`attn_mask`, `enable_gqa`).
 *
 * A tensor comes in one of two forms: nested arrays (`number[][]`, `number[][][][]`, any rank),
 * or a shaped flat tensor `{ shape, data }` in row-major order. The second form exists because
 * nested arrays cannot say the shape of an empty tensor: `[]` could be [0, 4] or [0, 7].
 */

// Every `kind` an AttentionInputError can carry, shared with the Python ports.
export const ERROR_KINDS = ["ragged", "type", "rank", "shape", "heads", "mask", "value", "size"] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

// The most memory, in bytes, a port may need for one call before it refuses the input (kind
// "size") instead of allocating it; a caller raises it with `memoryLimit`. 2 GiB: the readable
// port holds three float64 tensors of the scores' shape, so about 9,400 x 9,400 scores per call.
export const DEFAULT_MEMORY_LIMIT = 2 ** 31;

/** Bad input to an attention port. `kind` is one of ERROR_KINDS; the message names the argument
 * and the shapes involved. */
export class AttentionInputError extends Error {
  readonly kind: ErrorKind;

  constructor(kind: ErrorKind, message: string) {
    if (!ERROR_KINDS.includes(kind)) {
      throw new Error(`unknown error kind ${JSON.stringify(kind)}`);
    }
    super(message);
    this.name = "AttentionInputError";
    this.kind = kind;
  }
}

/** Nested arrays of numbers: a scalar at the leaves, arrays above them. */
export type NestedNumbers = number | readonly NestedNumbers[];
/** Nested arrays of booleans (true = may attend) or of numbers (added to the scores). */
export type NestedMask = number | boolean | readonly NestedMask[];
/** A flat row-major tensor with its shape; the only way to pass an empty tensor such as [0, 4]. */
export interface ShapedTensor {
  readonly shape: readonly number[];
  readonly data: ArrayLike<number>;
}
export interface ShapedMask {
  readonly shape: readonly number[];
  readonly data: ArrayLike<number | boolean>;
}
/** query, key or value as a caller gives it. */
export type TensorInput = readonly NestedNumbers[] | ShapedTensor;
/** attnMask as a caller gives it. */
export type MaskInput = readonly NestedMask[] | ShapedMask;

// ---- The public API's types, shared by both ports (attention.ts and flash.ts re-export them). ----

/** Nested arrays of numbers, rank >= 1: what the port returns (number[][] for rank-2 inputs). */
export type NestedArray = number[] | NestedArray[];

export interface AttentionOptions {
  /** Boolean (true = may attend) or numeric (added to the scores); broadcasts to [B..., Hq, Lq, Lk]. */
  readonly attnMask?: MaskInput | null;
  /** Query i may attend to key j only when j <= i. Combines with attnMask: both must allow. */
  readonly isCausal?: boolean;
  /** Multiplies the scores; defaults to 1/sqrt(E). */
  readonly scale?: number | null;
  /** Grouped-query attention: Hq may be a multiple of Hkv. */
  readonly enableGqa?: boolean;
  /** If > 0, logits become softcap * tanh(logits / softcap). */
  readonly softcap?: number;
  /** The most bytes one call may need; larger inputs are refused (kind "size"). 2 GiB by default. */
  readonly memoryLimit?: number;
}

/** Every intermediate tensor, for teaching and for finding the step where two ports part.
 * `Tensor` is number[][] for rank-2 inputs (an overload of attentionSteps says so). */
export interface AttentionSteps<Tensor extends NestedArray = NestedArray> {
  readonly scores: Tensor; // [B..., Hq, Lq, Lk]  Step 1: query · keyᵀ
  readonly logits: Tensor; // [B..., Hq, Lq, Lk]  Steps 2-3: scaled, softcapped, masked (softmax's input)
  readonly weights: Tensor; // [B..., Hq, Lq, Lk]  Step 4: softmax over keys; each row sums to 1 or is 0
  readonly output: Tensor; // [B..., Hq, Lq, Ev]  Step 5: weights · value
  readonly scoresShape: readonly number[]; // [B..., Hq, Lq, Lk] (kept: nested [] cannot say it)
  readonly outputShape: readonly number[]; // [B..., Hq, Lq, Ev]
}

/** A flat row-major tensor: shape plus values (the fast ports' flat entry points). */
export interface FlatTensor {
  readonly shape: readonly number[];
  readonly data: Float64Array | Float32Array;
}

/** attnMask in flat form; `dtype` says which kind it is:
 *  - "bool":  data is a Uint8Array; nonzero = may attend, 0 = masked (-Infinity).
 *  - "float": data is a Float64Array or Float32Array, added to the logits (-Infinity masks).
 * Broadcasts numpy-style to the scores [B..., Hq, Lq, Lk], like the nested mask. */
export type FlatMask =
  | { readonly dtype: "bool"; readonly shape: readonly number[]; readonly data: Uint8Array }
  | {
      readonly dtype: "float";
      readonly shape: readonly number[];
      readonly data: Float64Array | Float32Array;
    };

/** The flat entry's options: AttentionOptions, with the mask in flat form. */
export interface FlatAttentionOptions extends Omit<AttentionOptions, "attnMask"> {
  readonly attnMask?: FlatMask | null;
}

/** A checked mask as the fast kernels read it: exactly one of bool and float is set. */
export interface KernelMask {
  readonly shape: readonly number[];
  readonly bool: Uint8Array | null; // nonzero = may attend
  readonly float: Float64Array | Float32Array | null; // added to the logits
}

/** A checked tensor: float64 values, row-major (toArray's result). */
export interface FloatArray {
  readonly shape: readonly number[];
  readonly data: Float64Array;
}
/** A checked mask (toMaskArray's result): booleans (true = may attend) or float64 (added). */
export type MaskArray =
  | { readonly dtype: "bool"; readonly shape: readonly number[]; readonly data: readonly boolean[] }
  | { readonly dtype: "float64"; readonly shape: readonly number[]; readonly data: Float64Array };

/** Messages are meant to be one line already; a stray newline must not make a second. */
export function oneLine(message: string): string {
  return message.replace(/\s*\n\s*/g, " ").trim();
}

/** `[2, 4, 8]`: the way both languages write a shape in a message. */
export function formatShape(shape: readonly number[]): string {
  return `[${shape.map((n) => String(Math.trunc(n))).join(", ")}]`;
}

/** What a non-number is, in words both languages share. (Numbers: String(x), which Python's
 * format_number imitates.) */
export function describeValue(x: unknown): string {
  if (x == null) {
    return "null";
  }
  if (typeof x === "boolean") {
    return "a boolean";
  }
  if (typeof x === "string") {
    return "a string";
  }
  if (typeof x === "number") {
    return String(x);
  }
  if (Array.isArray(x)) {
    return "an array";
  }
  if (typeof x === "object") {
    const prototype: unknown = Object.getPrototypeOf(x);
    if (prototype === Object.prototype || prototype === null) {
      return "an object";
    }
    return `a ${(x as object).constructor.name}`;
  }
  return `a ${typeof x}`; // bigint, symbol, function
}

function isNumber(x: unknown): x is number {
  return typeof x === "number";
}

function isBoolean(x: unknown): x is boolean {
  return typeof x === "boolean";
}

function isArray(x: unknown): x is readonly unknown[] {
  return Array.isArray(x);
}

/** `[1][2]`: an index path as a message writes it after the argument's name. */
export function path(indices: readonly number[]): string {
  return indices.map((i) => `[${i}]`).join("");
}

/** The shape nested arrays give by their first element at each depth (what inferShape then checks). */
function nestedShape(data: unknown): number[] {
  const shape: number[] = [];
  let node = data;
  while (isArray(node)) {
    shape.push(node.length);
    if (node.length === 0) {
      break;
    }
    node = node[0];
  }
  return shape;
}

/** Shape of nested arrays, read from the first element at each depth, then checked everywhere.
 *
 * A ragged array throws kind "ragged" naming the first element (depth first) that disagrees.
 */
export function inferShape(name: string, data: unknown): number[] {
  const shape = nestedShape(data);

  const ragged = (where: string, problem: string) =>
    new AttentionInputError(
      "ragged",
      `${name} is ragged: ${where} ${problem} (shape from the first elements: ${formatShape(shape)})`,
    );

  function walk(node: unknown, depth: number, where: string): void {
    if (depth === shape.length) {
      if (isArray(node)) {
        throw ragged(where, "is an array, expected a scalar");
      }
      return;
    }
    if (!isArray(node)) {
      throw ragged(where, `is not an array, expected length ${shape[depth]}`);
    }
    if (node.length !== shape[depth]) {
      throw ragged(where, `has length ${node.length}, expected ${shape[depth]}`);
    }
    for (let i = 0; i < node.length; i++) {
      walk(node[i], depth + 1, `${where}[${i}]`);
    }
  }

  walk(data, 0, name);
  return shape;
}

/** Every scalar of a rectangular nested array `depth` deep, in row-major order (a hole in a sparse
 * array is undefined). */
export function leaves(data: unknown, depth: number, out: unknown[] = []): unknown[] {
  if (depth === 0) {
    out.push(data);
  } else {
    for (const node of data as readonly unknown[]) {
      leaves(node, depth - 1, out);
    }
  }
  return out;
}

/** How many values a tensor of this shape holds (1 for the shape []). */
export function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** The index path of a flat row-major position: 5 in [2, 3] is [1][2]. */
export function indicesOf(flat: number, shape: readonly number[]): number[] {
  const indices = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    indices[d] = flat % shape[d];
    flat = Math.floor(flat / shape[d]);
  }
  return indices;
}

/** An object with `shape` and `data`: the shaped (flat) form of a tensor or mask. */
export function isShaped(x: unknown): x is { readonly shape: unknown; readonly data: unknown } {
  return typeof x === "object" && x !== null && !isArray(x) && "shape" in x && "data" in x;
}

/** The shaped form's own checks (no Python twin: a numpy array's shape is always sound).
 * `expected` words what `data` must be, for the message. */
function checkShaped(
  name: string,
  input: { readonly shape: unknown; readonly data: unknown },
  expected: string,
): { shape: number[]; data: ArrayLike<unknown> } {
  const { shape, data } = input;
  if (!isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
    const got = isArray(shape) ? `[${shape.map(describeValue).join(", ")}]` : describeValue(shape);
    throw new AttentionInputError(
      "shape",
      `${name}.shape must be an array of non-negative integers, got ${got}`,
    );
  }
  if (
    typeof data !== "object" ||
    data === null ||
    typeof (data as { length?: unknown }).length !== "number"
  ) {
    throw new AttentionInputError("type", `${name}.data must be ${expected}, got ${describeValue(data)}`);
  }
  const values = data as ArrayLike<unknown>;
  const size = product(shape as number[]);
  if (values.length !== size) {
    throw new AttentionInputError(
      "shape",
      `${name} has ${values.length} values but its shape ${formatShape(shape as number[])} needs ${size}`,
    );
  }
  return { shape: [...(shape as number[])], data: values };
}

/** The fast path of toArray and toMaskArray for nested arrays: one walk that checks every array's
 * length against `shape` and copies the leaves into `out` in row-major order, with `accept`
 * deciding whether a leaf is the kind wanted. It returns false at the first thing that is not as
 * expected, without saying what: the caller then runs the slow path (inferShape, leaves), which
 * throws the exact error. Valid input, the common case, costs one tight loop per innermost row
 * instead of a checking walk (inferShape) and a copying one (leaves). */
function fillNested<T>(
  data: unknown,
  shape: readonly number[],
  out: { [index: number]: T },
  accept: (leaf: unknown) => leaf is T,
): boolean {
  let flat = 0;
  const last = shape.length - 1;
  const walk = (node: unknown, depth: number): boolean => {
    if (!isArray(node) || node.length !== shape[depth]) {
      return false;
    }
    if (depth === last) {
      const start = flat; // a local index: `flat` lives in the closure's context, slower to update
      for (let i = 0; i < node.length; i++) {
        const leaf = node[i];
        if (!accept(leaf)) {
          return false;
        }
        out[start + i] = leaf;
      }
      flat += node.length;
      return true;
    }
    let i = 0;
    if (depth === last - 1) {
      // Rows four at a time: the four rows' loads do not wait on one another, so the cache misses
      // of rows scattered across the heap overlap instead of queueing. After a long kernel pass has
      // evicted them, this copies the rows about twice as fast as one row at a time.
      const width = shape[last];
      const isRow = (row: unknown): row is readonly unknown[] => isArray(row) && row.length === width;
      for (; i + 4 <= node.length; i += 4) {
        const a = node[i];
        const b = node[i + 1];
        const c = node[i + 2];
        const d = node[i + 3];
        if (!(isRow(a) && isRow(b) && isRow(c) && isRow(d))) {
          return false;
        }
        const start = flat;
        for (let t = 0; t < width; t++) {
          const x = a[t];
          const y = b[t];
          const z = c[t];
          const w = d[t];
          if (!(accept(x) && accept(y) && accept(z) && accept(w))) {
            return false;
          }
          out[start + t] = x;
          out[start + width + t] = y;
          out[start + 2 * width + t] = z;
          out[start + 3 * width + t] = w;
        }
        flat += 4 * width;
      }
    }
    for (; i < node.length; i++) {
      // every row left (or every node, above the rows)
      if (!walk(node[i], depth + 1)) {
        return false;
      }
    }
    return true;
  };
  return shape.length === 0 ? false : walk(data, 0);
}

/** The slow path of toArray and toMaskArray, for a shaped tensor (checkShaped) or for nested arrays
 * the fast path refused (inferShape throws if they are ragged): the shape, the leaves in row-major
 * order, and the index path of a leaf, `name[1][2]`, for a message. */
function shapeAndLeaves(
  name: string,
  data: unknown,
  expected: string,
): { shape: number[]; leaves: ArrayLike<unknown>; where: (flat: number) => string } {
  const shaped = isShaped(data) ? checkShaped(name, data, expected) : null;
  const shape = shaped?.shape ?? inferShape(name, data);
  const values = shaped?.data ?? leaves(data, shape.length);
  return { shape, leaves: values, where: (flat) => name + path(indicesOf(flat, shape)) };
}

/** Where toArray puts the numbers it copies: a new array unless the port keeps its own (simd.ts). */
export type Allocate = (name: string, length: number) => Float64Array;
const newArray: Allocate = (_name, length) => new Float64Array(length);

/** query, key or value as a float64 array: nested arrays or a shaped flat tensor. */
export function toArray(name: string, data: unknown, allocate: Allocate = newArray): FloatArray {
  if (!isShaped(data)) {
    const claimed = nestedShape(data);
    const fast = allocate(name, product(claimed));
    if (fillNested(data, claimed, fast, isNumber)) {
      return { shape: claimed, data: fast };
    }
  }
  // Shaped, or nested with something wrong: the slow path finds what, and throws it.
  const { shape, leaves, where } = shapeAndLeaves(name, data, "an array of numbers");
  if (leaves instanceof Float64Array) {
    return { shape, data: leaves };
  }
  for (let flat = 0; flat < leaves.length; flat++) {
    if (!isNumber(leaves[flat])) {
      throw new AttentionInputError(
        "type",
        `${where(flat)} is ${describeValue(leaves[flat])}, expected a number`,
      );
    }
  }
  const copy = allocate(name, leaves.length);
  copy.set(leaves as ArrayLike<number>);
  return { shape, data: copy };
}

/** attnMask as a bool array (true = may attend) or a float64 array (added to the scores). */
export function toMaskArray(data: unknown): MaskArray {
  const name = "attnMask";
  if (!isShaped(data)) {
    const claimed = nestedShape(data);
    let first: unknown = data;
    for (let d = 0; d < claimed.length && isArray(first); d++) {
      first = first[0];
    }
    if (isBoolean(first)) {
      const bools = new Array<boolean>(product(claimed));
      if (fillNested(data, claimed, bools, isBoolean)) {
        return { dtype: "bool", shape: claimed, data: bools };
      }
    } else if (isNumber(first)) {
      const numbers = new Float64Array(product(claimed));
      if (fillNested(data, claimed, numbers, isNumber)) {
        return { dtype: "float64", shape: claimed, data: numbers };
      }
    }
  }
  // Shaped, or nested that is empty, mixed or malformed: the slow path decides, and finds the exact
  // error. Every leaf must be of the first leaf's kind.
  const { shape, leaves, where } = shapeAndLeaves(name, data, "an array of booleans or numbers");
  const kindOf = (leaf: unknown) => (isBoolean(leaf) ? "a boolean" : isNumber(leaf) ? "a number" : null);
  const firstKind = kindOf(leaves[0]);
  for (let flat = 0; flat < leaves.length; flat++) {
    const kind = kindOf(leaves[flat]);
    if (kind === null) {
      throw new AttentionInputError(
        "type",
        `${where(flat)} is ${describeValue(leaves[flat])}, expected a boolean or a number`,
      );
    }
    if (kind !== firstKind) {
      throw new AttentionInputError(
        "type",
        `${name} mixes booleans and numbers: ${where(0)} is ${firstKind} but ${where(flat)} is ${kind}`,
      );
    }
  }
  if (firstKind === "a boolean") {
    return { dtype: "bool", shape, data: Array.from(leaves as ArrayLike<boolean>) };
  }
  return { dtype: "float64", shape, data: Float64Array.from(leaves as ArrayLike<number>) };
}

/** query, key or value in flat form: a { shape, data } whose data is a Float64Array or a
 * Float32Array, with the shaped form's checks (checkShaped). Nothing is copied. */
function checkFlatTensor(name: string, tensor: unknown): FlatTensor {
  if (!isShaped(tensor)) {
    throw new AttentionInputError(
      "type",
      `${name} must be a flat tensor { shape, data }, got ${describeValue(tensor)}`,
    );
  }
  const data: unknown = tensor.data;
  if (!(data instanceof Float64Array || data instanceof Float32Array)) {
    throw new AttentionInputError(
      "type",
      `${name}.data must be a Float64Array or a Float32Array, got ${describeValue(data)}`,
    );
  }
  return { shape: checkShaped(name, tensor, "an array of numbers").shape, data };
}

/** attnMask in flat form: its dtype, then the shaped form's checks, then the typed array its dtype
 * needs. Not widened: the kernels read it in place. */
function checkFlatMask(mask: unknown): KernelMask {
  const name = "attnMask";
  if (!isShaped(mask) || !("dtype" in mask)) {
    throw new AttentionInputError(
      "type",
      `${name} must be a flat mask { dtype, shape, data }, got ${describeValue(mask)}`,
    );
  }
  const dtype: unknown = mask.dtype;
  if (dtype !== "bool" && dtype !== "float") {
    throw new AttentionInputError(
      "type",
      `${name}.dtype must be "bool" or "float", got ${describeValue(dtype)}`,
    );
  }
  const expected = `${dtype === "bool" ? "a Uint8Array" : "a Float64Array or a Float32Array"} for dtype "${dtype}"`;
  const { shape, data } = checkShaped(name, mask, expected);
  if (dtype === "bool" && data instanceof Uint8Array) {
    return { shape, bool: data, float: null };
  }
  if (dtype === "float" && (data instanceof Float64Array || data instanceof Float32Array)) {
    return { shape, bool: null, float: data };
  }
  throw new AttentionInputError("type", `${name}.data must be ${expected}, got ${describeValue(data)}`);
}

/** The scalar options, checked before any tensor is touched. */
function checkOptions(
  isCausal: unknown,
  scale: unknown,
  enableGqa: unknown,
  softcap: unknown,
  memoryLimit: unknown,
): void {
  if (!isBoolean(isCausal)) {
    throw new AttentionInputError("value", `isCausal must be a boolean, got ${describeValue(isCausal)}`);
  }
  if (!isBoolean(enableGqa)) {
    throw new AttentionInputError("value", `enableGqa must be a boolean, got ${describeValue(enableGqa)}`);
  }
  if (scale != null && !(isNumber(scale) && Number.isFinite(scale))) {
    throw new AttentionInputError("value", `scale must be a finite number, got ${describeValue(scale)}`);
  }
  if (!(isNumber(softcap) && Number.isFinite(softcap) && softcap >= 0)) {
    throw new AttentionInputError(
      "value",
      `softcap must be a finite number >= 0, got ${describeValue(softcap)}`,
    );
  }
  if (!(isNumber(memoryLimit) && memoryLimit > 0)) {
    throw new AttentionInputError(
      "value",
      `memoryLimit must be a number of bytes > 0, got ${describeValue(memoryLimit)}`,
    );
  }
}

/** Refuse, before anything is allocated, a call whose steps need more than memoryLimit bytes: the
 * readable port holds scores, logits and weights, three float64 tensors of the scores' shape. */
export function checkSize(shapes: AttentionShapes, memoryLimit: number): void {
  const needed = 3 * 8 * product(shapes.scoresShape);
  if (needed > memoryLimit) {
    throw new AttentionInputError(
      "size",
      `the scores ${formatShape(shapes.scoresShape)} need ${String(needed)} bytes for` +
        ` scores, logits and weights, more than memoryLimit = ${String(memoryLimit)};` +
        " pass a larger memoryLimit to compute them",
    );
  }
}

/** The sizes every port loops over, named with the dimension letters of docs/design.md (section 2). */
export interface AttentionShapes {
  readonly batch: readonly number[]; // leading batch dims, equal across query, key and value
  readonly queryHeads: number; // Hq (1 for rank-2 inputs)
  readonly keyValueHeads: number; // Hkv (1 for rank-2 inputs)
  readonly queryLength: number; // Lq
  readonly keyLength: number; // Lk
  readonly features: number; // E
  readonly valueFeatures: number; // Ev
  readonly hasHeads: boolean; // rank >= 3: the dim before [L, E] is the head dim
  readonly groupSize: number; // query heads that share one key/value head (1 without GQA)
  readonly scoresShape: readonly number[]; // [B..., Hq, Lq, Lk] ([Lq, Lk] for rank 2)
  readonly outputShape: readonly number[]; // [B..., Hq, Lq, Ev] ([Lq, Ev] for rank 2)
}

/** Rank, batch, head, feature and length checks, then the mask's broadcast. */
export function checkShapes(
  queryShape: readonly number[],
  keyShape: readonly number[],
  valueShape: readonly number[],
  maskShape: readonly number[] | null,
  enableGqa: boolean,
): AttentionShapes {
  const [q, k, v] = [queryShape, keyShape, valueShape];
  const [qs, ks, vs] = [formatShape(q), formatShape(k), formatShape(v)];
  for (const [name, shape] of Object.entries({ query: q, key: k, value: v })) {
    if (shape.length < 2) {
      throw new AttentionInputError(
        "rank",
        `${name} must have at least 2 dimensions ([L, E]), got shape ${formatShape(shape)}`,
      );
    }
  }
  if (!(q.length === k.length && k.length === v.length)) {
    throw new AttentionInputError(
      "rank",
      `query, key and value must have the same rank, got query ${qs}, key ${ks}, value ${vs}`,
    );
  }
  const hasHeads = q.length >= 3;
  const batchRank = Math.max(q.length - 3, 0);
  for (const [name, shape] of Object.entries({ key: k, value: v })) {
    if (shape.slice(0, batchRank).some((n, i) => n !== q[i])) {
      throw new AttentionInputError(
        "shape",
        `${name} has batch dims ${formatShape(shape.slice(0, batchRank))} but query has` +
          ` ${formatShape(q.slice(0, batchRank))} (query ${qs}, ${name} ${formatShape(shape)})`,
      );
    }
  }
  const queryHeads = hasHeads ? q.at(-3)! : 1;
  const keyValueHeads = hasHeads ? k.at(-3)! : 1;
  if (hasHeads && v.at(-3) !== k.at(-3)) {
    throw new AttentionInputError(
      "heads",
      `value has head count ${v.at(-3)} but key has ${k.at(-3)} (key ${ks}, value ${vs})`,
    );
  }
  if (!enableGqa && queryHeads !== keyValueHeads) {
    throw new AttentionInputError(
      "heads",
      `query has head count ${queryHeads} but key and value have ${keyValueHeads};` +
        ` set enableGqa to share key/value heads across query heads (query ${qs}, key ${ks})`,
    );
  }
  if (enableGqa && (keyValueHeads === 0 || queryHeads % keyValueHeads !== 0)) {
    throw new AttentionInputError(
      "heads",
      `with enableGqa, query heads (${queryHeads}) must be a multiple of key/value heads` +
        ` (${keyValueHeads}) (query ${qs}, key ${ks})`,
    );
  }
  if (k.at(-1) !== q.at(-1)) {
    throw new AttentionInputError(
      "shape",
      `key has feature size ${k.at(-1)} but query has ${q.at(-1)} (query ${qs}, key ${ks})`,
    );
  }
  if (q.at(-1) === 0) {
    throw new AttentionInputError(
      "shape",
      `query has feature size 0; attention needs at least one feature (query ${qs})`,
    );
  }
  if (v.at(-2) !== k.at(-2)) {
    throw new AttentionInputError(
      "shape",
      `value has length ${v.at(-2)} but key has ${k.at(-2)} (key ${ks}, value ${vs})`,
    );
  }
  const batch = q.slice(0, batchRank);
  const heads = hasHeads ? [queryHeads] : [];
  const shapes: AttentionShapes = {
    batch,
    queryHeads,
    keyValueHeads,
    queryLength: q.at(-2)!,
    keyLength: k.at(-2)!,
    features: q.at(-1)!,
    valueFeatures: v.at(-1)!,
    hasHeads,
    // With no key/value heads there are no query heads either (checked above): nothing to group.
    groupSize: keyValueHeads > 0 ? Math.floor(queryHeads / keyValueHeads) : 1,
    scoresShape: [...batch, ...heads, q.at(-2)!, k.at(-2)!],
    outputShape: [...batch, ...heads, q.at(-2)!, v.at(-1)!],
  };
  if (maskShape !== null) {
    checkMaskShape(maskShape, shapes.scoresShape);
  }
  return shapes;
}

/** numpy broadcasting, aligned on the right: each mask dim is 1 or the scores' dim. */
function checkMaskShape(maskShape: readonly number[], scoresShape: readonly number[]): void {
  const [ms, ss] = [formatShape(maskShape), formatShape(scoresShape)];
  if (maskShape.length === 0) {
    throw new AttentionInputError("mask", `attnMask must have at least 1 dimension, got shape ${ms}`);
  }
  if (maskShape.length > scoresShape.length) {
    throw new AttentionInputError(
      "mask",
      `attnMask has rank ${maskShape.length} but the scores ${ss} have rank ${scoresShape.length}` +
        ` (attnMask ${ms})`,
    );
  }
  const offset = scoresShape.length - maskShape.length;
  for (let i = 0; i < maskShape.length; i++) {
    const size = maskShape[i];
    const target = scoresShape[offset + i];
    if (size !== 1 && size !== target) {
      throw new AttentionInputError(
        "mask",
        `attnMask ${ms} does not broadcast to the scores ${ss}:` +
          ` mask dimension ${i} is ${size}, expected 1 or ${target}`,
      );
    }
  }
}

/** The default 1/sqrt(E) keeps the scores' spread near 1 whatever E is (see attention.ts). */
export function resolveScale(scale: number | null | undefined, features: number): number {
  return scale ?? 1.0 / Math.sqrt(features);
}

/** Every input of a fast port, checked in the readable port's order and in the form its kernels
 * read: flat row-major tensors, the mask as a KernelMask (read in place through strides), the
 * scale resolved. `Data` is Float64Array for the nested entry, either float type for the flat one. */
export interface CheckedInputs<Data extends Float64Array | Float32Array = Float64Array> {
  readonly query: Data; // [B..., Hq, Lq, E]
  readonly key: Data; // [B..., Hkv, Lk, E]
  readonly value: Data; // [B..., Hkv, Lk, Ev]
  readonly mask: KernelMask | null; // broadcasts to [B..., Hq, Lq, Lk]
  readonly shapes: AttentionShapes;
  readonly isCausal: boolean;
  readonly scale: number;
  readonly softcap: number;
  readonly memoryLimit: number; // bytes; each port says what it needs against it
}

/** The options argument read with its defaults and checked: the scalar options are checked before
 * any tensor is touched. That the argument is an object (or left out) is TypeScript's own check,
 * as Python has keyword arguments instead. */
export function readOptions<Mask>(
  options: unknown,
): Required<Omit<AttentionOptions, "attnMask">> & { readonly attnMask: Mask | null } {
  if (options !== undefined && (typeof options !== "object" || options === null || Array.isArray(options))) {
    throw new AttentionInputError("value", `options must be an object, got ${describeValue(options)}`);
  }
  const given = (options ?? {}) as AttentionOptions & { readonly attnMask?: Mask | null };
  const { attnMask = null, isCausal = false, scale = null, enableGqa = false, softcap = 0 } = given;
  const { memoryLimit = DEFAULT_MEMORY_LIMIT } = given;
  checkOptions(isCausal, scale, enableGqa, softcap, memoryLimit);
  return { attnMask, isCausal, scale, enableGqa, softcap, memoryLimit };
}

/** Both entries' checks, in the order of the readable port's attentionSteps (attention.ts). */
function checkEntry<Data extends Float64Array | Float32Array, Mask>(
  query: unknown,
  key: unknown,
  value: unknown,
  options: unknown,
  readTensor: (name: string, tensor: unknown) => { readonly shape: readonly number[]; readonly data: Data },
  readMask: (mask: Mask) => KernelMask,
): CheckedInputs<Data> {
  const { attnMask, isCausal, scale, enableGqa, softcap, memoryLimit } = readOptions<Mask>(options);
  const q = readTensor("query", query); // [B..., Hq, Lq, E]
  const k = readTensor("key", key); // [B..., Hkv, Lk, E]
  const v = readTensor("value", value); // [B..., Hkv, Lk, Ev]
  const mask = attnMask === null ? null : readMask(attnMask); // broadcasts to the scores
  const shapes = checkShapes(q.shape, k.shape, v.shape, mask === null ? null : mask.shape, enableGqa);
  return {
    query: q.data,
    key: k.data,
    value: v.data,
    mask,
    shapes,
    isCausal,
    softcap,
    scale: resolveScale(scale, shapes.features),
    memoryLimit,
  };
}

/** The nested (or shaped) entry's inputs, checked: toArray, toMaskArray, then the shapes. */
export function checkInputs(
  query: unknown,
  key: unknown,
  value: unknown,
  options: unknown,
  allocate: Allocate = newArray,
): CheckedInputs {
  const readTensor = (name: string, tensor: unknown) => toArray(name, tensor, allocate);
  return checkEntry(query, key, value, options, readTensor, (attnMask: MaskInput): KernelMask => {
    const mask = toMaskArray(attnMask);
    return mask.dtype === "bool"
      ? { shape: mask.shape, bool: Uint8Array.from(mask.data, Number), float: null } // 1 = may attend
      : { shape: mask.shape, bool: null, float: mask.data };
  });
}

/** The flat entry's inputs, checked in place: nothing is copied, the tensors keep their float type. */
export function checkFlatInputs(
  query: unknown,
  key: unknown,
  value: unknown,
  options: unknown,
): CheckedInputs<Float64Array | Float32Array> {
  return checkEntry(query, key, value, options, checkFlatTensor, checkFlatMask);
}
