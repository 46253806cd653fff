/**
 * The WebAssembly SIMD port of scaled dot-product attention: flash.ts's algorithm, compiled.
 *
 *     output = softmax(query · keyᵀ · scale [+ mask]) · value
 *
 * Same contract, same public API and same errors as flash.ts and the readable port (attention.ts);
 * read those first. The arithmetic runs in a WebAssembly kernel written in AssemblyScript
 * (typescript/wasm/kernel.ts, built by scripts/setup); this file checks the inputs (inputs.ts),
 * lays them out in the kernel's memory, splits the work and reads the output back. It computes
 * the same online softmax (FlashAttention) as flash.ts, tile by tile, with no [Lq, Lk] buffer.
 * What differs from flash.ts, and why it is faster:
 *
 *  1. Lanes. 128-bit SIMD: one instruction does 4 float32 (f32x4) or 2 float64 (f64x2) operations.
 *     Float32Array inputs of the flat entry are computed in float32 (flash.ts widens them to
 *     doubles, since plain JavaScript computes in doubles anyway): twice the lanes, half the bytes.
 *  2. Layout. Once per call, each tile of 64 keys is transposed into its own small contiguous block
 *     of E x 64 numbers, so a vector load reads the same feature of 4 (or 2) consecutive keys and a
 *     score vector is 4 (or 2) keys of one query row; a block stays in cache while the 64 query rows
 *     of a work item read it. Within it, keys go by 8 (or 4), two vectors' worth, [64 / 8, E, 8]:
 *     the scores of those keys read one contiguous run. (A key matrix transposed whole, [E, Lk]
 *     with a stride of Lk, was measured slower: a large power-of-two stride makes the rows collide
 *     in the cache; transposing each tile again for every query block cost about 12% of a pass.)
 *  3. Register blocking, as flash.ts but in vectors: scores 4 query rows x 2 vectors of keys (8
 *     independent sums), weights · value 2 rows x 4 vectors of value features (8 sums kept in
 *     registers across the whole tile, so acc is loaded and stored once per tile, not per key).
 *  4. exp. exp(x) = exp2(x · log2 e): the logits are carried in log2 units (multiplied by
 *     scale · log2 e in one step), and exp2 is vectorised: x = k + f with k the nearest integer
 *     (found by adding and subtracting 1.5 · 2^23, or 2^52), 2^f by its Taylor polynomial
 *     (degree 7 for float32, 13 for float64), 2^k written straight into exponent bits: about 15
 *     (or 21) vector instructions per 4 (or 2) numbers where Math.exp is a call per number. Its
 *     error against Math.exp, measured over the whole range by the tests: relative error below
 *     2 u (1 + |x|) where the result is a normal number (u the dtype's unit roundoff; the u·|x|
 *     part is the rounding of x · log2 e, which the tolerance rule's (1 + S_i) factor already
 *     allows for), and below 2^-1000 (float64) or 2^-120 (float32) in absolute terms where it is
 *     subnormal. exp(-Infinity) is exactly 0, NaN stays NaN, and underflow rounds to 0 where
 *     Math.exp's does. The softmax only calls it with x <= 0 (a logit minus the running max), so
 *     that is the range it covers. Two details were each worth more than 10%: its constants are
 *     splat loads from a table (an inline vector constant is rebuilt at every use in V8's code),
 *     and clamps and maxima use pmax, one instruction, instead of wasm's NaN-propagating max
 *     (several): a NaN logit still makes its row NaN, through its own exp.
 *  5. Fused multiply-add. With relaxed SIMD (Node 22 and later) a multiply-add is one fused
 *     instruction where the CPU has one (one rounding instead of two, and half the instructions in
 *     the inner loops). Where relaxed SIMD does not validate (WebAssembly.validate on the build
 *     says so), a second build of the same source multiplies and adds separately; both builds
 *     pass the same tests. `kernelBuild()` says which one runs.
 *  6. Threads. `workers: N` splits the work items, (batch, head, block of 64 query rows), between
 *     the calling thread and N - 1 workers over one shared WebAssembly memory (see
 *     simd-worker.ts), one chunk of query rows at a time: worker_threads in Node, Web Workers in a
 *     cross-origin-isolated page (elsewhere a browser cannot share the memory: one thread). Every
 *     item is computed by the same code on the same data whichever thread takes it, so the output
 *     is bit for bit the same for every N.
 *  7. The same tile skipping (each row's keys from key-range.ts, passed to the kernel per slice:
 *     its sinks, then its band, each walked from its own first key; a windowed prefill costs
 *     O(Lq x window), a windowed decode step O(window)), sink logits (the online softmax starts
 *     at the head's), mask strides (a broadcast mask is never expanded) and grouped-query indexing
 *     as flash.ts, done in the kernel.
 *  8. Row independence: the order of each row's arithmetic depends only on the keys it sees and
 *     their order, not on which other rows share its call, its chunk or its block, nor on where
 *     the keys sit (each row reads its own tiles of 64 keys, from its band's first key, out of the
 *     scores of the block's key tiles; kernel.ts's runItem says how). So a causal pass and the
 *     same rows computed a few at a time, with queryOffset at their first row's position (a
 *     prefill, then decode steps), give the same bits, windowed or not, and so does a row against
 *     only the keys it sees.
 *  9. A cache resident in the kernel's memory, for decoding (SimdKeyValueCache). A decode step
 *     handed to the flat entry brings the whole key/value cache into the kernel's memory at every
 *     call: copied, its keys transposed into tiles and their largest |k| found, before the one pass
 *     of arithmetic over it, so most of the step is moving the cache (at 4,096 keys, measured:
 *     two to four times as long as the kernel's pass). createSimdKeyValueCache keeps the cache
 *     there from step to step in the kernel's layout, written once per token as it is appended,
 *     with what the bound and the skipped keys' NaN rule need kept as it grows; `attend` runs the same
 *     kernel on it and gives the flat entry's answer on every key so far, bit for bit.
 *
 * Numerics: float64 inputs are computed in float64 and float32 in float32, each within the
 * tolerance rule's budget for its dtype (verify runs both as their own ports). The special values
 * are the readable port's: a NaN logit makes its row NaN; NaN or an infinity in value reaches every
 * row that is not fully masked (0 · NaN is NaN, even for a key the row cannot see: the kernel
 * makes such a row NaN and it is computed again plainly); a fully-masked row, and Lk = 0, give
 * exactly +0.0. Two cases take a plain float64 path in this file instead of the
 * kernel (computeRowsPlainly, the readable port's order): a whole call whose logits or sink logits
 * could reach a quarter of the dtype's largest number, or whose query, key or sink logits hold NaN
 * or +Infinity, since the
 * log2 units of item 4 would overflow there (kernelCanCarry decides, in O((Lq + Lk) · E)); and, after
 * the kernel, any row whose output is not finite, since the unnormalised sum of weights times value
 * can overflow where the exact output is an ordinary number (as flash.ts recomputes such rows).
 *
 * `attentionSteps` returns every step, as flash.ts does; but here only `output` comes from the
 * kernel. The diagnostic steps (scores, logits, weights [B..., Hq, Lq, Lk]) are the readable
 * port's (attention.ts computes them), because the kernel never holds them in natural units (it
 * keeps log2-unit logits, one tile at a time). So `verify` takes only the output from this port
 * (cli.ts) and names no first diverging step for it.
 *
 * Memory: the kernel's memory holds a copy of value, the key's transposed tiles and the mask as
 * given (not broadcast), each read by every query block; the query goes in and the output comes out
 * by chunks of at most 256 KiB (a job is one chunk of query rows of every slice), and the key is
 * transposed a chunk at a time, so none of those three is ever whole there. Plus O(64 x 192 +
 * 64 x Ev) scratch per thread: linear in the inputs, and about the size of key and value beside the
 * caller's own inputs and output. A WebAssembly memory only grows, so after a large call the
 * process keeps that much reserved; so does the nested entry's float64 copy of its inputs and
 * output, kept from call to call (`kept`). A resident cache has a memory of its own, holding its
 * keys and values once (in tiles of 64 keys, each with those keys' values: it grows at its end,
 * its memory by doubling) and a call's query, output and scratch after them; with `workers: N` it
 * starts N - 1 worker threads of its own (its `close` ends them).
 *
 * What it needs from the engine: WebAssembly with 128-bit SIMD and threads (a shared memory);
 * relaxed SIMD is optional (item 5). Where they are missing, a call throws one line that says so
 * (ENGINE_NEEDS); flash.ts needs none of them.
 *
 * Loading. This module imports no node: module, so a bundler takes it into a page as it is; the
 * kernel's .wasm builds are found from import.meta.url, as bundlers expect, by `await initSimd()`
 * (or given to it as a URL or bytes) before the first call. In Node, package.json's "node"
 * condition gives simd-node.ts instead, which reads the builds from disk when first needed (no
 * initSimd call) and starts worker_threads: SimdHost is what differs between the two.
 *
 * Dimension letters as in flash.ts: B... batch dims, Hq/Hkv heads, Lq/Lk lengths, E/Ev features.
 */

import { foldDecodeHeads, type Slice, slices } from "./batching.ts";
import { entriesOf, readableSteps } from "./entries.ts";
import {
  type Allocate,
  AttentionInputError,
  type AttentionOptions,
  type AttentionShapes,
  type AttentionSteps,
  type CheckedInputs,
  checkFlatInputs,
  checkInputs,
  describeValue,
  type FlatAttentionOptions,
  type FlatTensor,
  formatShape,
  product,
  type TensorInput,
} from "./inputs.ts";
import { type RowKeys, seesEveryKey, seesKey, sliceKeys } from "./key-range.ts";
import {
  CONTROL,
  CONTROL_BYTES,
  claimItems,
  type ItemRunner,
  type SimdThread,
  type WorkerStart,
} from "./simd-worker.ts";

export * from "./port-exports.ts";

/** The SIMD port's own option: how many threads share the work (1, the default, is this thread
 * alone; N uses this thread and N - 1 workers, where the engine can share the memory with them).
 * The output does not depend on it. */
export interface SimdOptions {
  readonly workers?: number;
}
export type SimdAttentionOptions = AttentionOptions & SimdOptions;
export type SimdFlatAttentionOptions = FlatAttentionOptions & SimdOptions;

// ---- Public entry points: entries.ts's three, over this kernel. ----

const entries = entriesOf({
  attend: kernelOutput,
  attentionSteps: kernelSteps,
  attendFlat: kernelFlatOutput,
});

/** softmax(query · keyᵀ · scale [+ mask]) · value in float64 (nested arrays or shaped tensors in,
 * nested arrays out), computed by the WebAssembly kernel. */
export const scaledDotProductAttention = entries.scaledDotProductAttention;

/** Every step, as attention.ts returns them. The output is the kernel's; scores, logits and
 * weights [B..., Hq, Lq, Lk] are the readable port's (see the header). */
export const attentionSteps = entries.attentionSteps;

/** The fast path on flat row-major typed arrays with explicit shapes. Computes in float32 when
 * query.data is a Float32Array (key, value and a float mask are rounded to float32 on the way in),
 * else in float64; the output has query.data's type. */
export const scaledDotProductAttentionFlat = entries.scaledDotProductAttentionFlat;

/** scaledDotProductAttention's work: the output, flat. */
function kernelOutput(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: SimdAttentionOptions = {},
): FlatTensor {
  const problem = checkedProblem(query, key, value, options, kept);
  checkOutputSize(problem.shapes, 8, problem.memoryLimit);
  const output = attend(problem, kept("output", product(problem.shapes.outputShape)));
  return { shape: problem.shapes.outputShape, data: output }; // [B..., Hq, Lq, Ev]
}

/** attentionSteps's work. */
function kernelSteps(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: SimdAttentionOptions = {},
): AttentionSteps {
  const problem = checkedProblem(query, key, value, options);
  return readableSteps(problem, () => attend(problem));
}

/** scaledDotProductAttentionFlat's work. */
function kernelFlatOutput(
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options: SimdFlatAttentionOptions = {},
): FlatTensor {
  const checked = checkFlatInputs(query, key, value, options);
  const workers = checkWorkers(options.workers);
  const float32 = checked.query instanceof Float32Array;
  checkOutputSize(checked.shapes, float32 ? 4 : 8, checked.memoryLimit);
  const data = attend({ ...checked, float32, workers });
  return { shape: checked.shapes.outputShape, data };
}

/** The kernel's work split: query rows per work item, keys per tile, and the most bytes of query,
 * output or key rows that one chunk holds in the kernel's memory (tests aim at their edges). */
export function kernelBlocks(): { queryBlock: number; keyTile: number; chunkBytes: number } {
  const { exports } = loadKernel(kernelBuild());
  return { queryBlock: exports.queryBlock(), keyTile: exports.keyTile(), chunkBytes: CHUNK_BYTES };
}

/** How many key tiles (a block of query rows against a tile of keys) the kernel scored on this
 * thread since the last `reset`: the work its tile skipping left (the tiles it skipped are not
 * among them; workers count their own). For the tests. */
export function kernelScoredTiles(reset = false): number {
  const { exports } = loadKernel(kernelBuild());
  const count = exports.scoredKeyTiles();
  if (reset) {
    exports.resetScoredKeyTiles();
  }
  return count;
}

/** The kernel's two builds: "relaxed" (fused multiply-add; relaxed SIMD) and "baseline". */
export type BuildName = "relaxed" | "baseline";

/** Which build of the kernel runs: "relaxed" (fused multiply-add) or "baseline". */
export function kernelBuild(): BuildName {
  const forced = selectedBuild ?? host.environmentBuild() ?? "auto";
  if (forced !== "auto") {
    return forced;
  }
  if (validatedBuild === null) {
    validatedBuild = engineValidates("relaxed") ? "relaxed" : "baseline";
  }
  return validatedBuild;
}

/** Run a build other than the one WebAssembly.validate picked ("auto" goes back to that choice):
 * for the tests, which check both builds, and for comparing them. */
export function selectKernelBuild(build: BuildName | "auto"): void {
  selectedBuild = build;
}

/** Where a build of the kernel comes from: an address to fetch (a URL, or a string resolved
 * against the page), a fetch Response, or the .wasm file's bytes. */
export type KernelSource = URL | string | Response | ArrayBuffer | ArrayBufferView<ArrayBuffer>;

/** Loads the kernel, for engines that cannot read it from disk when first needed (a browser; Node
 * needs no call, and takes one). With no source, the builds beside this module
 * (wasm/build/kernel.relaxed.wasm and kernel.wasm, found from import.meta.url the way bundlers
 * expect, so Vite or esbuild emit them with the page): relaxed where the engine validates it, else
 * baseline. A lone source is kernel.wasm, the baseline build; `{ relaxed, baseline }` gives either
 * or both. `workers` starts that many threads besides this one (`workers: N` calls then share their
 * work at once): in a browser, only where the page is cross-origin isolated (SharedArrayBuffer is
 * there), else the calls run on one thread. Resolves with the build that runs. */
export async function initSimd(
  source?: KernelSource | { readonly relaxed?: KernelSource; readonly baseline?: KernelSource },
  options: SimdOptions = {},
): Promise<BuildName> {
  const workers = checkWorkers(options.workers);
  // With no source, a host that reads the builds itself (Node's, from disk) needs nothing fetched.
  if (source !== undefined || host.readBuild("baseline") === null) {
    await fetchBuilds(
      source === undefined
        ? {
            relaxed: new URL("../wasm/build/kernel.relaxed.wasm", import.meta.url),
            baseline: new URL("../wasm/build/kernel.wasm", import.meta.url),
          }
        : isKernelSource(source)
          ? { baseline: source }
          : source,
    );
  }
  const kernel = loadKernel(kernelBuild());
  await startWorkers(kernel, workers - 1);
  return kernelBuild();
}

/** initSimd's sources read: relaxed where given and the engine validates it, else baseline. */
async function fetchBuilds(given: Partial<Record<BuildName, KernelSource>>): Promise<void> {
  if (given.relaxed === undefined && given.baseline === undefined) {
    throw new TypeError("initSimd needs a kernel source: a URL, a Response, bytes, or { relaxed, baseline }");
  }
  for (const build of ["relaxed", "baseline"] as const) {
    const from = given[build];
    if (from === undefined) {
      continue;
    }
    const bytes = loadedBytes.get(build) ?? (await kernelBytes(from));
    if (build === "relaxed" && given.baseline !== undefined && !validates(bytes)) {
      continue; // this engine lacks relaxed SIMD: the baseline runs
    }
    loadedBytes.set(build, bytes);
    validatedBuild = build;
    return;
  }
}

function isKernelSource(source: unknown): source is KernelSource {
  return (
    typeof source === "string" ||
    source instanceof URL ||
    source instanceof ArrayBuffer ||
    ArrayBuffer.isView(source) ||
    (typeof Response !== "undefined" && source instanceof Response)
  );
}

async function kernelBytes(source: KernelSource): Promise<Uint8Array<ArrayBuffer>> {
  if (source instanceof ArrayBuffer) {
    return new Uint8Array(source);
  }
  if (ArrayBuffer.isView(source)) {
    return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
  }
  const response = source instanceof Response ? source : await fetch(source);
  if (!response.ok) {
    throw new Error(
      `the SIMD kernel could not be fetched from ${response.url || String(source)}: HTTP ${String(response.status)}`,
    );
  }
  return new Uint8Array(await response.arrayBuffer());
}

/** exp(x) for each x, as the kernel computes it (exp2 of x · log2 e, with the polynomial above),
 * in float32 for a Float32Array, else float64. For the tests of the approximation. */
export function kernelExp(x: Float32Array | Float64Array): Float32Array | Float64Array {
  const kernel = loadKernel(kernelBuild());
  const float32 = x instanceof Float32Array;
  const padded = Math.ceil(x.length / 2) * 2 * 2; // whole vectors of either width
  const at = reserve(kernel, [padded * x.BYTES_PER_ELEMENT])[0];
  const view = floats(float32, kernel.memory.buffer as unknown as SharedArrayBuffer, at, padded);
  view.fill(0);
  view.set(x);
  (float32 ? kernel.exports.expF32 : kernel.exports.expF64)(at, padded);
  return view.slice(0, x.length);
}

// ---- A key/value cache resident in the kernel's memory, for decoding. ----

/** The numbers a resident cache holds, and computes in. */
export type SimdCacheDtype = "float32" | "float64";

/** A cache of keys [B..., Hkv, E] and values [B..., Hkv, Ev], `dtype` numbers, kept in a kernel
 * memory of its own from call to call (see SimdKeyValueCache). */
export function createSimdKeyValueCache(
  shape: readonly number[],
  valueFeatures: number,
  dtype: SimdCacheDtype = "float32",
): SimdKeyValueCache {
  return new SimdKeyValueCache(shape, valueFeatures, dtype);
}

/**
 * A decode step's keys and values, resident in the kernel's memory in the kernel's layout.
 *
 * Generating text attends one new token at a time against every earlier key and value. Handed to
 * scaledDotProductAttentionFlat, that whole cache is copied into the kernel's memory and its keys
 * transposed into tiles at every call, before the pass the arithmetic needs (the header's item
 * 9). This object keeps the cache there instead:
 * `append` writes a step's new keys and values once, into key tiles already transposed, keeping
 * the largest |k| (per tile, so that `truncate` stays cheap) and, per value column, the last row
 * holding NaN or ±Infinity; `attend` then runs the kernel on what is already in place.
 *
 * Its answers are attentionSimd's bit for bit: `attend(query, options)` equals
 * scaledDotProductAttentionFlat(query, keys, values, options) where keys and values are
 * everything appended so far ([B..., Hkv, length, E] and [..., Ev]), in the cache's dtype, for
 * every option of that entry (isCausal, queryOffset, scale, softcap, enableGqa, attnMask over
 * [..., Lq, length], workers, memoryLimit), with the same errors.
 *
 * Memory: tile after tile of 64 keys, each holding those keys (transposed) and their values for
 * every (batch, kv head) slice, so the cache grows at its end and nothing already there moves; the
 * memory grows by doubling. Each cache has its own WebAssembly memory and, with `workers: N`, its
 * own N - 1 worker threads (`close` ends them).
 */
export class SimdKeyValueCache {
  /** The numbers it holds and computes in; the query of `attend` must be of this type. */
  readonly dtype: SimdCacheDtype;
  readonly #heads: readonly number[]; // [B..., Hkv]
  readonly #features: number; // E
  readonly #valueFeatures: number; // Ev
  readonly #slices: number; // product of [B..., Hkv]
  readonly #kernel: Kernel;
  readonly #bytes: number; // per number
  readonly #keyTile: number; // keys per tile
  readonly #tileBytes: number; // one tile: keys [slices, keyTile / 2L, E, 2L] (#keyAt), values [slices, keyTile, Ev]
  readonly #lastNonFinite: number; // i32 [slices, Ev]: the last key row whose value is NaN or ±inf
  readonly #tilesAt: number; // tile 0
  #tiles = 0; // tiles in place (the capacity is tiles · keyTile keys)
  #length = 0; // keys appended
  #tileMax: number[] = []; // the largest |k| of each tile in use (NaN if one is)

  constructor(shape: readonly number[], valueFeatures: number, dtype: SimdCacheDtype = "float32") {
    if (!Array.isArray(shape) || shape.length < 1 || !shape.every((n) => Number.isSafeInteger(n) && n >= 1)) {
      throw new AttentionInputError(
        "shape",
        `a cache's shape must be [B..., Hkv, E], positive integers, got ${describeValue(shape)}`,
      );
    }
    if (!(Number.isSafeInteger(valueFeatures) && valueFeatures >= 0)) {
      throw new AttentionInputError(
        "shape",
        `a cache's valueFeatures must be an integer >= 0, got ${describeValue(valueFeatures)}`,
      );
    }
    if (dtype !== "float32" && dtype !== "float64") {
      throw new AttentionInputError(
        "value",
        `a cache's dtype must be "float32" or "float64", got ${describeValue(dtype)}`,
      );
    }
    this.dtype = dtype;
    this.#heads = shape.slice(0, -1);
    this.#features = shape.at(-1)!;
    this.#valueFeatures = valueFeatures;
    this.#slices = product(this.#heads);
    this.#kernel = newKernel(kernelBuild());
    this.#bytes = dtype === "float32" ? 4 : 8;
    this.#keyTile = this.#kernel.exports.keyTile();
    const [E, Ev, slices] = [this.#features, valueFeatures, this.#slices];
    this.#tileBytes = align(slices * (E + Ev) * this.#keyTile * this.#bytes);
    this.#lastNonFinite = this.#kernel.start;
    this.#tilesAt = align(this.#lastNonFinite + slices * Ev * 4 + 64);
    this.#grow(this.#tilesAt);
    new Int32Array(this.#kernel.memory.buffer, this.#lastNonFinite, slices * Ev).fill(-1);
  }

  /** Keys appended so far. */
  get length(): number {
    return this.#length;
  }

  /** The shape of every key appended so far, [B..., Hkv, length, E]. */
  get keyShape(): number[] {
    return [...this.#heads, this.#length, this.#features];
  }

  /** The shape of every value appended so far, [B..., Hkv, length, Ev]. */
  get valueShape(): number[] {
    return [...this.#heads, this.#length, this.#valueFeatures];
  }

  /** Appends a step's keys [B..., Hkv, L, E] and values [B..., Hkv, L, Ev] (Float32Array or
   * Float64Array data, rounded to the cache's dtype), after every key so far. */
  append(key: FlatTensor, value: FlatTensor): void {
    const L = this.#checkRows("key", key, this.#features);
    const Lv = this.#checkRows("value", value, this.#valueFeatures);
    if (L !== Lv) {
      throw new AttentionInputError(
        "shape",
        `value has length ${String(Lv)} but key has ${String(L)} (key ${formatShape(key.shape)},` +
          ` value ${formatShape(value.shape)})`,
      );
    }
    const [E, Ev, slices, bytes, BC] = [
      this.#features,
      this.#valueFeatures,
      this.#slices,
      this.#bytes,
      this.#keyTile,
    ];
    const start = this.#length;
    const tiles = Math.ceil((start + L) / BC);
    const stageAt = this.#tilesAt + Math.max(tiles, this.#tiles) * this.#tileBytes + 64;
    this.#grow(align(stageAt + BC * E * bytes + 64));
    const buffer = this.#kernel.memory.buffer as unknown as SharedArrayBuffer;
    for (let t = this.#tiles; t < tiles; t++) {
      new Uint8Array(buffer, this.#tilesAt + t * this.#tileBytes, this.#tileBytes).fill(0); // keys past the end are 0
    }
    this.#tiles = Math.max(this.#tiles, tiles);
    const float32 = this.dtype === "float32";
    const transpose = float32 ? this.#kernel.exports.transposeKeyF32 : this.#kernel.exports.transposeKeyF64;
    const stage = floats(float32, buffer, stageAt, BC * E);
    // Key rows go in a tile's share at a time, so that each tile's largest |k| is its own.
    for (let j0 = 0; j0 < L; ) {
      const p = start + j0;
      const rows = Math.min(L - j0, BC - (p % BC)); // up to the end of position p's tile
      const tile = Math.floor(p / BC);
      let max = p % BC === 0 ? 0 : this.#tileMax[tile];
      for (let s = 0; s < slices; s++) {
        stage.set(key.data.subarray((s * L + j0) * E, (s * L + j0 + rows) * E)); // rounded to float32 if so
        const out = this.#tilesAt + s * E * BC * bytes; // slice s's tile 0
        max = Math.max(max, transpose(stageAt, rows, E, out, p, this.#tileBytes));
      }
      this.#tileMax[tile] = max;
      j0 += rows;
    }
    // Value rows: a slice's rows of one tile sit together, [keyTile, Ev], so that the kernel
    // streams them (a stride of several pages between rows defeats the hardware's prefetching).
    const lastNonFinite = new Int32Array(buffer, this.#lastNonFinite, slices * Ev);
    for (let s = 0; s < slices; s++) {
      for (let j0 = 0; j0 < L; ) {
        const p = start + j0;
        const rows = Math.min(L - j0, BC - (p % BC)); // up to the end of position p's tile
        const to = floats(float32, buffer, this.#valueRow(p, s), rows * Ev);
        to.set(value.data.subarray((s * L + j0) * Ev, (s * L + j0 + rows) * Ev)); // rounded to float32 if so
        for (let n = 0; n < rows * Ev; n++) {
          if (to[n] - to[n] !== 0) {
            lastNonFinite[s * Ev + (n % Ev)] = p + Math.floor(n / Ev); // NaN or ±Infinity (y - y is NaN exactly then)
          }
        }
        j0 += rows;
      }
    }
    this.#length = start + L;
  }

  /** Drops every key and value from position `length` on (a rejected guess of speculative
   * decoding, a beam's rollback); the tiles stay, for the keys appended next. */
  truncate(length: number): void {
    if (!(Number.isSafeInteger(length) && length >= 0 && length <= this.#length)) {
      throw new AttentionInputError(
        "value",
        `truncate's length must be an integer from 0 to the cache's length ${String(this.#length)},` +
          ` got ${describeValue(length)}`,
      );
    }
    const [E, Ev, slices, BC] = [this.#features, this.#valueFeatures, this.#slices, this.#keyTile];
    const float32 = this.dtype === "float32";
    const buffer = this.#kernel.memory.buffer as unknown as SharedArrayBuffer;
    const old = this.#length;
    this.#length = length;
    this.#tileMax.length = Math.ceil(length / BC);
    // The keys dropped are zeroed, as keys past the end always are; the cut tile's max is taken
    // again. A tile's numbers are read in order, each one's key found from its place (#keyAt).
    const block = 32 / this.#bytes; // keys per block of a tile
    const keyOf = (n: number) => Math.floor((n % (E * BC)) / (E * block)) * block + (n % block);
    for (let tile = Math.floor(length / BC); tile < Math.ceil(old / BC); tile++) {
      const keys = floats(float32, buffer, this.#tilesAt + tile * this.#tileBytes, slices * E * BC);
      let max = 0;
      for (let n = 0; n < keys.length; n++) {
        const p = tile * BC + keyOf(n);
        if (p >= length) {
          keys[n] = 0;
        } else {
          max = Math.max(max, Math.abs(keys[n]));
        }
      }
      if (tile * BC < length) {
        this.#tileMax[tile] = max;
      }
    }
    // A column whose last NaN or ±Infinity was dropped: its last one before, found again.
    const lastNonFinite = new Int32Array(buffer, this.#lastNonFinite, slices * Ev);
    for (let s = 0; s < slices; s++) {
      for (let t = 0; t < Ev; t++) {
        let j = lastNonFinite[s * Ev + t];
        while (j >= length) {
          j -= 1;
          while (j >= 0) {
            const y = floats(float32, buffer, this.#valueRow(j, s) + t * this.#bytes, 1)[0];
            if (y - y !== 0) {
              break;
            }
            j -= 1;
          }
        }
        lastNonFinite[s * Ev + t] = j;
      }
    }
  }

  /** softmax(query · keyᵀ · scale [+ mask]) · value over every key and value appended so far:
   * scaledDotProductAttentionFlat's answer on them, bit for bit. query is [B..., Hq, Lq, E] with
   * data of the cache's dtype; the options are that entry's. */
  attend(query: FlatTensor, options: SimdFlatAttentionOptions = {}): FlatTensor {
    const float32 = this.dtype === "float32";
    const buffer = this.#kernel.memory.buffer as unknown as SharedArrayBuffer;
    // The cache's keys and values stand in with their shapes, for the checks alone: attendResident
    // reads them from the tiles. (Views of the tiles, of the right length; no copy.)
    const keyShape = this.keyShape;
    const valueShape = this.valueShape;
    const stand = (shape: number[]) => ({
      shape,
      data: floats(float32, buffer, this.#tilesAt, product(shape)),
    });
    const checked = checkFlatInputs(query, stand(keyShape), stand(valueShape), options);
    const wanted = float32 ? "Float32Array" : "Float64Array";
    if (!(checked.query instanceof (float32 ? Float32Array : Float64Array))) {
      throw new AttentionInputError(
        "type",
        `query.data must be a ${wanted} for this ${this.dtype} cache, got ${describeValue(query.data)}`,
      );
    }
    const workers = checkWorkers(options.workers);
    checkOutputSize(checked.shapes, this.#bytes, checked.memoryLimit);
    const data = this.#attend({ ...checked, float32, workers });
    return { shape: checked.shapes.outputShape, data };
  }

  /** Ends the worker threads that `workers: N` started for this cache (they would otherwise wait,
   * unreferenced, until the process ends). The cache may still be used: a later call with workers
   * starts them again. */
  close(): void {
    for (const thread of this.#kernel.workers.splice(0)) {
      void thread.terminate();
    }
    new Int32Array(this.#kernel.memory.buffer, this.#kernel.control, CONTROL_BYTES / 4)[CONTROL.READY] = 0;
  }

  #attend(given: Problem): Float64Array | Float32Array {
    const problem = foldDecodeHeads(given); // a decode step's query heads as rows of their kv head
    const { shapes, float32 } = problem;
    const outputSize = product(shapes.outputShape);
    const output = float32 ? new Float32Array(outputSize) : new Float64Array(outputSize); // [B..., Hq, Lq, Ev]
    if (outputSize === 0) {
      return output; // nothing to compute
    }
    const parts = slices(shapes, problem.mask === null ? null : problem.mask.shape);
    const keys = this.#tileMax.reduce((a, x) => Math.max(a, x), 0); // max |k_jt| (NaN if one is)
    if (!kernelCanCarry(problem, keys)) {
      computeRowsPlainly(this.#plainly(problem), parts, output, false);
      return output;
    }
    const kernel = this.#kernel;
    const job = jobPlan(kernel, problem, parts.length);
    const end = this.#tilesAt + this.#tiles * this.#tileBytes; // past the tiles: this call's regions
    const regions = reserve(kernel, job.sizes, problem.memoryLimit, shapes, outputSize * this.#bytes, end);
    const BC = this.#keyTile;
    const layout: KeyValueLayout = {
      key: this.#tilesAt,
      keyKv: this.#features * BC * this.#bytes,
      keyTile: this.#tileBytes,
      value: this.#valueRow(0, 0),
      valueKv: BC * this.#valueFeatures * this.#bytes,
      valueTile: this.#tileBytes,
      valueRow: this.#valueFeatures * this.#bytes,
      lastNonFinite: this.#lastNonFinite,
    };
    runJob(kernel, problem, parts, output, layout, job, regions);
    if (output.some((x) => !Number.isFinite(x))) {
      computeRowsPlainly(this.#plainly(problem), parts, output, true);
    }
    return output;
  }

  /** The problem with the cache's keys and values laid out plainly ([B..., Hkv, length, E] and
   * [..., Ev]), for the rows computed in plain float64 (computeRowsPlainly): rare rows, so the
   * copy is made only for them. */
  #plainly(problem: Problem): Problem {
    const [E, Ev, slices, BC, Lk] = [
      this.#features,
      this.#valueFeatures,
      this.#slices,
      this.#keyTile,
      this.#length,
    ];
    const float32 = this.dtype === "float32";
    const buffer = this.#kernel.memory.buffer as unknown as SharedArrayBuffer;
    const key = float32 ? new Float32Array(slices * Lk * E) : new Float64Array(slices * Lk * E);
    const value = float32 ? new Float32Array(slices * Lk * Ev) : new Float64Array(slices * Lk * Ev);
    for (let j = 0; j < Lk; j++) {
      const tile = floats(
        float32,
        buffer,
        this.#tilesAt + Math.floor(j / BC) * this.#tileBytes,
        slices * E * BC,
      );
      for (let s = 0; s < slices; s++) {
        for (let t = 0; t < E; t++) {
          key[(s * Lk + j) * E + t] = tile[this.#keyAt(s, t, j % BC)];
        }
        value.set(floats(float32, buffer, this.#valueRow(j, s), Ev), (s * Lk + j) * Ev);
      }
    }
    return { ...problem, key, value };
  }

  /** Where feature t of key c (0 .. keyTile - 1) of slice s is among a tile's key numbers: the
   * kernel's layout (kernel.ts's transposeKey), slice by slice [E, keyTile] in blocks of two
   * vectors' worth of keys, each block [E, 2 · lanes]. */
  #keyAt(s: number, t: number, c: number): number {
    const [E, BC] = [this.#features, this.#keyTile];
    const block = 32 / this.#bytes; // keys per block: two 128-bit vectors
    return s * E * BC + Math.floor(c / block) * E * block + t * block + (c % block);
  }

  /** Byte offset of value row j of slice s: in its tile, after the tile's keys. */
  #valueRow(j: number, s: number): number {
    const BC = this.#keyTile;
    const tile = this.#tilesAt + Math.floor(j / BC) * this.#tileBytes;
    const keys = this.#slices * this.#features * BC * this.#bytes;
    return tile + keys + (s * BC + (j % BC)) * this.#valueFeatures * this.#bytes;
  }

  /** Key or value rows to append, checked against the cache: their length L. */
  #checkRows(name: "key" | "value", tensor: FlatTensor, features: number): number {
    const data = (tensor as { data?: unknown } | null)?.data;
    const shape = (tensor as { shape?: unknown } | null)?.shape;
    if (!(data instanceof Float32Array || data instanceof Float64Array)) {
      throw new AttentionInputError(
        "type",
        `${name} must be a flat tensor { shape, data } with a Float64Array or a Float32Array, got` +
          ` ${describeValue(tensor)}`,
      );
    }
    if (!Array.isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      throw new AttentionInputError(
        "shape",
        `${name}.shape must be an array of non-negative integers, got ${describeValue(shape)}`,
      );
    }
    const heads = this.#heads;
    const given = formatShape(shape);
    const cache = `the cache's ${name}s ${formatShape([...heads, this.#length, features])}`;
    if (shape.length !== heads.length + 2) {
      throw new AttentionInputError(
        "rank",
        `${name} must have ${String(heads.length + 2)} dimensions, [B..., Hkv, L, ${name === "key" ? "E" : "Ev"}]` +
          ` as ${cache}, got shape ${given}`,
      );
    }
    const batch = Math.max(heads.length - 1, 0); // [B...] then Hkv, where the cache has heads
    if (shape.slice(0, batch).some((n, i) => n !== heads[i])) {
      throw new AttentionInputError(
        "shape",
        `${name} has batch dims ${formatShape(shape.slice(0, batch))} but the cache has` +
          ` ${formatShape(heads.slice(0, batch))} (${name} ${given}, ${cache})`,
      );
    }
    if (heads.length > 0 && shape[batch] !== heads[batch]) {
      throw new AttentionInputError(
        "heads",
        `${name} has head count ${String(shape[batch])} but the cache has ${String(heads[batch])}` +
          ` (${name} ${given}, ${cache})`,
      );
    }
    if (shape.at(-1) !== features) {
      throw new AttentionInputError(
        "shape",
        `${name} has feature size ${String(shape.at(-1))} but the cache has ${String(features)}` +
          ` (${name} ${given}, ${cache})`,
      );
    }
    if (data.length !== product(shape)) {
      throw new AttentionInputError(
        "shape",
        `${name} has ${String(data.length)} values but its shape ${given} needs ${String(product(shape))}`,
      );
    }
    return shape.at(-2)!;
  }

  /** The memory holds `bytes` at least: grown by doubling (to the most a WebAssembly memory holds). */
  #grow(bytes: number): void {
    const memory = this.#kernel.memory;
    const have = memory.buffer.byteLength;
    if (bytes > MAX_BYTES) {
      throw new AttentionInputError(
        "size",
        `the cache needs ${String(bytes)} bytes of WebAssembly memory, more than the` +
          ` ${String(MAX_BYTES)} bytes a WebAssembly memory can hold`,
      );
    }
    if (bytes > have) {
      const wanted = Math.min(MAX_BYTES, Math.max(bytes, 2 * have));
      memory.grow(Math.ceil((wanted - have) / PAGE));
    }
  }
}

// ---- Checking: inputs.ts's functions, in the readable port's order. ----

/** The nested entry's float64 copies of query, key and value and its flat output, kept from call
 * to call and grown as needed (nest copies the output out before the entry returns). Fresh arrays
 * each call cost about three times the copying itself (1.3 ms against 0.45 ms for three
 * [1024, 64] inputs, measured): a new backing store is zeroed and faulted in, and counts toward
 * the external memory at which V8 collects garbage. */
const keptArrays = new Map<string, Float64Array>();
const kept: Allocate = (name, length) => {
  let array = keptArrays.get(name);
  if (array === undefined || array.length < length) {
    array = new Float64Array(length);
    keptArrays.set(name, array);
  }
  return array.subarray(0, length);
};

/** Everything the kernel needs, checked (inputs.ts), and how to run it. */
interface Problem extends CheckedInputs<Float64Array | Float32Array> {
  readonly float32: boolean; // compute in float32 (else float64)
  readonly workers: number;
}

function checkWorkers(workers: unknown): number {
  if (workers === undefined) {
    return 1;
  }
  if (!(Number.isSafeInteger(workers) && (workers as number) >= 1)) {
    throw new AttentionInputError(
      "value",
      `workers must be an integer >= 1, got ${typeof workers === "number" ? String(workers) : typeof workers}`,
    );
  }
  return workers as number;
}

function checkedProblem(
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: SimdAttentionOptions,
  allocate?: Allocate,
): Problem {
  const checked = checkInputs(query, key, value, options, allocate);
  return { ...checked, float32: false, workers: checkWorkers(options.workers) };
}

/** The output counts against memoryLimit, as in every port: refused before it is allocated. */
function checkOutputSize(shapes: AttentionShapes, bytes: number, memoryLimit: number): void {
  const needed = bytes * product(shapes.outputShape);
  if (needed > memoryLimit) {
    throw new AttentionInputError(
      "size",
      `the output ${formatShape(shapes.outputShape)} needs ${String(needed)} bytes, more than` +
        ` memoryLimit = ${String(memoryLimit)}; pass a larger memoryLimit to compute it`,
    );
  }
}

// ---- The kernel: loading, memory, jobs. ----

interface KernelExports extends ItemRunner {
  scanValueF32(value: number, Lk: number, Ev: number, lastNonFinite: number): void;
  scanValueF64(value: number, Lk: number, Ev: number, lastNonFinite: number): void;
  expF32(at: number, n: number): void;
  expF64(at: number, n: number): void;
  scratchBytes(E: number, Ev: number): number;
  transposeKeyF32(
    key: number,
    rows: number,
    E: number,
    out: number,
    first: number,
    tileBytes: number,
  ): number;
  transposeKeyF64(
    key: number,
    rows: number,
    E: number,
    out: number,
    first: number,
    tileBytes: number,
  ): number;
  heapBase(): number;
  scoredKeyTiles(): number;
  resetScoredKeyTiles(): void;
  queryBlock(): number;
  keyTile(): number;
}

interface Kernel {
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  readonly exports: KernelExports;
  readonly control: number; // byte offset of the control block (simd-worker.ts)
  readonly job: number; // byte offset of the job descriptor
  readonly start: number; // first byte free for a call's data
  readonly workers: SimdThread[];
  generation: number;
}

const PAGE = 65536;
const MAX_BYTES = 65536 * PAGE; // a 32-bit memory: 4 GiB
const JOB_BYTES = 108; // the job descriptor: i32 fields, scale and softcap as f64, row0, layout (kernel.ts)
const SLICE_FIELDS = 8; // i32 per slice in the kernel's slice table: kv slice, mask offset, RowKeys, sink f64 (kernel.ts)
const CHUNK_BYTES = 1 << 18; // a chunk of query, output or key rows in the kernel's memory, at most
const kernels = new Map<BuildName, Kernel>();
const loadedBytes = new Map<BuildName, Uint8Array<ArrayBuffer>>(); // given to initSimd
let selectedBuild: BuildName | "auto" | null = null; // by selectKernelBuild; null: the host's say
let validatedBuild: BuildName | null = null;

/** What the port needs from the engine it runs in, beyond WebAssembly. The browser's is the
 * default (below: no file system, Web Workers); simd-node.ts, the entry Node loads, puts Node's in
 * its place (the builds read from disk when first needed, worker_threads, an environment variable). */
export interface SimdHost {
  /** A build's bytes, read now; null where they come only from initSimd. */
  readBuild(build: BuildName): Uint8Array<ArrayBuffer> | null;
  /** The build the environment asks for (Node: ATTENTION_PORT_SIMD_BUILD), "auto" or null for
   * WebAssembly.validate's choice. */
  environmentBuild(): BuildName | "auto" | null;
  /** A thread running simd-worker.ts's loop on `start`; null where threads cannot share a memory. */
  startWorker(start: WorkerStart): SimdThread | null;
  /** Whether this thread may block in Atomics.wait (a browser's main thread may not). */
  readonly canBlock: boolean;
}

/** The browser's (and any engine's without a file system): the kernel comes from initSimd, and
 * workers are Web Workers, started only where the page is cross-origin isolated, since only there
 * may a WebAssembly memory be shared with them. */
const WEB_HOST: SimdHost = {
  readBuild: () => null,
  environmentBuild: () => null,
  startWorker(start) {
    const { Worker, crossOriginIsolated } = globalThis as unknown as BrowserGlobals;
    if (Worker === undefined || crossOriginIsolated !== true) {
      return null;
    }
    // Written out whole, so that bundlers find the worker's module and emit it. It is the
    // package's compiled simd-worker-web.js (dist/src/); the repository's pages run one thread.
    const worker = new Worker(new URL("./simd-worker-web.js", import.meta.url), { type: "module" });
    worker.postMessage({ simdWorker: start });
    return worker;
  },
  canBlock: typeof (globalThis as { window?: unknown }).window === "undefined",
};

/** The browser's globals WEB_HOST uses (declared here: the ports compile without the DOM library). */
interface BrowserGlobals {
  readonly Worker?: new (
    url: URL,
    options: { type: "module" },
  ) => SimdThread & { postMessage(message: unknown): void };
  readonly crossOriginIsolated?: boolean;
}

let host: SimdHost = WEB_HOST;

/** Puts the environment's host in place of the browser's (simd-node.ts does, on import). */
export function useSimdHost(next: SimdHost): void {
  host = next;
}

/** What the kernel needs from the engine; flash.ts, plain JavaScript, needs none of it. */
const ENGINE_NEEDS =
  "simd.ts needs WebAssembly with 128-bit SIMD and threads (a shared memory); relaxed SIMD is" +
  " optional. flash.ts computes the same in plain JavaScript";

function validates(bytes: Uint8Array<ArrayBuffer>): boolean {
  if (typeof WebAssembly === "undefined") {
    throw new Error(`${ENGINE_NEEDS}; this engine has no WebAssembly`);
  }
  return WebAssembly.validate(bytes);
}

/** A build's bytes: given to initSimd, else read by the host, else one line saying to call it. */
function buildBytes(build: BuildName): Uint8Array<ArrayBuffer> {
  const bytes = loadedBytes.get(build) ?? host.readBuild(build);
  if (bytes === null) {
    throw new Error(
      `the SIMD kernel's ${build} build is not loaded: await initSimd() once before the first call` +
        " (in a browser, the kernel is fetched, not read from disk)",
    );
  }
  loadedBytes.set(build, bytes);
  return bytes;
}

/** Whether this engine accepts the build; one line saying what it lacks where it has no
 * WebAssembly at all (Node run with --jitless, for one). */
function engineValidates(build: BuildName): boolean {
  return validates(buildBytes(build));
}

/** The build compiled, or one line saying what this engine lacks (an engine without SIMD). */
function compileKernel(build: BuildName): WebAssembly.Module {
  if (!engineValidates(build)) {
    const lacks =
      build === "relaxed" ? "relaxed SIMD (ATTENTION_PORT_SIMD_BUILD=baseline runs without)" : "them";
    throw new Error(`${ENGINE_NEEDS}; this engine lacks ${lacks}`);
  }
  return new WebAssembly.Module(buildBytes(build));
}

function loadKernel(build: BuildName): Kernel {
  const loaded = kernels.get(build);
  if (loaded !== undefined) {
    return loaded;
  }
  const kernel = newKernel(build);
  kernels.set(build, kernel);
  return kernel;
}

/** The build instantiated on a memory of its own: the one every call shares (loadKernel), or a
 * resident cache's. */
function newKernel(build: BuildName): Kernel {
  const module = compileKernel(build);
  const memory = new WebAssembly.Memory({ initial: 16, maximum: 65536, shared: true });
  const exports = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as KernelExports;
  const control = align(exports.heapBase());
  return {
    module,
    memory,
    exports,
    control,
    job: control + CONTROL_BYTES,
    start: align(control + CONTROL_BYTES + JOB_BYTES),
    workers: [],
    generation: 0,
  };
}

function align(bytes: number): number {
  return Math.ceil(bytes / 64) * 64;
}

/** Places regions of the given sizes one after another from `from` (kernel.start, or the end of
 * a resident cache's tiles; each 64-byte aligned,
 * with 64 bytes of padding after it for the kernel's whole-vector reads), grows the memory to hold
 * them and returns their byte offsets. More than the 4 GiB a 32-bit WebAssembly memory can hold,
 * or than memoryLimit together with the `output` bytes the call holds outside it, is refused
 * (kind "size") before the memory grows. */
function reserve(
  kernel: Kernel,
  sizes: readonly number[],
  memoryLimit = MAX_BYTES,
  shapes?: AttentionShapes,
  output = 0,
  from = kernel.start,
): number[] {
  const offsets: number[] = [];
  let end = from;
  for (const size of sizes) {
    offsets.push(end);
    end = align(end + size + 64);
  }
  if (end > MAX_BYTES) {
    throw new AttentionInputError(
      "size",
      `the SIMD port needs ${String(end)} bytes of WebAssembly memory, more than the` +
        ` ${String(MAX_BYTES)} bytes a WebAssembly memory can hold`,
    );
  }
  if (end + output > memoryLimit) {
    const what = shapes === undefined ? "" : ` for the output ${formatShape(shapes.outputShape)} and`;
    throw new AttentionInputError(
      "size",
      `the SIMD port needs ${String(end + output)} bytes${what} its WebAssembly memory, more than` +
        ` memoryLimit = ${String(memoryLimit)}; pass a larger memoryLimit to compute them`,
    );
  }
  const have = kernel.memory.buffer.byteLength;
  if (end > have) {
    kernel.memory.grow(Math.ceil((end - have) / PAGE));
  }
  return offsets;
}

/** Where every kv slice's key tiles and value rows are in the kernel's memory, in bytes (kernel.ts's
 * J_K_* and J_V_* fields): a call's own copy, or a resident cache's tiles (SimdKeyValueCache). */
interface KeyValueLayout {
  readonly key: number; // kv slice 0's first key tile
  readonly keyKv: number; // from one kv slice's tiles to the next's
  readonly keyTile: number; // from one tile to the next of the same kv slice
  readonly value: number; // kv slice 0's value row 0
  readonly valueKv: number;
  readonly valueTile: number; // from value row j to row j + keyTile of the same kv slice
  readonly valueRow: number; // from value row j to row j + 1 within a tile
  readonly lastNonFinite: number; // i32 [kvSlices, Ev]: the last key row whose value is NaN or ±inf
}

/** The whole computation on one shared memory; returns the output [B..., Hq, Lq, Ev] in the
 * problem's dtype: written into `into` when given (float64 only), else into a new array. */
function attend(given: Problem, into?: Float64Array): Float64Array | Float32Array {
  const problem = foldDecodeHeads(given); // a decode step's query heads as rows of their kv head
  const { shapes, float32 } = problem;
  const { queryHeads: Hq, keyValueHeads: Hkv, queryLength: Lq, keyLength: Lk } = shapes;
  const { features: E, valueFeatures: Ev } = shapes;
  const outputSize = product(shapes.outputShape);
  const output = into ?? (float32 ? new Float32Array(outputSize) : new Float64Array(outputSize)); // [B..., Hq, Lq, Ev]
  if (outputSize === 0) {
    return output; // nothing to compute
  }
  const parts = slices(shapes, problem.mask === null ? null : problem.mask.shape);
  const kernel = loadKernel(kernelBuild());
  const keyTile = kernel.exports.keyTile();
  const bytes = float32 ? 4 : 8;
  const kvSlices = (parts.length / Hq) * Hkv;
  // The key is transposed a chunk of rows at a time: the kernel's memory never holds it whole.
  const stageRows = rowsPerChunk(E * bytes, Lk, keyTile);
  const keyTBytes = Math.ceil(Lk / keyTile) * E * keyTile * bytes; // one kv slice's key, tiled
  const job = jobPlan(kernel, problem, parts.length);
  const [lastNonFinite, keyT, value, keyStage, ...regions] = reserve(
    kernel,
    [
      kvSlices * Ev * 4, // per kv slice and value column: last key row with NaN or ±inf (i32)
      kvSlices * keyTBytes, // [B..., Hkv, ceil(Lk / Bc), E, Bc]: key tiles, each transposed
      problem.value.length * bytes, // [B..., Hkv, Lk, Ev]
      stageRows * E * bytes, // key rows on their way to being transposed [stageRows, E]
      ...job.sizes,
    ],
    problem.memoryLimit,
    shapes,
    outputSize * bytes,
  );
  const buffer = kernel.memory.buffer as unknown as SharedArrayBuffer; // shared: worker threads see it too
  // The key's tiles, and the largest |k| (for the bound on the logits) taken on the way.
  const transpose = float32 ? kernel.exports.transposeKeyF32 : kernel.exports.transposeKeyF64;
  const stage = floats(float32, buffer, keyStage, stageRows * E);
  const tileBytes = E * keyTile * bytes;
  let keys = 0; // max |k_jt| (NaN if one is)
  for (let kv = 0; kv < kvSlices; kv++) {
    if (Lk % keyTile !== 0) {
      floats(float32, buffer, keyT + (kv + 1) * keyTBytes - tileBytes, E * keyTile).fill(0); // past Lk
    }
    for (let j0 = 0; j0 < Lk; j0 += stageRows) {
      const rows = Math.min(stageRows, Lk - j0);
      stage.set(problem.key.subarray((kv * Lk + j0) * E, (kv * Lk + j0 + rows) * E));
      keys = Math.max(keys, transpose(keyStage, rows, E, keyT + kv * keyTBytes, j0, tileBytes));
    }
  }
  if (!kernelCanCarry(problem, keys)) {
    computeRowsPlainly(problem, parts, output, false);
    return output;
  }
  floats(float32, buffer, value, problem.value.length).set(problem.value); // rounded to float32 if so
  new Int32Array(buffer, lastNonFinite, kvSlices * Ev).fill(-1);
  if (!seesEveryKey(problem.keys, Lq)) {
    // Keys a block skips carry weight 0 in the readable port, where 0 · NaN is still NaN: the
    // kernel needs, per value column, the last key row holding NaN or ±inf.
    const scan = float32 ? kernel.exports.scanValueF32 : kernel.exports.scanValueF64;
    for (let kv = 0; kv < kvSlices; kv++) {
      scan(value + kv * Lk * Ev * bytes, Lk, Ev, lastNonFinite + kv * Ev * 4);
    }
  }
  const layout: KeyValueLayout = {
    key: keyT,
    keyKv: keyTBytes,
    keyTile: tileBytes,
    value,
    valueKv: Lk * Ev * bytes,
    valueTile: keyTile * Ev * bytes,
    valueRow: Ev * bytes,
    lastNonFinite,
  };
  runJob(kernel, problem, parts, output, layout, job, regions);
  computeRowsPlainly(problem, parts, output, true);
  return output;
}

/** What one call puts in the kernel's memory beside the key and value: the sizes of its regions
 * (reserve places them), its chunk of query rows and its thread count. */
interface JobPlan {
  readonly sizes: readonly number[];
  readonly chunkRows: number;
  readonly threads: number;
  readonly stride: number; // scratch bytes per thread
}

function jobPlan(kernel: Kernel, problem: Problem, sliceCount: number): JobPlan {
  const { shapes, mask, float32 } = problem;
  const { queryLength: Lq, features: E, valueFeatures: Ev } = shapes;
  const bytes = float32 ? 4 : 8;
  const queryBlock = kernel.exports.queryBlock();
  // The query goes in and the output comes out a chunk of rows at a time: the kernel's memory
  // never holds either whole.
  const chunkRows = rowsPerChunk(sliceCount * Math.max(E, Ev) * bytes, Lq, queryBlock); // of every slice
  const threads = Math.min(problem.workers, sliceCount * Math.ceil(chunkRows / queryBlock));
  const maskBytes = mask === null ? 0 : mask.bool !== null ? mask.bool.length : mask.float!.length * bytes;
  const stride = kernel.exports.scratchBytes(E, Ev);
  const sizes = [
    sliceCount * SLICE_FIELDS * 4, // per slice: kv slice, mask offset, its RowKeys (i32 each), sink logit (f64)
    maskBytes, // the mask as given, broadcast by strides
    stride * threads, // one scratch slot per thread
    sliceCount * chunkRows * E * bytes, // one chunk of query rows [B..., Hq, chunkRows, E]
    sliceCount * chunkRows * Ev * bytes, // their output rows [B..., Hq, chunkRows, Ev]
  ];
  return { sizes, chunkRows, threads, stride };
}

/** The sink logit of a (batch, head) slice's query head (-Infinity for none). */
function sliceSink(problem: Problem, part: Slice): number {
  const { sinkLogits, shapes } = problem;
  return sinkLogits === null ? -Infinity : sinkLogits[part.index % shapes.queryHeads];
}

/** The kernel over every query row, the key and value already in its memory where `layout` says:
 * the mask and the job descriptor written, then the query in and the output out by chunks. */
function runJob(
  kernel: Kernel,
  problem: Problem,
  parts: readonly Slice[],
  output: Float64Array | Float32Array,
  layout: KeyValueLayout,
  plan: JobPlan,
  regions: readonly number[],
): void {
  const { shapes, mask, float32 } = problem;
  const { queryLength: Lq, keyLength: Lk, features: E, valueFeatures: Ev } = shapes;
  const [sliceTable, maskAt, scratch, queryChunk, outputChunk] = regions;
  const { chunkRows, threads, stride } = plan;
  const bytes = float32 ? 4 : 8;
  const queryBlock = kernel.exports.queryBlock();
  const buffer = kernel.memory.buffer as unknown as SharedArrayBuffer;
  let maskKind = 0;
  if (mask !== null && mask.bool !== null) {
    new Uint8Array(buffer, maskAt, mask.bool.length).set(mask.bool);
    maskKind = 1;
  } else if (mask !== null) {
    floats(float32, buffer, maskAt, mask.float!.length).set(mask.float!);
    maskKind = 2;
  }

  // Per (batch, head) slice: the key/value slice it reads (grouped-query heads share one), where
  // its mask starts, and which keys its rows see (key-range.ts's four numbers, which the kernel
  // evaluates); the mask's strides along Lq and Lk are the same for every slice.
  const table = new Int32Array(buffer, sliceTable, parts.length * SLICE_FIELDS);
  const sinks = new Float64Array(buffer, sliceTable, (parts.length * SLICE_FIELDS) / 2); // the same bytes
  const range = problem.keys;
  parts.forEach((part, n) => {
    const keys = sliceKeys(range, part.index);
    table.set(
      [
        Lk * E === 0 ? 0 : part.key / (Lk * E), // no keys: no slice to read
        part.mask,
        keys.startShift,
        keys.endShift,
        keys.limit,
        keys.sinkEnd,
      ],
      n * SLICE_FIELDS,
    );
    sinks[(n * SLICE_FIELDS + 6) / 2] = sliceSink(problem, part); // f64 at byte 24 of the entry
  });
  const [maskI, maskJ] = [parts[0].maskI, parts[0].maskJ];

  // The job descriptor (kernel.ts's J_* offsets); a job is one chunk of query rows of every slice.
  const job = new DataView(buffer, kernel.job, JOB_BYTES);
  const perChunk = 0; // J_BLOCKS and J_ROWS, like J_ROW0 at byte 80, are written for each chunk below
  const fields = [
    perChunk,
    perChunk,
    Lk,
    E,
    Ev,
    queryChunk,
    layout.key,
    layout.value,
    outputChunk,
    sliceTable,
  ];
  fields.push(maskKind, maskAt, maskI, maskJ, layout.lastNonFinite);
  fields.forEach((x, n) => job.setUint32(4 * n, x, true));
  job.setFloat64(64, problem.scale, true);
  job.setFloat64(72, problem.softcap, true);
  const { keyKv, keyTile, valueKv, valueTile, valueRow } = layout;
  [keyKv, keyTile, valueKv, valueTile, valueRow].forEach((x, n) => job.setUint32(88 + 4 * n, x, true));
  const queryRows = floats(float32, buffer, queryChunk, parts.length * chunkRows * E);
  const outputRows = floats(float32, buffer, outputChunk, parts.length * chunkRows * Ev);
  for (let row0 = 0; row0 < Lq; row0 += chunkRows) {
    const rows = Math.min(chunkRows, Lq - row0);
    for (const [n, part] of parts.entries()) {
      const from = part.query + row0 * E;
      queryRows.set(problem.query.subarray(from, from + rows * E), n * rows * E); // [rows, E] of slice n
    }
    const blocks = Math.ceil(rows / queryBlock);
    job.setUint32(0, blocks, true); // J_BLOCKS
    job.setUint32(4, rows, true); // J_ROWS
    job.setUint32(80, row0, true); // J_ROW0
    runItems(kernel, bytes, parts.length * blocks, scratch, stride, threads);
    for (const [n, part] of parts.entries()) {
      output.set(outputRows.subarray(n * rows * Ev, (n + 1) * rows * Ev), part.output + row0 * Ev);
    }
  }
}

/** How many rows of `rowBytes` bytes go in one chunk of at most CHUNK_BYTES: all `total` when they
 * fit, else the most whole multiples of `multiple` (a query block, a key tile) that do, one at
 * least. Inputs streamed this way cost the kernel's memory a chunk instead of a copy: its memory
 * holds the key tiles, the value and three chunks, beside the caller's inputs and output. */
function rowsPerChunk(rowBytes: number, total: number, multiple: number): number {
  const rows = Math.floor(CHUNK_BYTES / Math.max(rowBytes, 1));
  return rows >= total ? total : Math.max(multiple, rows - (rows % multiple));
}

/** A float32 or float64 view of `length` numbers at byte `offset` of the kernel's memory. */
function floats(
  float32: boolean,
  buffer: SharedArrayBuffer,
  offset: number,
  length: number,
): Float32Array | Float64Array {
  return float32 ? new Float32Array(buffer, offset, length) : new Float64Array(buffer, offset, length);
}

/** Every item of the job, on this thread alone or shared with threads - 1 workers. */
function runItems(
  kernel: Kernel,
  bytes: number,
  items: number,
  scratch: number,
  stride: number,
  threads: number,
) {
  if (threads <= 1) {
    const run = bytes === 4 ? kernel.exports.runItemF32 : kernel.exports.runItemF64;
    for (let item = 0; item < items; item++) {
      run(kernel.job, item, scratch);
    }
    return;
  }
  const control = new Int32Array(kernel.memory.buffer, kernel.control, CONTROL_BYTES / 4);
  const claim = new BigInt64Array(kernel.memory.buffer, kernel.control, 1);
  spawnWorkers(kernel, threads - 1);
  if (host.canBlock) {
    waitReady(control, kernel.workers.length, performance.now() + 10_000);
  } // else a browser's main thread: a new worker starts only once it returns, and joins later calls
  kernel.generation = (kernel.generation + 1) | 0;
  const generation = kernel.generation;
  Atomics.store(control, CONTROL.COUNT, items);
  Atomics.store(control, CONTROL.JOB, kernel.job);
  Atomics.store(control, CONTROL.SCRATCH, scratch | 0);
  Atomics.store(control, CONTROL.STRIDE, stride);
  Atomics.store(control, CONTROL.BYTES, bytes);
  Atomics.store(control, CONTROL.HELPERS, threads - 1);
  Atomics.store(control, CONTROL.DONE, 0);
  Atomics.store(control, CONTROL.FAILED, 0);
  Atomics.store(claim, 0, BigInt(generation >>> 0) << 32n); // open: item 0 of this generation
  Atomics.store(control, CONTROL.WAKE, generation);
  Atomics.notify(control, CONTROL.WAKE);
  claimItems(control, claim, generation, kernel.exports, 0);
  for (
    let done = Atomics.load(control, CONTROL.DONE);
    done < items;
    done = Atomics.load(control, CONTROL.DONE)
  ) {
    if (host.canBlock) {
      Atomics.wait(control, CONTROL.DONE, done); // the workers finish the items they took
    } // else spin: a browser's main thread may not wait, and the items left are being computed
  }
  if (Atomics.load(control, CONTROL.FAILED) !== 0) {
    throw new Error("a SIMD worker thread failed while computing attention");
  }
}

/** Starts worker threads until `count` run, or as many as the host has (none where threads
 * cannot share the memory: there this thread computes every item). Each thread's scratch slot is
 * its index; the workers never keep a process up (the host unrefs them). */
function spawnWorkers(kernel: Kernel, count: number): void {
  while (kernel.workers.length < count) {
    const start: WorkerStart = {
      module: kernel.module,
      memory: kernel.memory,
      control: kernel.control,
      index: kernel.workers.length + 1,
    };
    const thread = host.startWorker(start);
    if (thread === null) {
      return;
    }
    kernel.workers.push(thread);
  }
}

/** Waits (briefly) until `count` workers are ready, so that a call with workers really shares its
 * work; past the deadline this thread computes what they do not take, and the result is the same. */
function waitReady(control: Int32Array, count: number, deadline: number): void {
  for (
    let ready = Atomics.load(control, CONTROL.READY);
    ready < count;
    ready = Atomics.load(control, CONTROL.READY)
  ) {
    const left = deadline - performance.now();
    if (left <= 0) {
      break;
    }
    Atomics.wait(control, CONTROL.READY, ready, left);
  }
}

/** initSimd's workers: started, and waited for without blocking (a browser's main thread may not
 * block, and its new workers start only while it is idle). */
async function startWorkers(kernel: Kernel, count: number): Promise<void> {
  spawnWorkers(kernel, count);
  const control = new Int32Array(kernel.memory.buffer, kernel.control, CONTROL_BYTES / 4);
  const deadline = performance.now() + 10_000;
  while (Atomics.load(control, CONTROL.READY) < kernel.workers.length && performance.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

// ---- Plain float64 rows, the readable port's algorithm, where the kernel cannot carry them. ----

/** Query row i of one slice, whose rows see `keys`: its logits [Lk] into `logits`, in float64 as
 * the readable port computes them. Returns the row's largest logit (NaN if any is). */
function rowLogits(problem: Problem, slice: Slice, keys: RowKeys, i: number, logits: Float64Array): number {
  const { shapes, mask, query, key, scale, softcap } = problem;
  const { keyLength: Lk, features: E } = shapes;
  let max = -Infinity;
  for (let j = 0; j < Lk; j++) {
    let s = 0;
    for (let t = 0; t < E; t++) {
      s += query[slice.query + i * E + t] * key[slice.key + j * E + t];
    }
    let x = s * scale;
    if (softcap > 0) {
      x = softcap * Math.tanh(x / softcap);
    }
    const cell = slice.mask + i * slice.maskI + j * slice.maskJ;
    if (mask?.bool && mask.bool[cell] === 0) {
      x = -Infinity;
    } else if (mask?.float) {
      x += mask.float[cell];
    }
    if (!seesKey(keys, i, j)) {
      x = -Infinity; // a key the row may not see (key-range.ts), whatever the mask said
    }
    logits[j] = x;
    max = Math.max(max, x);
  }
  return max;
}

/** Whether the kernel's numbers stay finite on these inputs. It carries the logits in log2 units
 * (logit · log2 e) and takes differences of two of them, so a logit past about a quarter of the
 * largest number overflows there although it is an ordinary number (a float mask of -1.7e308 is a
 * bias, not a mask), and NaN or ±Infinity in query or key needs IEEE's answer cell by cell. A cheap
 * bound on every |logit| (the largest row sum of |query| times the largest |key|, times |scale|,
 * or softcap, plus the largest finite |mask| value) decides: O(Lq·E + Lk·E), not O(Lq·Lk·E).
 * `keys`, the largest |key| (NaN if one is), comes from the kernel, which finds it while it lays
 * the key out (transposeKey), so that the key is not read once more in JavaScript for it. */
function kernelCanCarry(problem: Problem, keys: number): boolean {
  const { query, mask, scale, softcap, shapes, float32 } = problem;
  const E = shapes.features;
  let queryRows = 0; // max over query rows of sum_t |q_it|
  for (let row = 0; row < query.length; row += E) {
    let sum = 0;
    for (let t = row; t < row + E; t++) {
      sum += Math.abs(query[t]);
    }
    queryRows = Math.max(queryRows, sum); // NaN stays NaN: Math.max propagates it
  }
  let masks = 0; // the largest finite |mask value| (-Infinity masks)
  for (const x of mask?.float ?? []) {
    if (Number.isFinite(x)) {
      masks = Math.max(masks, Math.abs(x));
    }
  }
  let sinks = 0; // the largest |sink logit| (-Infinity is no sink; NaN and +Infinity need IEEE's answer)
  for (const x of problem.sinkLogits ?? []) {
    sinks = x === -Infinity ? sinks : Math.max(sinks, Math.abs(x)); // NaN stays NaN
  }
  const scaled = Math.abs(scale) * queryRows * keys; // bounds every |score · scale|
  const logits = Math.max((softcap > 0 ? Math.min(softcap, scaled) : scaled) + masks, sinks);
  const largest = float32 ? 3.4028234663852886e38 : Number.MAX_VALUE;
  return logits * 4 * Math.LOG2E < largest && queryRows * keys * 4 < largest; // false for NaN and Infinity
}

/** Output rows computed in plain float64, the readable port's way: the logits (rowLogits), the
 * stable softmax, then the weights times value, each weight divided by the row sum first. For
 * inputs the kernel cannot carry (kernelCanCarry), every row (onlyNonFinite false). And after the
 * kernel (onlyNonFinite true), the rows whose output is not finite: the kernel sums
 * exp(logit - m) · value before dividing by the row sum, as flash.ts does, and near the largest
 * double that sum can overflow (to ±Infinity, or NaN once rescaled) where the exact output is an
 * ordinary number; computed again, such a row gives the contract's answer, the number where it is
 * representable and NaN or ±Infinity where the inputs make it so. Rows like these are rare (NaN or
 * ±Infinity in value, |value| near the largest double), so the second pass costs only them. */
function computeRowsPlainly(
  problem: Problem,
  parts: readonly Slice[],
  output: Float64Array | Float32Array,
  onlyNonFinite: boolean,
): void {
  const { shapes, value } = problem;
  const { queryLength: Lq, keyLength: Lk, valueFeatures: Ev } = shapes;
  const logits = new Float64Array(Lk); // [Lk]  one row at a time
  const row = new Float64Array(Ev); // [Ev]
  const range = problem.keys;
  for (const at of parts) {
    const keys = sliceKeys(range, at.index);
    const sink = sliceSink(problem, at);
    for (let i = 0; i < Lq; i++) {
      const out = at.output + i * Ev;
      let finite = true;
      for (let t = 0; t < Ev; t++) {
        finite &&= Number.isFinite(output[out + t]);
      }
      if (onlyNonFinite && finite) {
        continue;
      }
      const keysMax = rowLogits(problem, at, keys, i, logits);
      if (keysMax === -Infinity) {
        output.fill(0, out, out + Ev); // fully masked: +0.0 (all weight on the sink, if any), whatever value holds
        continue;
      }
      const max = Math.max(sink, keysMax); // the sink logit takes part in the max and the sum
      let sum = sink === -Infinity ? 0 : Math.exp(sink - max);
      for (let j = 0; j < Lk; j++) {
        sum += Math.exp(logits[j] - max);
      }
      row.fill(0);
      for (let j = 0; j < Lk; j++) {
        const weight = Math.exp(logits[j] - max) / sum;
        for (let t = 0; t < Ev; t++) {
          row[t] += weight * value[at.value + j * Ev + t];
        }
      }
      output.set(row, out); // rounded to float32 once when the output is float32
    }
  }
}
