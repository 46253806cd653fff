/**
 * Input checking for the TypeScript ports: one error type, one order of checks, one wording.
 *
 * The line-for-line twin of python/attention_port/inputs.py, so that a bad input raises the same
 * `kind` with the same message in every language. The invalid-input fixtures hold the expected
 * kind and message; both test suites check them.
 *
 * Checks run in this order, and the first failure is thrown:
 *   1. options: each scalar option of the core as contract/options.json declares it, in its
 *      order of checks (generated/options.ts)                          kind: value
 *   2. query, key, value: each a rectangular array of numbers, copied once: its shape from the first
 *      elements (at most 64 dimensions), the memory its float64 copy needs (within memoryLimit,
 *      decided from the lengths alone), then every element             kinds: rank, size, ragged, type
 *   3. attnMask, if given: a rectangular array of booleans or numbers, read the same way
 *                                                                   kinds: rank, size, ragged, type
 *   4. shapes: ranks, batch dims, heads, feature sizes, key/value length  kinds: rank, shape, heads
 *   5. attnMask shape: broadcasts to the scores [..., Hq, Lq, Lk]        kind: mask
 *   6. the options the shapes size: sinkLogits [Hq], kvSeqlen and a per-batch queryOffset [B...]
 *      (or one integer), kvSeqlen's integers at most Lk                 kinds: shape, value
 *   7. size: the memory the computation needs, within memoryLimit        kind: size
 *
 * A few inputs exist in one language only and are checked where they arise: the options object
 * itself here (`null` is not one); Python numbers too large for a float64, numpy object arrays
 * and torch tensors there.
 *
 * These checks catch a caller's mistakes, not attacks (docs/design.md, "Whom the checks serve"):
 * a tensor is copied into plain values at the entry, and a Proxy, a getter or a changed prototype
 * of the caller's own is the caller's business.
 *
 * Messages name the argument with its TypeScript spelling (`attnMask`, `enableGqa`, `isCausal`);
 * the Python ports use the same words with their own spelling (`attn_mask`, `enable_gqa`).
 *
 * A tensor comes in one of two forms: nested arrays (`number[][]`, `number[][][][]`, any rank),
 * or a shaped flat tensor `{ shape, data }` in row-major order. The second form exists because
 * nested arrays cannot say the shape of an empty tensor: `[]` could be [0, 4] or [0, 7].
 */

import { CORE_CHECKS, CORE_DEFAULTS, type CoreOptions, type OptionCheck } from "./generated/options.ts";
import { type KeyRange, keyRange } from "./key-range.ts";

// Every `kind` an AttentionInputError can carry, shared with the Python ports.
export const ERROR_KINDS = ["ragged", "type", "rank", "shape", "heads", "mask", "value", "size"] as const;
export type ErrorKind = (typeof ERROR_KINDS)[number];

// The most memory, in bytes, a port may need for one call before it refuses the input (kind
// "size") instead of allocating it; a caller raises it with `memoryLimit`. 2 GiB: the readable
// port holds three float64 tensors of the scores' shape, so about 9,400 x 9,400 scores per call.
export const DEFAULT_MEMORY_LIMIT: number = CORE_DEFAULTS.memoryLimit;

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

/** The options of scaledDotProductAttention and attentionSteps, declared in contract/options.json
 * (generated/options.ts holds each one's doc). */
export interface AttentionOptions extends CoreOptions<MaskInput> {}

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
export interface FlatAttentionOptions extends CoreOptions<FlatMask> {}

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
    // A class instance by its class's name (a Map, a Float64Array); a plain object is an object.
    const named = Object.getPrototypeOf(x) === Object.prototype ? "" : x.constructor?.name;
    return typeof named === "string" && named !== "" ? `a ${named}` : "an object";
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

// The most dimensions a tensor may have: numpy's limit, kept in both languages so that a deeper
// input is refused in the same words everywhere (and a cycle, a = [a], is refused, not walked).
export const MAX_RANK = 64;

function tooManyDimensions(what: string): AttentionInputError {
  return new AttentionInputError("rank", `${what}; at most ${MAX_RANK} dimensions are supported`);
}

/** The shape nested arrays give by their first element at each depth, at most MAX_RANK deep. */
function firstShape(name: string, data: unknown): number[] {
  const shape: number[] = [];
  for (let node = data; isArray(node); node = node[0]) {
    if (shape.length === MAX_RANK) {
      throw tooManyDimensions(`${name} is nested more than ${MAX_RANK} arrays deep`);
    }
    shape.push(node.length);
    if (node.length === 0) {
      break;
    }
  }
  return shape;
}

/** Every array has the length `shape` says at its depth, checked before its elements are read: a
 * ragged array throws kind "ragged" naming the first element (depth first) that disagrees. */
function checkRectangular(name: string, data: unknown, shape: readonly number[]): void {
  const ragged = (where: string, problem: string) =>
    new AttentionInputError(
      "ragged",
      `${name} is ragged: ${where} ${problem} (shape from the first elements: ${formatShape(shape)})`,
    );
  const walk = (node: unknown, depth: number, where: string): void => {
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
  };
  walk(data, 0, name);
}

/** Shape of nested arrays, read from the first element at each depth, then checked everywhere. */
export function inferShape(name: string, data: unknown): number[] {
  const shape = firstShape(name, data);
  checkRectangular(name, data, shape);
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

/** A nested or shaped tensor's values are copied into a float64 array of its shape: refused
 * (kind "size") when that copy would need more than memoryLimit, decided from the lengths alone,
 * before any value is read or anything allocated. A sparse array (`r = []; r.length = 2 ** 31`)
 * claims a length it holds no values for. */
function checkReadSize(name: string, shape: readonly number[], memoryLimit: number): void {
  const needed = 8 * product(shape);
  if (needed > memoryLimit) {
    throw new AttentionInputError(
      "size",
      `${name} of shape ${formatShape(shape)} needs ${String(needed)} bytes as float64, more than` +
        ` memoryLimit = ${String(memoryLimit)}; pass a larger memoryLimit to read it`,
    );
  }
}

/** The first leaf a read refused, for the caller's message (null: every leaf was accepted). */
type Refused = { readonly flat: number; readonly leaf: unknown } | null;

/** The leaves of rectangular nested arrays (or of a shaped tensor's flat data) copied into `out`
 * in row-major order, with the first leaf `accept` refuses. */
function copyLeaves<T>(
  data: unknown,
  depth: number,
  out: { [index: number]: T },
  accept: (leaf: unknown) => leaf is T,
): Refused {
  if (depth === 0) {
    return copyLeaves([data], 1, out, accept); // a scalar (rank 0): one leaf
  }
  let refused: Refused = null;
  let flat = 0;
  const walk = (node: unknown, depth: number): void => {
    const array = node as readonly unknown[];
    for (let i = 0; i < array.length; i++) {
      if (depth > 1) {
        walk(array[i], depth - 1);
        continue;
      }
      const leaf = array[i]; // one innermost row, leaf by leaf
      if (accept(leaf)) {
        out[flat] = leaf;
      } else {
        refused ??= { flat, leaf };
      }
      flat++;
    }
  };
  walk(data, depth);
  return refused;
}

const TYPED_ARRAYS = { Float64Array, Float32Array, Uint8Array } as const;
type TypedName = keyof typeof TYPED_ARRAYS;

/** `data` if it is a typed array of one of `names`, else null. */
function typedArray<N extends TypedName>(
  data: unknown,
  names: readonly N[],
): InstanceType<(typeof TYPED_ARRAYS)[N]> | null {
  const found = names.find((name) => data instanceof TYPED_ARRAYS[name]);
  return found === undefined ? null : (data as InstanceType<(typeof TYPED_ARRAYS)[N]>);
}

/** The shaped form `{ shape, data }`: its shape an array of non-negative integers (at most
 * MAX_RANK of them), its data as long as the shape needs (no Python twin: a numpy array's shape is
 * always sound). `expected` words what `data` must be, for the message. */
function readShaped(name: string, shape: unknown, data: unknown, expected: string): number[] {
  if (!isArray(shape)) {
    throw new AttentionInputError(
      "shape",
      `${name}.shape must be an array of non-negative integers, got ${describeValue(shape)}`,
    );
  }
  if (shape.length > MAX_RANK) {
    throw tooManyDimensions(`${name}.shape has ${shape.length} dimensions`);
  }
  const dims = Array.from(shape); // a hole reads as undefined, and is refused below
  if (!dims.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
    throw new AttentionInputError(
      "shape",
      `${name}.shape must be an array of non-negative integers, got [${dims.map(describeValue).join(", ")}]`,
    );
  }
  const length: unknown =
    typeof data === "object" && data !== null ? (data as ArrayLike<unknown>).length : null;
  if (typeof length !== "number") {
    throw new AttentionInputError("type", `${name}.data must be ${expected}, got ${describeValue(data)}`);
  }
  const size = product(dims as number[]);
  if (length !== size) {
    throw new AttentionInputError(
      "shape",
      `${name} has ${length} values but its shape ${formatShape(dims as number[])} needs ${size}`,
    );
  }
  return dims as number[];
}

/** Where toArray puts the numbers it copies: a new array unless the port keeps its own (simd.ts). */
export type Allocate = (name: string, length: number) => Float64Array;
const newArray: Allocate = (_name, length) => new Float64Array(length);

/** A tensor, nested or shaped: its shape, then the memory its copy needs, then its values copied
 * (`choose` picks, from the first leaf, which leaves are wanted and where they go). */
function readTensor<T>(
  name: string,
  data: unknown,
  expected: string,
  memoryLimit: number,
  choose: (first: unknown) => {
    accept: (leaf: unknown) => leaf is T;
    out: (length: number) => { [index: number]: T };
  },
): { shape: number[]; out: { [index: number]: T }; refused: Refused } {
  if (isShaped(data)) {
    const shape = readShaped(name, data.shape, data.data, expected);
    checkReadSize(name, shape, memoryLimit);
    const values = data.data as ArrayLike<unknown>;
    const { accept, out: allocate } = choose(values[0]);
    const out = allocate(values.length);
    const typed = typedArray(values, ["Float64Array", "Float32Array", "Uint8Array"]);
    if (typed !== null && out instanceof Float64Array) {
      out.set(typed); // a typed array holds only numbers
      return { shape, out, refused: null };
    }
    return { shape, out, refused: copyLeaves(values, 1, out, accept) };
  }
  const shape = firstShape(name, data);
  checkReadSize(name, shape, memoryLimit);
  checkRectangular(name, data, shape);
  let first = data;
  for (let d = 0; d < shape.length && shape[d] > 0; d++) {
    first = (first as readonly unknown[])[0];
  }
  const { accept, out: allocate } = choose(first);
  const out = allocate(product(shape));
  return { shape, out, refused: copyLeaves(data, shape.length, out, accept) };
}

/** query, key or value as a float64 array: nested arrays or a shaped flat tensor. */
export function toArray(
  name: string,
  data: unknown,
  memoryLimit: number = DEFAULT_MEMORY_LIMIT,
  allocate: Allocate = newArray,
): FloatArray {
  const { shape, out, refused } = readTensor(name, data, "an array of numbers", memoryLimit, () => ({
    accept: isNumber,
    out: (length) => allocate(name, length),
  }));
  if (refused !== null) {
    const where = name + path(indicesOf(refused.flat, shape));
    throw new AttentionInputError("type", `${where} is ${describeValue(refused.leaf)}, expected a number`);
  }
  return { shape, data: out as Float64Array };
}

/** attnMask as a bool array (true = may attend) or a float64 array (added to the scores). Every
 * leaf must be of the first leaf's kind. */
export function toMaskArray(data: unknown, memoryLimit: number = DEFAULT_MEMORY_LIMIT): MaskArray {
  const name = "attnMask";
  let bools = false;
  const read = readTensor<boolean | number>(
    name,
    data,
    "an array of booleans or numbers",
    memoryLimit,
    (first) => {
      bools = isBoolean(first);
      return bools
        ? { accept: isBoolean, out: (length) => new Array<boolean>(length) }
        : { accept: isNumber, out: (length) => new Float64Array(length) };
    },
  );
  const { shape, out, refused } = read;
  if (refused !== null) {
    const where = (flat: number) => name + path(indicesOf(flat, shape));
    const kind = isBoolean(refused.leaf) ? "a boolean" : isNumber(refused.leaf) ? "a number" : null;
    if (kind === null) {
      throw new AttentionInputError(
        "type",
        `${where(refused.flat)} is ${describeValue(refused.leaf)}, expected a boolean or a number`,
      );
    }
    throw new AttentionInputError(
      "type",
      `${name} mixes booleans and numbers: ${where(0)} is ${bools ? "a boolean" : "a number"}` +
        ` but ${where(refused.flat)} is ${kind}`,
    );
  }
  return bools
    ? { dtype: "bool", shape, data: out as boolean[] }
    : { dtype: "float64", shape, data: out as Float64Array };
}

/** query, key or value in flat form: a { shape, data } whose data is a Float64Array or a
 * Float32Array, with the shaped form's checks (readShaped). Nothing is copied. */
function checkFlatTensor(name: string, tensor: unknown): FlatTensor {
  if (!isShaped(tensor)) {
    throw new AttentionInputError(
      "type",
      `${name} must be a flat tensor { shape, data }, got ${describeValue(tensor)}`,
    );
  }
  const data = typedArray(tensor.data, ["Float64Array", "Float32Array"]);
  if (data === null) {
    throw new AttentionInputError(
      "type",
      `${name}.data must be a Float64Array or a Float32Array, got ${describeValue(tensor.data)}`,
    );
  }
  return { shape: readShaped(name, tensor.shape, data, "an array of numbers"), data };
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
  const { dtype, data } = mask as typeof mask & { readonly dtype: unknown };
  if (dtype !== "bool" && dtype !== "float") {
    throw new AttentionInputError(
      "type",
      `${name}.dtype must be "bool" or "float", got ${describeValue(dtype)}`,
    );
  }
  const expected = `${dtype === "bool" ? "a Uint8Array" : "a Float64Array or a Float32Array"} for dtype "${dtype}"`;
  const bool = dtype === "bool" ? typedArray(data, ["Uint8Array"]) : null;
  const float = dtype === "float" ? typedArray(data, ["Float64Array", "Float32Array"]) : null;
  const shape = readShaped(name, mask.shape, bool ?? float ?? data, expected);
  if (bool === null && float === null) {
    throw new AttentionInputError("type", `${name}.data must be ${expected}, got ${describeValue(data)}`);
  }
  return { shape, bool, float };
}

/** Whether `x` is a value of `option`: its type, then its range (contract/options.json). `type`:
 * the type of one of its numbers ("integer" for a side of a window or one of integers). */
function accepts(option: OptionCheck, x: unknown, type: string = option.type): boolean {
  if (option.nullable && x === null) {
    return true;
  }
  if (type === "boolean") {
    return isBoolean(x);
  }
  if (type === "object") {
    return typeof x === "object" && x !== null && !isArray(x);
  }
  if (!isNumber(x)) {
    return false;
  }
  return (
    (!(option.finite || type === "integer") || Number.isFinite(x)) &&
    (type !== "integer" || Number.isInteger(x)) &&
    (option.minimum === null || x >= option.minimum) &&
    (option.exclusiveMinimum === null || x > option.exclusiveMinimum) &&
    (option.maximum === null || x <= option.maximum)
  );
}

/** The core's scalar options, checked before any tensor is touched: each against its declaration
 * in contract/options.json, in the contract's order of checks, and the first failure is thrown. */
function checkOptions(given: Readonly<Record<string, unknown>>): void {
  for (const option of CORE_CHECKS) {
    checkOption(option, given[option.name]);
  }
}

/** The error `option` declares for the wrong value `x`: its kind, and its message with {name},
 * {value} (what `x` is, in words) and any other of its blanks (`words`) filled in. */
export function optionError(
  option: OptionCheck,
  x: unknown,
  words: Readonly<Record<string, string>> = {},
): AttentionInputError {
  return fillError({ kind: option.kind, message: option.message }, option.name, describeValue(x), words);
}

/** An AttentionInputError of `error`'s kind, its message's {name}, {value} and other blanks filled in. */
function fillError(
  error: { readonly kind: ErrorKind; readonly message: string },
  name: string,
  value: string,
  words: Readonly<Record<string, string>> = {},
): AttentionInputError {
  let message = error.message.replace("{name}", name).replace("{value}", value);
  for (const [blank, word] of Object.entries(words)) {
    message = message.replace(`{${blank}}`, word);
  }
  return new AttentionInputError(error.kind, message);
}

/** `x` as a value of `option` (contract/options.json), or the option's error. */
export function checkOption(option: OptionCheck, x: unknown): void {
  const several = SEVERAL[option.type];
  if (several !== undefined && !(option.nullable && x === null)) {
    several(option, x);
  } else if (!accepts(option, x)) {
    throw optionError(option, x);
  }
}

/** One number of an option of several: `x` of `type` in the option's range, or `error` naming it
 * (`name`: its path, window[0] or kvSeqlen[1][0]). */
function checkElement(
  option: OptionCheck,
  error: { readonly kind: ErrorKind; readonly message: string },
  name: string,
  x: unknown,
  type: "integer" | "number",
): void {
  if (!accepts(option, x, type) || x === null) {
    throw fillError(error, name, describeValue(x));
  }
}

/** An integer, or nested arrays of them (one per batch index; their shape is checked against
 * key's batch dims with the shapes): rectangular first, then each integer in the option's range. */
function checkIntegers(option: OptionCheck, x: unknown): void {
  const error = { kind: option.kind, message: option.message };
  if (!isArray(x)) {
    checkElement(option, error, option.name, x, "integer");
    return;
  }
  inferShape(option.name, x);
  const walk = (node: unknown, where: string): void => {
    if (isArray(node)) {
      node.forEach((child, i) => walk(child, `${where}[${i}]`));
    } else {
      checkElement(option, error, where, node, "integer");
    }
  };
  walk(x, option.name);
}

/** A pair [left, right], each side an integer in the option's range or null (unbounded). */
function checkWindow(option: OptionCheck, x: unknown): void {
  if (!(isArray(x) && x.length === 2)) {
    const what = isArray(x) ? `an array of length ${x.length}` : describeValue(x);
    throw fillError({ kind: option.kind, message: option.message }, option.name, what);
  }
  x.forEach((side, i) => {
    if (side !== null) {
      checkElement(option, option.element!, `${option.name}[${i}]`, side, "integer");
    }
  });
}

/** An array of numbers (NaN and the infinities among them; a Float64Array or Float32Array too); its
 * length is checked against the query's heads with the shapes. */
function checkNumbers(option: OptionCheck, x: unknown): void {
  if (!(isArray(x) || x instanceof Float64Array || x instanceof Float32Array)) {
    throw optionError(option, x);
  }
  Array.from(x as ArrayLike<unknown>).forEach((v, i) =>
    checkElement(option, option.element!, `${option.name}[${i}]`, v, "number"),
  );
}

// The options of several numbers, by type: their checks name the number that is wrong.
const SEVERAL: Readonly<Record<string, (option: OptionCheck, x: unknown) => void>> = {
  integers: checkIntegers,
  window: checkWindow,
  numbers: checkNumbers,
};

/** The options whose shape the tensors decide, checked once their shapes are (readOptions has read
 * them): numbers one per query head [Hq], integers an integer or one per batch index [B...], and
 * an integer of kvSeqlen at most key's length Lk (a count of valid keys). */
export function checkOptionShapes(
  options: Readonly<Record<string, unknown>>,
  shapes: AttentionShapes,
  queryShape: readonly number[],
  keyShape: readonly number[],
): void {
  for (const option of CORE_CHECKS) {
    const x = options[option.name];
    if (option.shape === null || x === null || x === undefined) {
      continue;
    }
    const given = option.type === "numbers" ? [(x as ArrayLike<unknown>).length] : firstShape(option.name, x);
    const expected = option.type === "numbers" ? [shapes.queryHeads] : shapes.batch;
    const words = {
      shape: formatShape(given),
      batch: formatShape(shapes.batch),
      heads: String(shapes.queryHeads),
      query: formatShape(queryShape),
      key: formatShape(keyShape),
      length: String(shapes.keyLength),
    };
    if (given.length > 0 && formatShape(given) !== formatShape(expected)) {
      throw fillError(option.shape, option.name, "", words);
    }
    const integers = option.limit === null ? [] : leaves(x, given.length);
    integers.forEach((n, flat) => {
      if ((n as number) > shapes.keyLength) {
        const where = option.name + path(indicesOf(flat, given));
        throw fillError(option.limit!, where, String(n), words);
      }
    });
  }
}

// The largest queryOffset: JavaScript's largest exact integer (Number.MAX_SAFE_INTEGER), so that
// both languages accept the same offsets.
export const MAX_QUERY_OFFSET = CORE_CHECKS.find((option) => option.name === "queryOffset")!.maximum!;

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
export interface CheckedInputs<Data extends Float64Array | Float32Array = Float64Array>
  extends Omit<CheckedOptions, "attnMask" | "enableGqa" | "scale" | "sinkLogits"> {
  readonly query: Data; // [B..., Hq, Lq, E]
  readonly key: Data; // [B..., Hkv, Lk, E]
  readonly value: Data; // [B..., Hkv, Lk, Ev]
  readonly mask: KernelMask | null; // broadcasts to [B..., Hq, Lq, Lk]
  readonly shapes: AttentionShapes; // what enableGqa allowed is in the heads
  readonly scale: number; // resolved: 1/sqrt(E) where none was given
  readonly keys: KeyRange; // which keys each row sees (key-range.ts): what a kernel reads of the options below
  readonly sinkLogits: Float64Array | null; // [Hq]: head h's sink logit, or null for no sink
  // Every other option, checked: isCausal, softcap, queryOffset, window, sinkTokens, kvSeqlen (as
  // given: the key range is what a kernel reads of them), memoryLimit (bytes; each port says what
  // it needs against it).
}

/** Every option once read and checked: given, or its default. */
export type CheckedOptions<Mask = unknown> = Required<CoreOptions<Mask>>;

/** The options argument read with its defaults and checked: the scalar options are checked before
 * any tensor is touched. That the argument is an object (or left out) is TypeScript's own check,
 * as Python has keyword arguments instead. */
export function readOptions<Mask>(options: unknown): CheckedOptions<Mask> {
  if (options !== undefined && (typeof options !== "object" || options === null || Array.isArray(options))) {
    throw new AttentionInputError("value", `options must be an object, got ${describeValue(options)}`);
  }
  const given = (options ?? {}) as Readonly<Record<string, unknown>>;
  const read: Record<string, unknown> = {};
  for (const [name, fallback] of Object.entries(CORE_DEFAULTS)) {
    const value = given[name];
    read[name] = value === undefined ? fallback : value;
  }
  checkOptions(read);
  return read as unknown as CheckedOptions<Mask>;
}

/** The checked inputs as plain arguments again, for a port that hands its inputs on to another
 * (simd.ts's and webgpu.ts's attentionSteps take the other steps from attention.ts): the second
 * port reads the values the first checked, not the caller's objects a second time. */
export function plainArguments(problem: CheckedInputs<Float64Array | Float32Array>): {
  readonly query: ShapedTensor;
  readonly key: ShapedTensor;
  readonly value: ShapedTensor;
  readonly options: AttentionOptions;
} {
  const { batch, queryHeads, keyValueHeads, queryLength, keyLength, features, valueFeatures, hasHeads } =
    problem.shapes;
  const heads = (count: number) => (hasHeads ? [count] : []);
  const { query, key, value, mask } = problem;
  // Every option the problem holds, checked (the scale resolved), by the contract's names.
  const options = Object.fromEntries(
    Object.keys(CORE_DEFAULTS)
      .filter((name) => name in problem)
      .map((name) => [name, problem[name as keyof typeof problem]]),
  );
  return {
    query: { shape: [...batch, ...heads(queryHeads), queryLength, features], data: query },
    key: { shape: [...batch, ...heads(keyValueHeads), keyLength, features], data: key },
    value: { shape: [...batch, ...heads(keyValueHeads), keyLength, valueFeatures], data: value },
    options: {
      ...options,
      attnMask:
        mask === null
          ? null
          : mask.bool !== null
            ? { shape: mask.shape, data: Array.from(mask.bool, Boolean) } // nonzero = may attend
            : { shape: mask.shape, data: mask.float! },
      enableGqa: queryHeads !== keyValueHeads, // what the check allowed: equal heads need no GQA
    },
  };
}

/** Both entries' checks, in the order of the readable port's attentionSteps (attention.ts). */
function checkEntry<Data extends Float64Array | Float32Array, Mask>(
  query: unknown,
  key: unknown,
  value: unknown,
  options: unknown,
  readTensor: (
    name: string,
    tensor: unknown,
    memoryLimit: number,
  ) => { readonly shape: readonly number[]; readonly data: Data },
  readMask: (mask: Mask, memoryLimit: number) => KernelMask,
): CheckedInputs<Data> {
  const { attnMask, enableGqa, scale, sinkLogits, ...checked } = readOptions<Mask>(options);
  const { memoryLimit } = checked;
  const q = readTensor("query", query, memoryLimit); // [B..., Hq, Lq, E]
  const k = readTensor("key", key, memoryLimit); // [B..., Hkv, Lk, E]
  const v = readTensor("value", value, memoryLimit); // [B..., Hkv, Lk, Ev]
  const mask = attnMask === null ? null : readMask(attnMask, memoryLimit); // broadcasts to the scores
  const shapes = checkShapes(q.shape, k.shape, v.shape, mask === null ? null : mask.shape, enableGqa);
  checkOptionShapes({ ...checked, sinkLogits }, shapes, q.shape, k.shape);
  return {
    query: q.data,
    key: k.data,
    value: v.data,
    mask,
    shapes,
    ...checked, // isCausal, softcap, queryOffset, window, sinkTokens, kvSeqlen, memoryLimit, ...
    scale: resolveScale(scale, shapes.features),
    keys: keyRange(checked, shapes),
    sinkLogits: sinkLogits === null ? null : Float64Array.from(sinkLogits), // [Hq]
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
  const readTensor = (name: string, tensor: unknown, memoryLimit: number) =>
    toArray(name, tensor, memoryLimit, allocate);
  return checkEntry(
    query,
    key,
    value,
    options,
    readTensor,
    (attnMask: MaskInput, memoryLimit): KernelMask => {
      const mask = toMaskArray(attnMask, memoryLimit);
      return mask.dtype === "bool"
        ? { shape: mask.shape, bool: Uint8Array.from(mask.data, Number), float: null } // 1 = may attend
        : { shape: mask.shape, bool: null, float: mask.data };
    },
  );
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
