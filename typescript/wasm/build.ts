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
 * the sha256 of what they were built from (the kernel source, these flags, the asc version) and of
 * each .wasm as written: simd.ts refuses to load builds that are stale or changed since, and a test
 * checks it too.
 */

import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
export const KERNEL_SOURCE = join(HERE, "kernel.ts");
export const BUILD_DIR = join(HERE, "build");
export const STAMP_FILE = join(BUILD_DIR, "kernel.stamp");

const COMMON_FLAGS = [
  "--runtime",
  "stub", // no garbage collector: simd.ts owns every byte of memory
  "-O3",
  "--noAssert",
  "--enable",
  "simd",
  "--enable",
  "threads", // shared memory
  "--importMemory",
  "--sharedMemory",
  "--maximumMemory",
  "65536", // 4 GiB, the most a 32-bit memory can address
];

/** The two builds, by the name simd.ts knows them by. */
export const BUILDS = {
  relaxed: {
    file: join(BUILD_DIR, "kernel.relaxed.wasm"),
    flags: [...COMMON_FLAGS, "--enable", "relaxed-simd"],
  },
  baseline: { file: join(BUILD_DIR, "kernel.wasm"), flags: COMMON_FLAGS },
} as const;
export type BuildName = keyof typeof BUILDS;

function ascVersion(): string {
  const manifest = join(HERE, "..", "..", "node_modules", "assemblyscript", "package.json");
  return (JSON.parse(readFileSync(manifest, "utf8")) as { version: string }).version;
}

/** sha256 of everything a build depends on: the kernel source, the flags and the compiler version. */
export function expectedStamp(source: string | Uint8Array = readFileSync(KERNEL_SOURCE)): string {
  const hash = createHash("sha256");
  hash.update(source);
  hash.update(JSON.stringify(Object.values(BUILDS).map((b) => b.flags)));
  hash.update(ascVersion());
  return hash.digest("hex");
}

/** sha256 of each build's .wasm as it is on disk now (null where it is missing). */
export function outputHashes(): (string | null)[] {
  return Object.values(BUILDS).map(({ file }) => {
    try {
      return createHash("sha256").update(readFileSync(file)).digest("hex");
    } catch {
      return null;
    }
  });
}

/** What kernel.stamp says: the input stamp the builds were made from and the sha256 of each .wasm
 * written then; null if there is no stamp. */
export function builtStamp(): { input: string; outputs: string[] } | null {
  try {
    const [input, ...outputs] = readFileSync(STAMP_FILE, "utf8").trim().split(/\s+/);
    return { input, outputs };
  } catch {
    return null;
  }
}

/** The builds on disk are those of the current source: made from it, and not changed since. The
 * packages (npm, and the Python wheel) ship the builds and their stamp but neither the source nor
 * the compiler: there, only "not changed since" can be checked, and is. */
export function buildIsFresh(): boolean {
  const stamp = builtStamp();
  if (stamp === null || JSON.stringify(stamp.outputs) !== JSON.stringify(outputHashes())) {
    return false;
  }
  return !existsSync(KERNEL_SOURCE) || stamp.input === expectedStamp();
}

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
