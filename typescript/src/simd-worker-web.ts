/**
 * A browser's SIMD worker (simd.ts, option `workers`): a Web Worker module that takes its start
 * (the compiled kernel, the shared memory, its slot) in its first message and serves jobs from
 * then on (simd-worker.ts). simd.ts starts it only where the page is cross-origin isolated.
 */

import { serveJobs, type WorkerStart } from "./simd-worker.ts";

/** The worker's global scope, as far as this module uses it (the ports compile without the DOM library). */
interface WorkerScope {
  addEventListener(
    type: "message",
    listener: (event: { data: { simdWorker: WorkerStart } }) => void,
    options: { once: true },
  ): void;
}

(globalThis as unknown as WorkerScope).addEventListener(
  "message",
  (event) => serveJobs(event.data.simdWorker),
  {
    once: true,
  },
);
