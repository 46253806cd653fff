/**
 * The ports the explorer can compute with, behind one asynchronous interface.
 *
 * Every port has the same contract, so the page shows the same numbers (within the tolerance rule's
 * budget) whichever computes them; switching is a way to see that, on the tutorial example or on any
 * fixture case. The interface is asynchronous because a GPU port is: it hands its work to the
 * device and gets the output back later. The synchronous ports are wrapped in a resolved promise.
 *
 * Each backend returns every step (scores, logits, weights, output). A port that never holds the
 * [Lq, Lk] steps in natural units (the SIMD kernel keeps log2-unit logits a tile at a time; a GPU
 * kernel keeps them on the device) gets them from the readable port, and only its output is its own:
 * `diagnostics` says which.
 *
 * The backends are the port table's rows with an explorer backend (contract/ports.json: its name and
 * label; the row's module, Node entry, dtype and records_steps give the rest), generated into
 * generated/backends.ts. Adding one is its row there, its module in MODULES below and, if it cannot
 * always run, its check in UNAVAILABLE: `stepsWithOutputOf` turns a port's
 * scaledDotProductAttention, synchronous or not, into a backend.
 */

import type { Dtype } from "../conformance/judge.ts";
import type { AttentionOptions, AttentionSteps, NestedArray, TensorInput } from "../src/attention.ts";
import * as readable from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import * as simd from "../src/simd.ts";
import * as webgpu from "../src/webgpu.ts";
import { BACKEND_ROWS, type BackendName } from "./generated/backends.ts";

export interface Backend {
  readonly name: string; // the picker's value, and the ?backend= of the page's address
  readonly label: string; // what the picker shows
  readonly source: string; // the file that computes the output, repository-relative
  readonly nodeSource?: string; // the file a Node program in the repository imports, where not `source`
  readonly diagnostics: "own" | "readable"; // who computes scores, logits and weights
  readonly dtype: Dtype; // what the output is computed in: the tolerance rule's unit roundoff
  /** null when the backend can run in this page, else why not (said beside the picker). */
  unavailable(): Promise<string | null>;
  /** Every step, as attention.ts's attentionSteps returns them; rejects with the port's own
   * AttentionInputError on bad input. */
  steps(
    query: TensorInput,
    key: TensorInput,
    value: TensorInput,
    options: AttentionOptions,
  ): Promise<AttentionSteps>;
}

type Attend = (
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions,
) => NestedArray | Promise<NestedArray>;
type AttendSteps = (
  query: TensorInput,
  key: TensorInput,
  value: TensorInput,
  options: AttentionOptions,
) => AttentionSteps | Promise<AttentionSteps>;

/** A backend whose output is `attend`'s and whose scores, logits and weights are the readable
 * port's. The readable port runs first, so bad input meets the same checks and messages as on
 * every other backend before `attend` is called. */
export function stepsWithOutputOf(backend: Omit<Backend, "steps" | "diagnostics">, attend: Attend): Backend {
  return {
    ...backend,
    diagnostics: "readable",
    async steps(query, key, value, options) {
      const steps = readable.attentionSteps(query, key, value, options);
      const output = await attend(query, key, value, options); // [B..., Hq, Lq, Ev]
      return { ...steps, output };
    },
  };
}

const always = async () => null;

/** The SIMD kernel's builds as build.ts writes them into the page (base64; null where a build was
 * missing or stale when the page was built). */
declare global {
  var EXPLORER_SIMD_KERNEL: Record<simd.BuildName, string | null> | undefined;
}

/** Whether the SIMD kernel can run here, loaded the package's own way (initSimd, from the builds
 * carried in the page: nothing is fetched). It needs a shared WebAssembly memory, which the page
 * has on one thread. */
async function simdUnavailable(): Promise<string | null> {
  const carried = globalThis.EXPLORER_SIMD_KERNEL; // the page's window
  if (!carried?.baseline) {
    return "the SIMD kernel was not built when this page was built: run scripts/setup";
  }
  const bytes = (text: string | null) =>
    text === null ? undefined : Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  try {
    await simd.initSimd({ relaxed: bytes(carried.relaxed), baseline: bytes(carried.baseline) });
    return null;
  } catch (error) {
    return `the WebAssembly kernel cannot load in this page: ${(error as Error).message}`;
  }
}

/** Whether WebGPU can run here: the browser has navigator.gpu (WebGPU on, a secure context) and
 * gives an adapter. The adapter is asked for once, when the page starts, so that a browser without
 * one shows the backend disabled rather than failing when it is chosen (Chromium then warns "No
 * available adapters." on the console: its own line, not the page's). The device is made only
 * when the backend computes. */
async function webgpuUnavailable(): Promise<string | null> {
  const gpu = (globalThis as { navigator?: { gpu?: { requestAdapter(): Promise<unknown> } } }).navigator?.gpu;
  if (gpu === undefined) {
    return "this browser has no WebGPU (navigator.gpu)";
  }
  try {
    return (await gpu.requestAdapter()) === null ? "no WebGPU adapter in this browser" : null;
  } catch (error) {
    return `no WebGPU adapter in this browser (${(error as Error).message})`;
  }
}

/** What each backend computes with: the module of its row's port. A port that records its own steps
 * gives them all (attentionSteps); one that does not gives its output (scaledDotProductAttention)
 * over the readable port's steps. Keyed by the generated names, so that tsc asks for every row. */
const MODULES: Record<BackendName, { attentionSteps: AttendSteps; scaledDotProductAttention: Attend }> = {
  readable,
  flash,
  simd,
  webgpu,
};

/** Why a backend cannot run in this page; a backend missing here always can. */
const UNAVAILABLE: Partial<Record<BackendName, () => Promise<string | null>>> = {
  simd: simdUnavailable,
  webgpu: webgpuUnavailable,
};

function backendOf(row: (typeof BACKEND_ROWS)[number]): Backend {
  const module = MODULES[row.name];
  const { diagnostics, ...about } = row;
  const backend = { ...about, unavailable: UNAVAILABLE[row.name] ?? always };
  if (diagnostics === "readable") {
    return stepsWithOutputOf(backend, module.scaledDotProductAttention);
  }
  return {
    ...backend,
    diagnostics,
    steps: async (query, key, value, options) => module.attentionSteps(query, key, value, options),
  };
}

/** The table's rows with an explorer backend (typescript/explorer/generated/backends.ts), in order. */
export const BACKENDS: Backend[] = BACKEND_ROWS.map(backendOf);

export const DEFAULT_BACKEND = "readable";

export function backendNamed(name: string): Backend | undefined {
  return BACKENDS.find((b) => b.name === name);
}
