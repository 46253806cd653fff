/**
 * The SIMD kernel's builds: where they are, the flags each is compiled with, and kernel.stamp, which
 * says whether the builds on disk are those of the current source. build.ts (the build script, run
 * by scripts/setup) writes them; simd-node.ts (simd.ts in Node) reads them at run time. Kept apart
 * from build.ts so that the port imports no build script.
 */

import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
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
