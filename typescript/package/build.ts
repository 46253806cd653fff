/**
 * Builds the npm package into dist/: compiled ESM .js and .d.ts of the ports that package.json's
 * `exports` names, with what they import, and the SIMD kernel's WebAssembly builds beside them.
 *
 *     npm run build      (npm pack and npm publish run it first, as `prepack`)
 *
 * The repository runs its .ts files directly (Node strips the types); a package cannot, since Node
 * does not strip types under node_modules and Node 20 does not strip them at all. tsc compiles the
 * same files with tsconfig.build.json, rewriting the `.ts` of relative imports to `.js`. dist/ keeps
 * the layout of typescript/ (src/, wasm/, wasm/build/), so every path a module computes from its
 * own URL holds in both.
 *
 * The entry points are read from `exports` (an entry "./x": "./dist/src/x.js", or one file per
 * condition such as "node" and "default", is compiled from typescript/src/x.ts), which
 * `attention-port contract` writes from contract/ports.json: a new port is its row there. Modules
 * that no import names but a URL does (the browser's SIMD worker) are listed in URL_MODULES. The
 * kernel's builds come from scripts/setup, and a build older than kernel.ts is refused here rather
 * than packed.
 *
 * The build owns dist/src/, dist/wasm/ and dist/conformance/ only (package.json's `files`, OWNED):
 * anything else in dist/, such as a wheel that `pip wheel -w dist` wrote, is left alone and is not
 * packed. They are written whole or not at all: into a scratch folder, then renamed into place.
 */

import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

import { rawCases } from "../conformance/fixture-data.ts";
import { BUILDS, buildIsFresh, STAMP_FILE } from "../wasm/stamp.ts";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const DIST = join(ROOT, "dist");

/** The folders of dist/ that this build writes (and package.json's `files` packs). */
export const OWNED = ["src", "wasm", "conformance"] as const;

/** Modules reached by a URL, not an import (tsc would not follow them). */
const URL_MODULES = ["typescript/src/simd-worker-web.ts"];

interface Manifest {
  readonly exports: Record<string, string | Readonly<Record<string, string>>>;
}

/** typescript/src/x.ts for each file "./dist/src/x.js" that `exports` names, under any condition
 * but "types" (package.json itself is not compiled). */
export function entryPoints(manifest: Manifest): string[] {
  const entries: string[] = [];
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    const files =
      typeof target === "string"
        ? [target]
        : Object.entries(target)
            .filter(([condition]) => condition !== "types")
            .map(([, file]) => file);
    for (const file of files) {
      if (file === "./package.json") {
        continue;
      }
      const match = /^\.\/dist\/(.+)\.js$/.exec(file);
      if (match === null) {
        throw new Error(`package.json exports ${subpath} as ${file}, not a ./dist/**/*.js file`);
      }
      entries.push(join("typescript", `${match[1]}.ts`));
    }
  }
  return entries;
}

// JSON has no NaN, infinities or -0: these strings stand for them in the embedded cases.
const SPECIAL_NUMBERS = ["NaN", "Infinity", "-Infinity", "-0"];

/** The conformance kit's cases as a module of their own: the checkout's fixture-data.ts reads
 * fixtures/ with Node's fs, the package's carries every case inside it (one JSON text, parsed on
 * first use), so that the kit imports nothing of Node and needs no bundler setting in a page. */
export function embeddedFixtureModule(): string {
  const text = JSON.stringify(rawCases(), (_, value: unknown) =>
    typeof value === "number" && (!Number.isFinite(value) || Object.is(value, -0))
      ? Object.is(value, -0)
        ? "-0"
        : String(value)
      : value,
  );
  return [
    "// The conformance kit's fixture cases, embedded by typescript/package/build.ts from fixtures/.",
    `const TEXT = ${JSON.stringify(text)};`,
    `const SPECIAL = new Map(${JSON.stringify(SPECIAL_NUMBERS)}.map((word) => [word, Number(word)]));`,
    "let cases = null;",
    "/** Every fixture case, parsed once. */",
    "export function rawCases() {",
    '  cases ??= JSON.parse(TEXT, (_, value) => (typeof value === "string" && SPECIAL.has(value) ? SPECIAL.get(value) : value));',
    "  return cases;",
    "}",
    "",
  ].join("\n");
}

function main(): void {
  if (!buildIsFresh()) {
    throw new Error("the SIMD kernel build is missing or older than its source; run scripts/setup first");
  }
  const manifest = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as Manifest;
  const scratch = join(ROOT, `dist.tmp-${process.pid}`);
  const config = join(ROOT, `tsconfig.build.tmp-${process.pid}.json`);
  try {
    // tsc takes either a project or files, so the entry points go into a config of their own.
    const files = [...entryPoints(manifest), ...URL_MODULES, "typescript/src/webassembly.d.ts"];
    writeFileSync(
      config,
      JSON.stringify({
        extends: "./tsconfig.build.json",
        files,
        compilerOptions: { outDir: relative(ROOT, scratch) },
      }),
    );
    const tsc = join(ROOT, "node_modules", "typescript", "bin", "tsc");
    // Everything this prints goes to stderr, so that `npm pack --json` (which runs this first)
    // still prints nothing but its JSON on stdout.
    const compiled = spawnSync(process.execPath, [tsc, "-p", config], { cwd: ROOT, stdio: ["ignore", 2, 2] });
    if (compiled.status !== 0) {
      throw new Error(`tsc failed (exit ${String(compiled.status ?? compiled.signal)})`);
    }
    const kernelDir = join(scratch, "wasm", "build");
    mkdirSync(kernelDir, { recursive: true });
    for (const file of [...Object.values(BUILDS).map((build) => build.file), STAMP_FILE]) {
      cpSync(file, join(kernelDir, relative(dirname(STAMP_FILE), file)));
    }
    // The kit's cases go inside the package; the fixture reader (Node only) that the checkout's
    // fixture-data.ts imports does not.
    writeFileSync(join(scratch, "conformance", "fixture-data.js"), embeddedFixtureModule());
    rmSync(join(scratch, "golden"), { recursive: true, force: true });
    mkdirSync(DIST, { recursive: true });
    for (const folder of OWNED) {
      rmSync(join(DIST, folder), { recursive: true, force: true });
      renameSync(join(scratch, folder), join(DIST, folder));
    }
  } finally {
    rmSync(config, { force: true });
    rmSync(scratch, { recursive: true, force: true });
  }
  const built = OWNED.map((folder) => `${relative(process.cwd(), join(DIST, folder))}/`).join(", ");
  console.error(`built ${built} from ${entryPoints(manifest).join(", ")}`);
}

if (import.meta.main) {
  main();
}
