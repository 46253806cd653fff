// Generated from contract/ports.json by `attention-port contract` (scripts/generate-contract): do not
// edit. The rows with an explorer backend, in the table's order; backends.ts gives each its
// computation.

export const BACKEND_ROWS = [
  {
    name: "readable",
    label: "readable loops (attention.ts)",
    source: "typescript/src/attention.ts",
    diagnostics: "own",
    dtype: "float64",
  },
  {
    name: "flash",
    label: "tiled online softmax (flash.ts)",
    source: "typescript/src/flash.ts",
    diagnostics: "own",
    dtype: "float64",
  },
  {
    name: "simd",
    label: "WebAssembly SIMD (simd.ts)",
    source: "typescript/src/simd.ts",
    nodeSource: "typescript/src/simd-node.ts",
    diagnostics: "readable",
    dtype: "float64",
  },
  {
    name: "webgpu",
    label: "WebGPU compute shader, float32 (webgpu.ts)",
    source: "typescript/src/webgpu.ts",
    diagnostics: "readable",
    dtype: "float32",
  },
] as const;

/** A backend's name: the picker's value, and the ?backend= of the page's address. */
export type BackendName = (typeof BACKEND_ROWS)[number]["name"];
