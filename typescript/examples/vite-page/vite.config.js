// The Vite settings a consumer of attention-port's SIMD port writes: none are needed for the
// kernel itself (Vite emits the .wasm and the worker that simd.js finds by import.meta.url, in
// the dev server and in a build). The headers make the page cross-origin isolated, so that the
// kernel's memory can be shared with Web Workers (`workers`); without them the SIMD port runs on
// one thread. The worker is an ES module.
const isolated = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
};

export default {
  server: { headers: isolated },
  preview: { headers: isolated },
  worker: { format: "es" },
  build: { target: "es2022" },
};
