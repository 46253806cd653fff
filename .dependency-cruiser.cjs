// Imports in typescript/ go one way (`npm run deps`, run by scripts/test): the ports import only
// ports, nothing imports a command's entry point, no circles. Python's twin is the import-linter
// contracts in pyproject.toml.

/** The ports and what they compute with: typescript/src/ holds nothing else (src/generated/: what is
 * generated from contract/). A port runs in a consumer's program (and in a browser, bundled), so it
 * must not pull in the harness, a command or a build script. */
const PORTS = "^typescript/src/(generated/)?[^/]+[.]ts$";
/** Node's own modules and files, which a browser bundle cannot import: only simd-node.ts, the SIMD
 * port's Node entry, may (package.json gives a browser simd.ts instead). */
const NODE_ONLY = "^typescript/src/simd-node[.]ts$";
/** What the ports may import besides each other: the SIMD kernel's build files and stamp. */
const PORT_DATA = "^typescript/wasm/stamp[.]ts$";
/** Entry points, each run as a process (by a person, scripts/setup or the Python harness): what
 * another module needs of one belongs in a module of its own. */
const ENTRIES =
  "^typescript/(harness/cli|learner/worker|bench/worker|pages/webgpu-page|wasm/build|explorer/build|package/build|conformance/peers)[.]ts$";
/** The tests exercise the entry points' functions, and may. */
const TESTS = "^typescript/test/";

/** The rooms the Python package has too, each above the ones it may import (pyproject.toml's
 * import-linter layers): check's worker (learner/) runs a learner's code and answers as verify's
 * runner (harness/) does; the runner calls and judges the ports through the conformance kit
 * (conformance/, which holds TypeScript's judge); the kit reads the fixtures through the reader
 * (golden/); all of them compute with the ports (src/). files.ts, the atomic writer every command
 * shares, imports nothing of the tree. The commands above them (bench/, pages/, explorer/,
 * package/) may import any room; no room imports a command (no-entry-imports). */
const ROOMS = [
  { name: "learner", room: "^typescript/learner/", may: ["^typescript/(learner|harness|conformance|golden)/", PORTS] },
  { name: "harness", room: "^typescript/harness/", may: ["^typescript/(harness|conformance|golden)/", PORTS] },
  { name: "conformance", room: "^typescript/conformance/", may: ["^typescript/(conformance|golden)/", PORTS] },
  { name: "golden", room: "^typescript/golden/", may: ["^typescript/golden/", PORTS] },
  { name: "files", room: "^typescript/files[.]ts$", may: [] },
];

module.exports = {
  forbidden: [
    {
      name: "ports-import-only-ports",
      comment: "a port imports only the ports, inputs.ts, batching.ts and the kernel's stamp",
      severity: "error",
      from: { path: PORTS },
      to: { path: "^typescript/", pathNot: [PORTS, PORT_DATA] },
    },
    {
      name: "ports-run-in-a-browser",
      comment: "a port imports no node: module (the browser bundles it), simd-node.ts excepted",
      severity: "error",
      from: { path: PORTS, pathNot: NODE_ONLY },
      to: { dependencyTypes: ["core"] },
    },
    {
      name: "ports-reach-no-node-only-file",
      comment: "what a browser bundle takes (the ports but simd-node.ts) imports neither simd-node.ts nor the stamp",
      severity: "error",
      from: { path: PORTS, pathNot: NODE_ONLY },
      to: { path: [NODE_ONLY, PORT_DATA] },
    },
    ...ROOMS.map(({ name, room, may }) => ({
      name: `${name}-imports-down`,
      comment: "a room imports only itself, the rooms below it and the ports (ROOMS)",
      severity: "error",
      from: { path: room },
      to: { path: "^typescript/", pathNot: may },
    })),
    {
      name: "no-entry-imports",
      comment: "a command's or build script's entry point is run, never imported (tests excepted)",
      severity: "error",
      from: { pathNot: TESTS },
      to: { path: ENTRIES },
    },
    {
      name: "no-circular",
      comment: "no module imports, through others, itself",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "not-to-unresolvable",
      comment: "every import names a file or package that is there",
      severity: "error",
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    // TypeScript 7 has no JavaScript API for dependency-cruiser to parse with; swc (a pinned dev
    // dependency) parses the .ts files, type-only imports included.
    parser: "swc",
    includeOnly: "^typescript/",
    exclude: { path: ["^typescript/bench-peers/", "^typescript/wasm/kernel[.]ts$"] },
    doNotFollow: { path: "node_modules" },
  },
};
