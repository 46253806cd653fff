/**
 * The WebGPU port of scaled dot-product attention: flash.ts's algorithm as a compute shader.
 *
 *     output = softmax(query · keyᵀ · scale [+ mask]) · value
 *
 * Same contract, same errors as the readable port (attention.ts), flash.ts and simd.ts; read those
 * first. The arithmetic runs on the GPU, in float32, in a WGSL compute shader (webgpu-kernel.ts);
 * this file checks the inputs (inputs.ts, before any device is touched), plans the dispatches
 * within the device's limits, uploads, dispatches and reads the output back. The API is
 * asynchronous, as WebGPU is: every entry returns a Promise.
 *
 * The kernel is flash.ts's tiled online softmax, with flash.ts's tiles mapped onto a GPU's
 * hierarchy: a workgroup of 64 threads owns one block of Br = 16 query rows of one (batch, head)
 * slice (flash.ts's query block), and walks the keys a tile of Bc = 64 at a time (flash.ts's key
 * tile). Thread t is key j0 + t of the tile while scoring, and output column c0 + t while summing.
 * attention.ts's five steps, tile by tile:
 *
 *  1. scores = query · keyᵀ. The block's query rows and the tile's key rows are staged through
 *     workgroup memory, 16 features at a time (any E): the query chunk [16, 16] and the key chunk
 *     transposed to [16, 64], loaded once by the whole workgroup with neighbouring threads reading
 *     neighbouring addresses, then read by every thread from workgroup memory. Thread t sums its
 *     key's 16 scores (one per row) in registers: each key number it reads serves 16 rows, each
 *     query number (the same address for every thread, a broadcast) 64 keys. flash.ts's register
 *     blocking, 2 rows x 4 keys, becomes 16 rows x 1 key per thread x 64 threads.
 *  2. scale, then softcap. 3. the mask: boolean (bytes, four to a 32-bit word: WGSL has no 8-bit
 *     type), float (added), read in place through the mask's strides, as flash.ts does, and the
 *     keys a row may not see (key-range.ts; with isCausal, past its position); a masked cell is -inf. The tile of logits [16, 64] goes to workgroup memory.
 *  4. softmax, online, as flash.ts's softmaxTile: the owner of row r (thread r) finds the tile's
 *     largest logit, the new running max m and alpha = exp(m_old - m_new); then every thread turns
 *     its column's logits into p = exp(logit - m), in place; then the owner adds the tile's p to
 *     the running sum l = l · alpha + sum(p). A barrier between each: they read each other's work.
 *  5. weights · value, online, as flash.ts's accumulateTile: each thread keeps acc [16] for its
 *     output column (one running sum per row, in registers), rescales it by alpha, and adds
 *     p · value for the tile's keys, the value rows staged through workgroup memory 16 at a time
 *     (again loaded once, read by all). After the last tile, output = acc / l, once per row.
 *
 * So no [Lq, Lk] matrix exists anywhere (workgroup memory holds 13.6 KiB, under the 16 KiB every
 * WebGPU device offers), each key and value number is read from GPU memory once per block of 16
 * rows, and every barrier guards one hand-over between threads. The key tiles outside the keys a
 * block's rows may see (key-range.ts: their sinks and their band; with isCausal, past its last
 * row; with a window, before its first row's start) are skipped, as in flash.ts; a sink logit
 * starts each row's online softmax, as in flash.ts. Ev > 64 takes more workgroups along the dispatch's
 * z dimension, each recomputing the scores of its rows for its 64 columns: a thread then still
 * holds only 16 sums, for any Ev. Grouped-query heads and the mask's broadcast are a per-slice
 * table of (key/value slice, first mask cell) that batching.ts computes; the same table carries
 * each slice's RowKeys from key-range.ts, which keys its rows see.
 *
 * Why WebGPU's constraints shape it so:
 *  - Float32 only: WebGPU has no float64 in shaders (and shader-f16 is optional), so the port is
 *    held to float32's budget, as typescript-simd-float32 is; inputs float32 cannot hold are outside
 *    the contract (docs/design.md, section 3). Float64Array inputs are rounded to float32 once.
 *  - exp is computed as simd.ts's kernel does it (exp2 of x · log2 e by a degree-7 polynomial and
 *    exponent bits), not by WGSL's exp, whose accuracy the spec bounds only by 3 + 2·|x| ULP and
 *    leaves to the device. On SwiftShader both use under 10% of the budget on every fixture group
 *    (docs/webgpu.md has the figures); the polynomial's error is the same on every GPU.
 *  - No IEEE special value inside the shader. WGSL lets an implementation assume there is no NaN or
 *    infinity (a GPU's shader compiler may fold x != x to false, or reorder arithmetic as if none
 *    can occur; SwiftShader happens to keep IEEE's rules), so the kernel never computes with one,
 *    compares one, or makes one by arithmetic. Inputs are read as 32-bit patterns: a NaN or ±inf
 *    reads as 0 and sets a flag on its query row, key row or value cell. IEEE's answer is then
 *    decided from flags and counts: a score whose query or key row holds a special value is
 *    classified product by product (NaN for a NaN or inf · 0, or for +inf and -inf together, else
 *    ±inf); a logit carries a kind beside its finite value (finite, masked, +inf, NaN), so a key
 *    the row may not see and a boolean mask are a kind, and a float mask's ±inf and NaN follow
 *    IEEE's sum by kind; a row is NaN (a NaN or +inf logit), fully masked (no finite logit, or
 *    Lk = 0: +0.0) or seen; value's NaN and infinities reach a column as per-row bits (NaN, or an
 *    infinity weighed 0: NaN; an infinity weighed > 0: ±inf; both signs: NaN). The output is
 *    written as bits, so NaN and ±inf are patterns, not results. A key a block skips is never
 *    read, so the host counts, per key/value slice and column, the keys before each key whose value
 *    is NaN or ±inf (nonFiniteBefore) and the kernel makes a column NaN where a skipped key holds
 *    one, as flash.ts does. A NaN or +inf sink logit makes a row that sees a key NaN. The host
 *    holds scale and softcap within float32's range. scripts/gpu-check runs the special-value
 *    fixtures on a real GPU.
 *  - Limits. One storage binding holds at most maxStorageBufferBindingSize bytes and one dispatch
 *    at most maxComputeWorkgroupsPerDimension workgroups along each dimension; planDispatches groups
 *    the slices into dispatches that fit, and cuts a slice too large for one into blocks of query
 *    rows. What cannot be cut (one key/value slice, the value columns, one block's mask cells) and
 *    does not fit is refused with kind "size". Each dispatch's buffers live only for that dispatch.
 *  - Intermediate overflow: acc = Σ p · value, before the division by l, can overflow float32 where
 *    the exact output is representable (|value| within a factor of about Lk of float32's largest
 *    number). Testing a sum for infinity is what WGSL does not promise, so the host decides instead
 *    (accMayOverflow: the largest |value| times Lk reaches 2^127) and the kernel then computes
 *    every cell of the dispatch the readable port's way (normalisedCell: weights divided by l
 *    first), as flash.ts and simd.ts compute such rows again.
 *
 * `attentionSteps` returns every step: the output is the kernel's; scores, logits and weights are
 * the readable port's (attention.ts computes them), since the kernel holds them a tile at a time.
 *
 * Where it runs: a browser with WebGPU on a secure context (https, 127.0.0.1 or file://), where
 * navigator.gpu is; in Node with a WebGPU binding passed as createAttention({ gpu }), e.g. the npm
 * package `webgpu` (Dawn). `attention-port verify --ports webgpu` runs it in headless Chromium
 * on SwiftShader, Chromium's own WebGPU on the CPU: an emulation, right in its numbers, slow.
 *
 * Dimension letters as in flash.ts: B... batch dims, Hq/Hkv heads, Lq/Lk lengths, E/Ev features,
 * Br (QUERY_BLOCK) query rows per workgroup, Bc (KEY_TILE) keys per tile.
 */

import * as readable from "./attention.ts";
import { type Slice, slices } from "./batching.ts";
import { type Entries, entriesOfAsync, type PortKernel, readableSteps } from "./entries.ts";
import {
  AttentionInputError,
  type AttentionOptions,
  type AttentionShapes,
  type AttentionSteps,
  type CheckedInputs,
  checkFlatInputs,
  checkInputs,
  type FlatAttentionOptions,
  type FlatTensor,
  formatShape,
  product,
  type TensorInput,
} from "./inputs.ts";
import { seesEveryKey, sliceKeys } from "./key-range.ts";
import {
  ATTENTION_WGSL,
  LOGIT_KIND,
  PARAMS_BYTES,
  QUERY_BLOCK,
  SLICE_BYTES,
  VALUE_COLUMNS,
} from "./webgpu-kernel.ts";

export * from "./port-exports.ts";

/** No WebGPU to run on: the runtime has none (Node without a binding, a browser without it, a page
 * that is not a secure context), no adapter answered, or the device could not be made or was
 * lost. Not an AttentionInputError: the input may be fine, the machine cannot run it. */
export class WebGpuUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebGpuUnavailableError";
  }
}

/** What the port needs of a device's limits, in the words of WebGPU's GPUSupportedLimits. */
export interface DispatchLimits {
  /** The most bytes one storage buffer binding (and one buffer) may hold. */
  readonly maxStorageBufferBindingSize: number;
  /** The most workgroups along each dimension of one dispatch. */
  readonly maxComputeWorkgroupsPerDimension: number;
}

/** The adapter the port runs on, as it describes itself. `emulated` is true for a CPU
 * implementation of WebGPU (SwiftShader, llvmpipe/lavapipe, WARP, or an adapter that calls
 * itself a fallback): its times are an emulation's, not a GPU's. */
export interface AdapterDescription {
  readonly vendor: string;
  readonly architecture: string;
  readonly device: string;
  readonly description: string;
  readonly emulated: boolean;
  /** One line: "google swiftshader (CPU emulation)", or the vendor, architecture and device. */
  readonly summary: string;
}

/** WebGPU's entry object (navigator.gpu, or a binding's), as far as this file's public types name
 * it: they stay free of the WebGPU type declarations, so that a caller needs none to use them. */
export interface GpuEntry {
  requestAdapter(options?: { readonly powerPreference?: "low-power" | "high-performance" }): Promise<unknown>;
}

/** What an adapter says of itself (GPUAdapterInfo), for describeAdapter. */
export interface AdapterInfo {
  readonly vendor?: string;
  readonly architecture?: string;
  readonly device?: string;
  readonly description?: string;
  readonly isFallbackAdapter?: boolean;
}

export interface WebGpuSetup {
  /** The GPU object to use (navigator.gpu by default). In Node, a binding's, e.g. the npm package
   * `webgpu`'s create([]). */
  readonly gpu?: GpuEntry;
  /** Passed to requestAdapter. */
  readonly powerPreference?: "low-power" | "high-performance";
  /** Lower limits than the device's, to split problems earlier (the tests use it to reach the
   * splitting with small inputs). Never raises a limit. */
  readonly limits?: Partial<DispatchLimits>;
}

/** One device and its pipeline, kept between calls: the three entries of the shared device
 * (float32 on the GPU; nested arrays or shaped tensors in, nested arrays out, matrices in, a matrix
 * out; or flat tensors in and out, the output in query.data's type), on this device. */
export interface WebGpuAttention extends Entries<AttentionOptions, FlatAttentionOptions, true> {
  readonly adapter: AdapterDescription;
  readonly limits: DispatchLimits;
  /** Whether the device is gone (lost, or destroyed): calls then throw WebGpuUnavailableError. */
  readonly lost: boolean;
  /** Release the device. */
  destroy(): void;
}

// ---- Public entry points: one shared device, made on first use. ----

const entries = entriesOfAsync(kernelOn(sharedGpu));

/** softmax(query · keyᵀ · scale [+ mask]) · value in float32 on the GPU; nested arrays (or
 * shaped tensors) in, nested arrays out (matrices in, a matrix out, as attention.ts). Inputs are
 * checked first (AttentionInputError); then a device is made on first use and kept
 * (WebGpuUnavailableError when there is none). */
export const scaledDotProductAttention = entries.scaledDotProductAttention;

/** The same on flat row-major tensors ({ shape, data } with a Float32Array or Float64Array);
 * computed in float32, the output in query.data's type. */
export const scaledDotProductAttentionFlat = entries.scaledDotProductAttentionFlat;

/** Every step, as attention.ts returns them: the output is the kernel's; scores, logits and
 * weights [B..., Hq, Lq, Lk] are the readable port's, since the kernel holds them only a tile at a
 * time and never writes them out. */
export const attentionSteps = entries.attentionSteps;

/** The adapter the shared device runs on (made on first use). */
export async function adapterDescription(): Promise<AdapterDescription> {
  return (await sharedDevice()).attention.adapter;
}

// ---- The entries' work, on a device asked for only once the inputs are checked. ----

/** The kernel's three computations, on the device that `gpu` gives. */
function kernelOn(gpu: () => Promise<Gpu>): PortKernel<AttentionOptions, FlatAttentionOptions, true> {
  return {
    attend: (query, key, value, options = {}) => outputEntry(gpu, query, key, value, options),
    attendFlat: (query, key, value, options = {}) => flatEntry(gpu, query, key, value, options),
    attentionSteps: (query, key, value, options = {}) => stepsEntry(gpu, query, key, value, options),
  };
}

async function outputEntry(
  gpu: () => Promise<Gpu>,
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions,
): Promise<FlatTensor> {
  const problem = checkInputs(query, key, value, options);
  return { shape: problem.shapes.outputShape, data: await compute(await gpu(), problem) };
}

async function flatEntry(
  gpu: () => Promise<Gpu>,
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options: FlatAttentionOptions,
): Promise<FlatTensor> {
  const problem = checkFlatInputs(query, key, value, options);
  const output = await compute(await gpu(), problem);
  return { shape: problem.shapes.outputShape, data: outputOfType(output, problem.query) }; // query as read
}

async function stepsEntry(
  gpu: () => Promise<Gpu>,
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions,
): Promise<AttentionSteps> {
  const problem = checkInputs(query, key, value, options);
  const output = await compute(await gpu(), problem);
  return readableSteps(problem, () => output);
}

/** A device as the port holds it, with the WebGpuAttention that calls it. */
interface Device {
  readonly attention: WebGpuAttention;
  readonly gpu: Gpu;
}

let shared: Promise<Device> | null = null;

/** The shared device: made once, made again after it is lost or after making it failed. */
async function sharedDevice(): Promise<Device> {
  if (shared !== null) {
    const device = await shared.catch(() => null);
    if (device !== null && !device.gpu.lost) {
      return device;
    }
  }
  shared = makeDevice({});
  return shared;
}

async function sharedGpu(): Promise<Gpu> {
  return (await sharedDevice()).gpu;
}

/** A device and its pipeline, for calls of your own: keep it to skip the set-up (adapter, device,
 * shader compilation) on every call, and destroy() it when done. */
export async function createAttention(setup: WebGpuSetup = {}): Promise<WebGpuAttention> {
  return (await makeDevice(setup)).attention;
}

async function makeDevice(setup: WebGpuSetup): Promise<Device> {
  const gpu = (setup.gpu as GPU | undefined) ?? findGpu();
  let adapter: Awaited<ReturnType<GPU["requestAdapter"]>>;
  try {
    adapter = await gpu.requestAdapter(
      setup.powerPreference === undefined ? undefined : { powerPreference: setup.powerPreference },
    );
  } catch (error) {
    throw new WebGpuUnavailableError(`WebGPU gave no adapter: requestAdapter() failed (${String(error)})`);
  }
  if (adapter === null) {
    throw new WebGpuUnavailableError(
      "WebGPU has no adapter here (requestAdapter() gave null): the browser or binding found no GPU" +
        " it can use, nor a software one",
    );
  }
  let device: GPUDevice;
  try {
    // The adapter's own buffer limits, not WebGPU's defaults (128 and 256 MiB): larger problems
    // then go in one dispatch.
    device = await adapter.requestDevice({
      requiredLimits: {
        maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
        maxBufferSize: adapter.limits.maxBufferSize,
      },
    });
  } catch (error) {
    throw new WebGpuUnavailableError(`the WebGPU adapter gave no device: ${(error as Error).message}`);
  }
  const module = device.createShaderModule({ code: ATTENTION_WGSL });
  const messages = (await module.getCompilationInfo()).messages.filter((m) => m.type === "error");
  if (messages.length > 0) {
    device.destroy();
    const where = messages.map((m) => `line ${m.lineNum}: ${m.message}`).join("; ");
    throw new Error(`the attention shader did not compile on this device: ${where}`);
  }
  const pipeline = await device.createComputePipelineAsync({
    layout: "auto",
    compute: { module, entryPoint: "main" },
  });
  const limits: DispatchLimits = {
    maxStorageBufferBindingSize: Math.min(
      device.limits.maxStorageBufferBindingSize,
      device.limits.maxBufferSize,
      setup.limits?.maxStorageBufferBindingSize ?? Infinity,
    ),
    maxComputeWorkgroupsPerDimension: Math.min(
      device.limits.maxComputeWorkgroupsPerDimension,
      setup.limits?.maxComputeWorkgroupsPerDimension ?? Infinity,
    ),
  };
  const state: Gpu = { device, pipeline, limits, lost: false };
  void device.lost.then(() => {
    state.lost = true;
  });
  const own = async () => state;
  const attention: WebGpuAttention = {
    adapter: describeAdapter(adapter),
    limits,
    get lost() {
      return state.lost;
    },
    ...entriesOfAsync(kernelOn(own)),
    destroy() {
      state.lost = true;
      device.destroy();
    },
  };
  return { attention, gpu: state };
}

/** navigator.gpu, or WebGpuUnavailableError saying why there is none. */
function findGpu(): GPU {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu !== undefined) {
    return nav.gpu;
  }
  const inBrowser = typeof (globalThis as { window?: unknown }).window !== "undefined";
  throw new WebGpuUnavailableError(
    inBrowser
      ? "this browser offers no WebGPU (navigator.gpu is undefined): it needs a browser with WebGPU" +
          " enabled, on a secure context (https, 127.0.0.1 or a file:// page)"
      : "this JavaScript runtime offers no WebGPU (navigator.gpu is undefined); in Node pass" +
          " createAttention({ gpu }) a WebGPU binding's GPU object, such as the npm package webgpu's create([])",
  );
}

/** The adapter in words (adapter.info; older browsers had requestAdapterInfo() instead). */
export function describeAdapter(adapter: { readonly info?: AdapterInfo }): AdapterDescription {
  const info = adapter.info ?? {};
  const vendor = info.vendor ?? "";
  const architecture = info.architecture ?? "";
  const device = info.device ?? "";
  const description = info.description ?? "";
  const words = `${vendor} ${architecture} ${device} ${description}`;
  const fallback = info.isFallbackAdapter === true;
  const emulated = fallback || /swiftshader|llvmpipe|lavapipe|\bwarp\b|basic render|software/i.test(words);
  const named = [vendor, architecture, device].filter((x) => x !== "").join(" ") || description || "unnamed";
  return {
    vendor,
    architecture,
    device,
    description,
    emulated,
    summary: emulated ? `${named} (CPU emulation)` : named,
  };
}

// ---- Planning: which dispatches, within the device's limits. ----

/** A device with its pipeline, as the port holds it. */
interface Gpu {
  readonly device: GPUDevice;
  readonly pipeline: GPUComputePipeline;
  readonly limits: DispatchLimits;
  lost: boolean;
}

/** Inputs checked by inputs.ts, float32 or float64 (rounded to float32 on the way to the GPU). */
type Problem = CheckedInputs<Float64Array | Float32Array>;

/** One dispatch: query rows row0 .. row1 - 1 of slices slice0 .. slice1 - 1 (all rows when more
 * than one slice), with the ranges of key/value slices and mask cells they read. */
export interface Dispatch {
  readonly slice0: number;
  readonly slice1: number;
  readonly row0: number;
  readonly row1: number;
  readonly kv0: number; // key/value slices kv0 .. kv1 - 1
  readonly kv1: number;
  readonly mask0: number; // mask cells mask0 .. mask1 - 1, as given (not broadcast)
  readonly mask1: number;
}

/** The dispatches that compute the whole output, each within the limits: every buffer it binds
 * at most maxStorageBufferBindingSize bytes, at most maxComputeWorkgroupsPerDimension workgroups
 * along each dimension. Slices are grouped while they fit; a slice that does not fit alone is cut
 * into blocks of query rows. What cannot be cut (one key/value slice, the value columns, the mask
 * cells of one query block) and exceeds a limit is refused with kind "size", naming the limit. */
export function planDispatches(
  shapes: AttentionShapes,
  maskShape: readonly number[] | null,
  maskBytesPerCell: number,
  limits: DispatchLimits,
): Dispatch[] {
  const { queryLength: Lq, keyLength: Lk, features: E, valueFeatures: Ev } = shapes;
  const parts = slices(shapes, maskShape);
  const bytes = limits.maxStorageBufferBindingSize;
  const groups = limits.maxComputeWorkgroupsPerDimension;
  const refuse = (what: string, needed: number, limit: string) =>
    new AttentionInputError(
      "size",
      `the WebGPU port cannot fit ${what} in one dispatch: it needs ${String(needed)}, more than this` +
        ` device's ${limit}; the output is ${formatShape(shapes.outputShape)}`,
    );
  if (parts.length === 0 || Lq === 0 || Ev === 0) {
    return [];
  }
  const columnGroups = Math.ceil(Ev / VALUE_COLUMNS);
  if (columnGroups > groups) {
    throw refuse(`Ev = ${Ev} value columns`, columnGroups, `maxComputeWorkgroupsPerDimension = ${groups}`);
  }
  for (const [name, width] of [
    ["key", E],
    ["value", Ev],
  ] as const) {
    if (4 * Lk * width > bytes) {
      throw refuse(`one ${name} slice [${Lk}, ${width}]`, 4 * Lk * width, limitWords(bytes));
    }
  }
  const kvOf = (n: number) => (Lk === 0 ? 0 : parts[n].key / (Lk * E));
  // Mask cells read by rows row0 .. row1 - 1 of slices s0 .. s1 - 1. (Not in the slices' order:
  // a mask that broadcasts over a batch dim starts again at each batch.)
  const maskRange = (s0: number, s1: number, row0: number, row1: number): [number, number] => {
    if (maskShape === null || Lk === 0) {
      return [0, 0];
    }
    let [first, last] = [Infinity, -Infinity];
    for (let s = s0; s < s1; s++) {
      const { mask, maskI, maskJ } = parts[s];
      first = Math.min(first, mask + row0 * maskI);
      last = Math.max(last, mask + (row1 - 1) * maskI + (Lk - 1) * maskJ);
    }
    return [first, last + 1];
  };
  const fits = (s0: number, s1: number, row0: number, row1: number): boolean => {
    const rows = (s1 - s0) * (row1 - row0);
    const [m0, m1] = maskRange(s0, s1, row0, row1);
    const kvSlices = kvOf(s1 - 1) - kvOf(s0) + 1;
    return (
      4 * rows * Math.max(E, Ev) <= bytes &&
      4 * kvSlices * Lk * Math.max(E, Ev) <= bytes &&
      (m1 - m0) * maskBytesPerCell <= bytes &&
      SLICE_BYTES * (s1 - s0) <= bytes &&
      s1 - s0 <= groups &&
      Math.ceil((row1 - row0) / QUERY_BLOCK) <= groups
    );
  };
  const dispatch = (s0: number, s1: number, row0: number, row1: number): Dispatch => {
    const [mask0, mask1] = maskRange(s0, s1, row0, row1);
    return { slice0: s0, slice1: s1, row0, row1, kv0: kvOf(s0), kv1: kvOf(s1 - 1) + 1, mask0, mask1 };
  };

  const plan: Dispatch[] = [];
  for (let s0 = 0; s0 < parts.length; ) {
    if (fits(s0, s0 + 1, 0, Lq)) {
      // Whole slices: as many as fit. (Doubling, then halving back: O(log n) checks per dispatch.)
      let s1 = s0 + 1;
      let step = 1;
      while (step > 0) {
        if (s1 + step <= parts.length && fits(s0, s1 + step, 0, Lq)) {
          s1 += step;
          step *= 2;
        } else {
          step = Math.floor(step / 2);
        }
      }
      plan.push(dispatch(s0, s1, 0, Lq));
      s0 = s1;
      continue;
    }
    // One slice, a block of query rows at a time: as many whole blocks as fit.
    for (let row0 = 0; row0 < Lq; ) {
      let blocks = 0;
      while (
        row0 + blocks * QUERY_BLOCK < Lq &&
        fits(s0, s0 + 1, row0, Math.min(Lq, row0 + (blocks + 1) * QUERY_BLOCK))
      ) {
        blocks = blocks === 0 ? 1 : blocks * 2;
      }
      // (blocks doubled past the fit or the end: step back to the largest that fits)
      while (blocks > 0 && !fits(s0, s0 + 1, row0, Math.min(Lq, row0 + blocks * QUERY_BLOCK))) {
        blocks -= 1;
      }
      if (blocks === 0) {
        const [m0, m1] = maskRange(s0, s0 + 1, row0, Math.min(Lq, row0 + QUERY_BLOCK));
        throw refuse(
          `one block of ${QUERY_BLOCK} query rows`,
          Math.max(4 * QUERY_BLOCK * Math.max(E, Ev), (m1 - m0) * maskBytesPerCell),
          limitWords(bytes),
        );
      }
      const row1 = Math.min(Lq, row0 + blocks * QUERY_BLOCK);
      plan.push(dispatch(s0, s0 + 1, row0, row1));
      row0 = row1;
    }
    s0 += 1;
  }
  return plan;
}

function limitWords(bytes: number): string {
  return `maxStorageBufferBindingSize = ${String(bytes)} bytes`;
}

// ---- Running: buffers, one dispatch at a time, the output read back. ----

/** Refuse, before anything is allocated, a call that needs more than memoryLimit bytes: the
 * output read back (float32) and, on the device, the largest dispatch's buffers. */
function checkMemory(problem: Problem, plan: readonly Dispatch[], maskBytesPerCell: number): void {
  const { shapes, memoryLimit } = problem;
  const { queryLength: Lq, keyLength: Lk, features: E, valueFeatures: Ev } = shapes;
  let largest = 0;
  for (const d of plan) {
    const rows = (d.slice1 - d.slice0) * (d.row1 - d.row0);
    const device =
      4 * rows * (E + 2 * Ev) + // query, output and its read-back copy
      4 * (d.kv1 - d.kv0) * (Lk * (E + Ev) + (Lk + 1) * Ev) + // key, value, the NaN counts
      (d.mask1 - d.mask0) * maskBytesPerCell +
      SLICE_BYTES * (d.slice1 - d.slice0);
    largest = Math.max(largest, device);
  }
  const needed = 4 * product(shapes.outputShape) + largest;
  if (needed > memoryLimit) {
    throw new AttentionInputError(
      "size",
      `the WebGPU port needs ${String(needed)} bytes for the output ${formatShape(shapes.outputShape)}` +
        ` and its largest dispatch (${Lq} query rows per slice), more than memoryLimit =` +
        ` ${String(memoryLimit)}; pass a larger memoryLimit to compute them`,
    );
  }
}

/** The whole computation: output [B..., Hq, Lq, Ev] in float32. */
async function compute(gpu: Gpu, problem: Problem): Promise<Float32Array> {
  const { shapes, mask } = problem;
  const maskBytesPerCell = mask === null ? 0 : mask.bool !== null ? 1 : 4;
  const plan = planDispatches(shapes, mask?.shape ?? null, maskBytesPerCell, gpu.limits);
  checkMemory(problem, plan, maskBytesPerCell);
  const output = new Float32Array(product(shapes.outputShape)); // [B..., Hq, Lq, Ev]
  if (plan.length === 0) {
    return output;
  }
  if (gpu.lost) {
    throw new WebGpuUnavailableError("the WebGPU device was lost (or destroyed); make a new one");
  }
  const parts = slices(shapes, mask?.shape ?? null);
  for (const d of plan) {
    await runDispatch(gpu, problem, parts, d, output);
  }
  return output;
}

/** One dispatch: upload its inputs, run the shader, read its output rows back into `output`. */
async function runDispatch(
  gpu: Gpu,
  problem: Problem,
  parts: readonly Slice[],
  d: Dispatch,
  output: Float32Array,
): Promise<void> {
  const { device, pipeline } = gpu;
  const { shapes, mask } = problem;
  const { queryLength: Lq, keyLength: Lk, features: E, valueFeatures: Ev } = shapes;
  const sliceCount = d.slice1 - d.slice0;
  const rows = d.row1 - d.row0;
  const queryFrom = (d.slice0 * Lq + d.row0) * E; // contiguous: whole slices, or rows of one
  const outputFrom = (d.slice0 * Lq + d.row0) * Ev;
  const outputLength = sliceCount * rows * Ev;
  const float32 = (x: Float64Array | Float32Array, from: number, to: number) =>
    x instanceof Float32Array ? x.subarray(from, to) : new Float32Array(x.subarray(from, to));

  const value = float32(problem.value, d.kv0 * Lk * Ev, d.kv1 * Lk * Ev); // [kv slices, Lk, Ev]
  let maskWords: Uint8Array | Float32Array = new Uint8Array(0);
  let maskKind = 0;
  if (mask?.bool) {
    maskWords = mask.bool.subarray(d.mask0, d.mask1); // bytes, four to a 32-bit word
    maskKind = 1;
  } else if (mask?.float) {
    maskWords = float32(mask.float, d.mask0, d.mask1);
    maskKind = 2;
  }
  // Per slice (the shader's struct Slice): kv slice, first mask cell, and which keys its rows see
  // (key-range.ts's RowKeys, whose formula the shader evaluates).
  const table = new Int32Array((SLICE_BYTES / 4) * sliceCount);
  const tableFloats = new Float32Array(table.buffer); // the same bytes: the sink logit's field
  const range = problem.keys;
  for (let n = 0; n < sliceCount; n++) {
    const at = parts[d.slice0 + n];
    const keys = sliceKeys(range, at.index);
    const sink = problem.sinkLogits === null ? -Infinity : problem.sinkLogits[at.index % shapes.queryHeads];
    table.set(
      [
        (Lk * E === 0 ? 0 : at.key / (Lk * E)) - d.kv0,
        mask === null || Lk === 0 ? 0 : at.mask + d.row0 * at.maskI - d.mask0,
        keys.startShift,
        keys.endShift,
        keys.limit,
        keys.sinkEnd,
        0, // the sink logit, below
        Number.isNaN(sink)
          ? LOGIT_KIND.NOT_A_NUMBER
          : sink === Infinity
            ? LOGIT_KIND.PLUS_INFINITY
            : sink === -Infinity
              ? LOGIT_KIND.MASKED
              : LOGIT_KIND.FINITE,
      ],
      (SLICE_BYTES / 4) * n,
    );
    tableFloats[(SLICE_BYTES / 4) * n + 6] = Number.isFinite(sink) ? finiteFloat32(sink) : 0;
  }
  const params = new DataView(new ArrayBuffer(PARAMS_BYTES));
  const fields = [rows, d.row0, Lk, E, Ev, maskKind, parts[d.slice0].maskI, parts[d.slice0].maskJ];
  fields.forEach((x, n) => params.setUint32(4 * n, x, true));
  params.setFloat32(32, finiteFloat32(problem.scale), true);
  params.setFloat32(36, shaderSoftcap(problem.softcap), true);
  params.setUint32(40, accMayOverflow(value, Lk) ? 1 : 0, true);
  // Where a block may skip keys, the shader needs to know whether a skipped key's value is NaN or
  // ±inf in a column: per column, how many are before each key.
  const counts = seesEveryKey(range, Lq) ? null : nonFiniteBefore(value, d.kv1 - d.kv0, Lk, Ev);
  params.setUint32(44, counts === null ? 0 : 1, true);

  device.pushErrorScope("out-of-memory");
  device.pushErrorScope("validation");
  const buffers: GPUBuffer[] = [];
  const upload = (data: ArrayBufferView, usage: number): GPUBuffer => {
    const size = Math.max(4, Math.ceil(data.byteLength / 4) * 4); // no empty buffers; whole words
    const buffer = device.createBuffer({
      size,
      usage: usage | GPUBufferUsage.COPY_DST,
      mappedAtCreation: true,
    });
    new Uint8Array(buffer.getMappedRange()).set(
      new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
    );
    buffer.unmap();
    buffers.push(buffer);
    return buffer;
  };
  const storage = GPUBufferUsage.STORAGE;
  const bindings = [
    upload(params, GPUBufferUsage.UNIFORM),
    upload(float32(problem.query, queryFrom, queryFrom + sliceCount * rows * E), storage),
    upload(float32(problem.key, d.kv0 * Lk * E, d.kv1 * Lk * E), storage),
    upload(value, storage),
    upload(maskWords, storage),
    upload(table, storage),
    upload(counts ?? new Uint32Array(1), storage),
  ];
  const out = device.createBuffer({
    size: Math.max(4, 4 * outputLength),
    usage: storage | GPUBufferUsage.COPY_SRC,
  });
  const readBack = device.createBuffer({
    size: Math.max(4, 4 * outputLength),
    usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST,
  });
  buffers.push(out, readBack);
  bindings.push(out);
  try {
    const bindGroup = device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: bindings.map((buffer, binding) => ({ binding, resource: { buffer } })),
    });
    const encoder = device.createCommandEncoder();
    const pass = encoder.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    // x: blocks of query rows, y: (batch, head) slices, z: groups of 64 value columns.
    pass.dispatchWorkgroups(Math.ceil(rows / QUERY_BLOCK), sliceCount, Math.ceil(Ev / VALUE_COLUMNS));
    pass.end();
    encoder.copyBufferToBuffer(out, 0, readBack, 0, 4 * outputLength);
    device.queue.submit([encoder.finish()]);
    const validation = await device.popErrorScope();
    const memory = await device.popErrorScope();
    if (memory !== null) {
      throw new AttentionInputError(
        "size",
        `the GPU could not allocate the buffers of a dispatch of ${sliceCount * rows} query rows` +
          ` (${memory.message}); the output is ${formatShape(shapes.outputShape)}`,
      );
    }
    if (validation !== null) {
      throw new Error(`the WebGPU device refused the attention dispatch: ${validation.message}`);
    }
    await readBack.mapAsync(GPUMapMode.READ);
    output.set(new Float32Array(readBack.getMappedRange(), 0, outputLength), outputFrom);
    readBack.unmap();
  } finally {
    for (const buffer of buffers) {
      buffer.destroy();
    }
  }
}

/** x rounded to float32, held within float32's range: the shader never sees an infinity (a scale
 * float32 cannot hold puts the case outside the contract for this port; see docs/design.md). */
function finiteFloat32(x: number): number {
  const largest = 3.4028234663852886e38;
  return Math.max(-largest, Math.min(largest, Math.fround(x)));
}

/** softcap for the shader: past 2^140 (1.4e42), |logit / softcap| < 2^-12 for every float32 logit,
 * where tanh(z) = z to float32's precision, so softcap · tanh(logit / softcap) is the logit: 0, no
 * softcap. Otherwise softcap within float32's range. */
function shaderSoftcap(softcap: number): number {
  return softcap > 2 ** 140 ? 0 : finiteFloat32(softcap);
}

/** Whether acc = Σ p · value (p <= 1) could overflow float32 for one slice's Lk keys: the largest
 * finite |value| times Lk reaches 2^127. The shader then computes every cell with the weights divided
 * first (normalisedCell) instead of testing a sum for infinity, which WGSL does not promise to see. */
function accMayOverflow(value: Float32Array, Lk: number): boolean {
  let largest = 0;
  for (const y of value) {
    const size = Math.abs(y);
    if (size > largest && size !== Infinity) {
      largest = size; // NaN compares false: skipped
    }
  }
  return largest * Lk >= 2 ** 127;
}

/** Per key/value slice and value column, how many of the key rows before each key (0 .. Lk) hold
 * NaN or ±inf there ([kv slices, Lk + 1, Ev]); null where none does. A block skips the keys none of
 * its rows sees, and such a value must still make the row NaN (0 · NaN is NaN in the readable port,
 * even for a key the row cannot see): the shader counts those in the keys it skipped. */
function nonFiniteBefore(value: Float32Array, kvSlices: number, Lk: number, Ev: number): Uint32Array | null {
  const counts = new Uint32Array(Math.max(1, kvSlices * (Lk + 1) * Ev)); // [kv slices, Lk + 1, Ev]
  let any = false;
  for (let kv = 0; kv < kvSlices; kv++) {
    for (let j = 0; j < Lk; j++) {
      const at = (kv * (Lk + 1) + j) * Ev;
      for (let t = 0; t < Ev; t++) {
        const y = value[(kv * Lk + j) * Ev + t];
        const special = y - y !== 0; // NaN exactly when y is NaN or ±inf
        any ||= special;
        counts[at + Ev + t] = counts[at + t] + (special ? 1 : 0);
      }
    }
  }
  return any ? counts : null;
}

/** The output in the type of query.data: Float32Array as computed, or widened to Float64Array. */
function outputOfType(output: Float32Array, like: Float64Array | Float32Array): Float32Array | Float64Array {
  return like instanceof Float32Array ? output : new Float64Array(output);
}

// `node typescript/src/webgpu.ts` prints the tutorial's example's 3 x 2 result where Node has a
// WebGPU; Node has none of its own, and then it prints why.
if (import.meta.main) {
  const { query, key, value } = readable.TUTORIAL_EXAMPLE;
  scaledDotProductAttention(query, key, value).then(
    (output) => console.log(output), // 3 x 2
    (error: Error) => {
      console.error(`${error.name}: ${error.message}`);
      process.exitCode = 1;
    },
  );
}
