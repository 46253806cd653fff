// The Vite settings a consumer of attention-port's SIMD port writes. The headers make the page
// cross-origin isolated, so that the kernel's memory can be shared with Web Workers (`workers`);
// without them the SIMD port runs on one thread. The package is left out of the dev server's
// dependency pre-bundling, which would move its modules away from the .wasm and worker they find
// by import.meta.url.
const isolated = {
  "Cross-Origin-Opener-Policy": "same-origin",
  "Cross-Origin-Embedder-Policy": "require-corp",
};

export default {
  server: { headers: isolated },
  preview: { headers: isolated },
  optimizeDeps: { exclude: ["attention-port"] },
  worker: { format: "es" },
  build: { target: "es2022" },
};
