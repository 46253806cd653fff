/**
 * The SIMD port's work sharing (simd.ts, option `workers`): a worker thread, and the loop that
 * hands out work items, run the same way by the calling thread and by every worker.
 *
 * All threads share one WebAssembly memory. simd.ts writes a job there (the inputs, a job
 * descriptor, the item count) and opens it under a new generation number; every thread then claims
 * items one at a time with a compare-and-swap on one 64-bit word, (generation << 32) | next item,
 * computes each with the kernel into its own scratch, and counts it done. A claim names its
 * generation, so a thread that wakes late can never take an item of a later job. Each item writes
 * its own output rows, the same bits whichever thread computes it: the result does not depend on
 * the number of workers or on who did what.
 *
 * This module starts nothing: a thread runs `serveJobs` from its environment's entry, Node's
 * worker_threads from simd-node.ts, a browser's Web Worker from simd-worker-web.ts.
 */

/** Int32 slots of the control block (the first 8 bytes are the 64-bit claim word). */
export const CONTROL = {
  DONE: 2, // items finished in this job
  COUNT: 3, // items in this job
  WAKE: 4, // the job's generation; workers sleep on this slot
  JOB: 5, // byte offset of the job descriptor
  SCRATCH: 6, // byte offset of scratch slot 0
  STRIDE: 7, // bytes per scratch slot
  BYTES: 8, // 4: float32 kernel, 8: float64 kernel
  HELPERS: 9, // workers that take part (worker k joins when k <= HELPERS)
  READY: 10, // workers started
  FAILED: 11, // set when a worker's item threw
} as const;
export const CONTROL_BYTES = 64;

/** The kernel functions a thread needs. */
export interface ItemRunner {
  runItemF32(job: number, item: number, scratch: number): void;
  runItemF64(job: number, item: number, scratch: number): void;
}

/** Claim and compute items of generation `generation` until none is left; `slot` picks the
 * scratch. Returns when every item is claimed (others may still be computing theirs). */
export function claimItems(
  control: Int32Array,
  claim: BigInt64Array,
  generation: number,
  kernel: ItemRunner,
  slot: number,
): void {
  const tag = BigInt(generation >>> 0) << 32n;
  for (;;) {
    const word = Atomics.load(claim, 0);
    if ((word & ~0xffffffffn) !== tag) {
      return; // another job now: nothing of ours is left
    }
    const item = Number(word & 0xffffffffn);
    if (item >= Atomics.load(control, CONTROL.COUNT)) {
      return;
    }
    if (Atomics.compareExchange(claim, 0, word, word + 1n) !== word) {
      continue; // someone else took it; look again
    }
    const job = Atomics.load(control, CONTROL.JOB) >>> 0;
    const scratch =
      (Atomics.load(control, CONTROL.SCRATCH) >>> 0) + slot * Atomics.load(control, CONTROL.STRIDE);
    try {
      if (Atomics.load(control, CONTROL.BYTES) === 4) {
        kernel.runItemF32(job, item, scratch);
      } else {
        kernel.runItemF64(job, item, scratch);
      }
    } catch (error) {
      Atomics.store(control, CONTROL.FAILED, 1);
      if (slot === 0) {
        throw error;
      }
    } finally {
      Atomics.add(control, CONTROL.DONE, 1);
      Atomics.notify(control, CONTROL.DONE);
    }
  }
}

/** What simd.ts hands a worker at start. */
export interface WorkerStart {
  readonly module: WebAssembly.Module;
  readonly memory: WebAssembly.Memory;
  readonly control: number; // byte offset of the control block
  readonly index: number; // 1, 2, ...: the worker's scratch slot (0 is the calling thread's)
}

/** A started worker thread, as simd.ts keeps it (Node's Worker or a browser's). */
export interface SimdThread {
  terminate(): unknown;
}

/** A worker's life: the kernel instantiated on the shared memory, then, for each job simd.ts
 * opens, the items it can claim. Never returns; the thread ends with its process or page. */
export function serveJobs(start: WorkerStart): never {
  const { module, memory, control, index } = start;
  const kernel = new WebAssembly.Instance(module, { env: { memory } }).exports as unknown as ItemRunner;
  const slots = new Int32Array(memory.buffer, control, CONTROL_BYTES / 4);
  const claim = new BigInt64Array(memory.buffer, control, 1);
  let seen = Atomics.load(slots, CONTROL.WAKE);
  Atomics.add(slots, CONTROL.READY, 1);
  Atomics.notify(slots, CONTROL.READY);
  for (;;) {
    Atomics.wait(slots, CONTROL.WAKE, seen); // asleep until simd.ts opens a job
    seen = Atomics.load(slots, CONTROL.WAKE);
    if (index <= Atomics.load(slots, CONTROL.HELPERS)) {
      claimItems(slots, claim, seen, kernel, index);
    }
  }
}
