/**
 * Builds the SIMD port's WebAssembly kernel (typescript/wasm/kernel.ts, AssemblyScript) with `asc`.
 *
 *     node typescript/wasm/build.ts           build what is stale (scripts/setup runs this)
 *     node typescript/wasm/build.ts --check   exit 1 if a build is missing or stale, build nothing
 *
 * Two builds of the same source, both with 128-bit SIMD and a shared, imported memory (so that
 * worker threads can run the same instance's code on the same data):
 *   kernel.relaxed.wasm  + relaxed SIMD: fused multiply-add (relaxed_madd) where the CPU has it
 *   kernel.wasm          without: multiply then add, for engines where relaxed SIMD does not validate
 * The outputs are not committed (typescript/wasm/build/ is ignored). Next to them, kernel.stamp holds
 * the sha256 of what they were built from (the kernel source, the flags, the asc version) and of
 * each .wasm as written: simd.ts refuses to load builds that are stale or changed since, and a test
 * checks it too. The builds' files, flags and stamp are stamp.ts's, which simd.ts reads at run time
 * (this script is run, never imported).
 */

import { mkdirSync, renameSync, writeFileSync } from "node:fs";

import {
  BUILD_DIR,
  BUILDS,
  buildIsFresh,
  expectedStamp,
  KERNEL_SOURCE,
  outputHashes,
  STAMP_FILE,
} from "./stamp.ts";

/** The part of asc's API this file uses. */
interface AscCompiler {
  main(argv: string[]): Promise<{ error: Error | null; stderr: { toString(): string } }>;
}

async function build(): Promise<void> {
  // Imported by a computed name so that type checking never reads the compiler's own declarations
  // (they declare AssemblyScript's globals, such as its console, over Node's).
  const compiler = "assemblyscript/asc";
  const asc = ((await import(compiler)) as { default: AscCompiler }).default;
  mkdirSync(BUILD_DIR, { recursive: true });
  for (const [name, { file, flags }] of Object.entries(BUILDS)) {
    const temporary = `${file}.tmp-${process.pid}`;
    const { error, stderr } = await asc.main([KERNEL_SOURCE, "-o", temporary, ...flags]);
    if (error) {
      throw new Error(`asc failed on the ${name} build: ${error.message}\n${stderr.toString()}`);
    }
    renameSync(temporary, file); // whole or not at all
  }
  writeFileSync(`${STAMP_FILE}.tmp`, `${[expectedStamp(), ...outputHashes()].join(" ")}\n`);
  renameSync(`${STAMP_FILE}.tmp`, STAMP_FILE); // the stamp last: a half-done build stays stale
}

if (import.meta.main) {
  const fresh = buildIsFresh();
  if (process.argv.includes("--check")) {
    if (!fresh) {
      console.error("the SIMD kernel build is missing or older than its source; run scripts/setup");
      process.exitCode = 1;
    }
  } else if (!fresh) {
    await build();
    console.log(
      `built ${Object.values(BUILDS)
        .map((b) => b.file)
        .join(", ")}`,
    );
  }
}
