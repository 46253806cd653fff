// A child process for simd-cache-memory.test.ts: resident caches made, closed and refused under
// the address-space limit its parent sets (ulimit -v), and the port's own calls between them. It
// prints one JSON line of what happened; the parent judges it.
//
//   node simd-cache-pressure.ts guarded     (a limit at which V8 guards each memory: 8 GiB apiece)
//   node simd-cache-pressure.ts unguarded KiB   (a limit of KiB, too small for that: each memory
//                                                reserves its maximum)

import { readFileSync } from "node:fs";

import type { FlatTensor } from "../src/inputs.ts";
import {
  AttentionInputError,
  createSimdKeyValueCache,
  type SimdKeyValueCache,
  scaledDotProductAttentionFlat,
} from "../src/simd-node.ts";
import { generator } from "./generate.ts";

const random = generator(7);
const floats = (n: number) => Float32Array.from({ length: n }, () => 2 * random() - 1);
const tensor = (shape: number[]): FlatTensor => ({ shape, data: floats(shape.reduce((a, x) => a * x, 1)) });

// The port's own call, whose bits must not change whatever the caches do.
const [query, key, value] = [tensor([1, 4, 8, 16]), tensor([1, 2, 40, 16]), tensor([1, 2, 40, 16])];
const portCall = () => Array.from(scaledDotProductAttentionFlat(query, key, value, { enableGqa: true }).data);
const reference = portCall();
const portSame = () => {
  try {
    return portCall().every((x, n) => Object.is(x, reference[n]));
  } catch (error) {
    return String(error);
  }
};

/** A cache [1, Hkv, E] with `capacity`, a few keys appended and attended: its output's length. */
function useCache(Hkv: number, E: number, capacity: number, workers = 1): SimdKeyValueCache {
  const cache = createSimdKeyValueCache([1, Hkv, E], E, "float32", { capacity });
  cache.append(tensor([1, Hkv, 3, E]), tensor([1, Hkv, 3, E]));
  cache.attend(tensor([1, Hkv, 3, E]), { isCausal: true, workers });
  return cache;
}

function describe(error: unknown) {
  return error instanceof AttentionInputError
    ? { name: error.name, kind: error.kind, message: error.message }
    : { name: (error as Error).name, message: String((error as Error).message) };
}

/** Caches opened until the engine refuses one (at most `most`): how many, and the refusal. */
function openUntilRefused(make: () => SimdKeyValueCache, most: number) {
  const open: SimdKeyValueCache[] = [];
  let refusal: unknown = null;
  while (open.length < most && refusal === null) {
    try {
      open.push(make());
    } catch (error) {
      refusal = describe(error);
    }
  }
  return { open, refusal };
}

const report: Record<string, unknown> = {};
if (process.argv[2] === "guarded") {
  // More caches made and closed, one after another, than fit at once.
  let made = 0;
  for (let n = 0; n < 24; n++) {
    useCache(2, 16, 256).close();
    made += 1;
  }
  report.madeAndClosed = made;
  // A cache without a capacity, then as many more as fit: it cannot grow past what it reserved.
  const growing = createSimdKeyValueCache([1, 2, 16], 16, "float32");
  const [keys, values, step] = [tensor([1, 2, 5, 16]), tensor([1, 2, 5, 16]), tensor([1, 2, 1, 16])];
  growing.append(keys, values);
  const before = Array.from(growing.attend(step).data);
  const { open, refusal } = openUntilRefused(() => useCache(2, 16, 256), 40);
  Object.assign(report, { openAtOnce: open.length, refusal, portWhileFull: portSame() });
  const holds = growing.memoryBytes;
  const many = 20_000; // 5 MiB of keys and values, past the 2 MiB its memory reserved
  try {
    growing.append(tensor([1, 2, many, 16]), tensor([1, 2, many, 16]));
    report.growth = "grew";
  } catch (error) {
    report.growth = describe(error);
  }
  report.growingHolds = [holds, growing.memoryBytes, growing.length];
  report.growingSame = Array.from(growing.attend(step).data).every((x, n) => Object.is(x, before[n]));
  for (const cache of [...open, growing]) {
    cache.close();
  }
  report.afterClosing = (() => {
    try {
      useCache(2, 16, 256).close();
      return true;
    } catch (error) {
      return describe(error);
    }
  })();
  report.portAfter = portSame();
} else {
  // Each memory reserves its maximum here: a cache sized for 60% of the address space left (so
  // that one fits and a second does not), then another. Keys of [1, 8, 128] float32, values as
  // wide: 8 KiB per key.
  const limit = Number(process.argv[3]) * 1024; // bytes, as the parent set it
  const used = Number(/VmSize:\s+(\d+)/.exec(readFileSync("/proc/self/status", "utf8"))![1]) * 1024;
  const capacity = Math.floor((0.6 * (limit - used)) / 8192);
  const big = () => useCache(8, 128, capacity);
  const first = big();
  report.firstBytes = first.memoryBytes;
  const { open, refusal } = openUntilRefused(big, 1);
  Object.assign(report, { second: open.length, refusal, portWhileFull: portSame() });
  first.close();
  const again = openUntilRefused(big, 1);
  report.afterClosing = again.refusal ?? again.open[0].memoryBytes;
  report.portAfter = portSame();
}
process.stdout.write(`${JSON.stringify(report)}\n`);
