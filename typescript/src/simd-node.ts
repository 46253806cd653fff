/**
 * The SIMD port in Node: simd.ts with Node's host. The kernel's builds are read from disk when
 * first needed (no initSimd call is needed), `workers` are worker_threads, and
 * ATTENTION_PORT_SIMD_BUILD=baseline (or relaxed) forces a build, e.g. to hold the fallback to the
 * fixtures on a machine that has relaxed SIMD; unset or "auto" picks by WebAssembly.validate.
 *
 * `attention-port/simd` is this module under Node (package.json's "node" condition) and simd.ts
 * elsewhere (a browser bundle imports no node: module). This module is also the worker's: a worker
 * thread started with `simdWorker` in its workerData serves jobs (simd-worker.ts).
 */

import { readFileSync } from "node:fs";
import { isMainThread, Worker, workerData } from "node:worker_threads";

import { BUILDS, buildIsFresh } from "../wasm/stamp.ts";
import { TUTORIAL_EXAMPLE } from "./attention.ts";
import { type BuildName, scaledDotProductAttention, useSimdHost } from "./simd.ts";
import { serveJobs, type WorkerStart } from "./simd-worker.ts";

export * from "./simd.ts";

/** ATTENTION_PORT_SIMD_BUILD, checked (one line naming it when it is neither build nor "auto"). */
function buildFromEnvironment(): BuildName | "auto" {
  const wanted = process.env.ATTENTION_PORT_SIMD_BUILD ?? "auto";
  if (wanted === "auto" || wanted === "relaxed" || wanted === "baseline") {
    return wanted;
  }
  throw new Error(
    `ATTENTION_PORT_SIMD_BUILD must be relaxed, baseline or auto, got ${JSON.stringify(wanted)}`,
  );
}

const environmentBuild = buildFromEnvironment(); // a bad value fails on import, not on a call

useSimdHost({
  readBuild(build) {
    if (!buildIsFresh()) {
      throw new Error(
        "the SIMD kernel (typescript/wasm/build/) is missing or older than typescript/wasm/kernel.ts;" +
          " run scripts/setup (or node typescript/wasm/build.ts)",
      );
    }
    return readFileSync(BUILDS[build].file);
  },
  environmentBuild: () => environmentBuild,
  startWorker(simdWorker) {
    const worker = new Worker(new URL(import.meta.url), { workerData: { simdWorker } });
    worker.unref(); // never keeps the process up
    // One that cannot start (no memory left for its own engine) takes no items: the others and
    // the calling thread compute them, with the same result. Unheard, its error would end the process.
    worker.on("error", () => {});
    return worker;
  },
  canBlock: true,
});

const start = (workerData as { simdWorker?: WorkerStart } | null)?.simdWorker;
if (!isMainThread && start) {
  serveJobs(start);
}

// `node typescript/src/simd-node.ts` prints the tutorial's example's 3 x 2 result, through the SIMD port.
if (import.meta.main) {
  const { query, key, value } = TUTORIAL_EXAMPLE;
  console.log(scaledDotProductAttention(query, key, value)); // 3 x 2
}
