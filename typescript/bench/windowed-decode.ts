// A windowed decode step against a step over as many keys without a window, in simd.ts: the step
// at position 16,384 with window [4095, 0] sees 4,096 keys, as a step at position 4,095 without
// one does, so the ideal is 1x. Grouped-query heads as in a model: Hq 32, Hkv 8, E = Ev = 64, one
// sequence, one thread. Each step is timed in CPU time (process.cpuUsage: the machine is shared,
// so wall time would count other processes' turns), the median of the rounds, both dtypes; the
// windowed step on a plain resident cache (every key held), on a bounded ring cache (the window's
// keys held) and through the flat entry, and each also unfolded (a mask that hides no key keeps
// every query head its own slice) to show what folding the group's heads is worth.
//
//   sh scripts/node typescript/bench/windowed-decode.ts [repeats]

import type { FlatMask, FlatTensor } from "../src/inputs.ts";
import {
  createSimdKeyValueCache,
  type SimdCacheDtype,
  type SimdKeyValueCache,
  scaledDotProductAttentionFlat,
} from "../src/simd-node.ts";
import { generator } from "../test/generate.ts";

const [Hq, Hkv, E, Ev] = [32, 8, 64, 64];
const POSITION = 16_384; // the windowed step's query; its keys 0 .. POSITION
const LEFT = 4095; // window [LEFT, 0]: LEFT + 1 = 4,096 keys
const REPEATS = Number(process.argv[2] ?? 30);
const EVERY_KEY: FlatMask = { dtype: "bool", shape: [1, 1], data: Uint8Array.of(1) }; // hides none

const random = generator(7);
const numbers = (n: number) => Float64Array.from({ length: n }, () => 2 * random() - 1);
const tensor = (
  shape: number[],
  dtype: SimdCacheDtype,
  data = numbers(shape.reduce((a, n) => a * n, 1)),
) => ({
  shape,
  data: dtype === "float32" ? Float32Array.from(data) : data,
});

/** The median CPU milliseconds of each step over REPEATS rounds, after two to warm up; each round
 * runs every step once, so that a change in the machine's load falls on all of them alike. */
function cpuMs(steps: readonly (() => unknown)[]): number[] {
  const times = steps.map((): number[] => []);
  for (let n = 0; n < REPEATS + 2; n++) {
    steps.forEach((step, s) => {
      const before = process.cpuUsage();
      step();
      const used = process.cpuUsage(before);
      if (n >= 2) {
        times[s].push((used.user + used.system) / 1000);
      }
    });
  }
  return times.map((t) => t.sort((x, y) => x - y)[Math.floor(t.length / 2)]);
}

/** A cache holding keys 0 .. length - 1 of `key` and `value` ([1, Hkv, length, E] and [..., Ev]),
 * appended 1,024 keys at a time. */
function filled(
  key: FlatTensor,
  value: FlatTensor,
  dtype: SimdCacheDtype,
  bounded: boolean,
): SimdKeyValueCache {
  const length = key.shape[2];
  const cache = createSimdKeyValueCache(
    [1, Hkv, E],
    Ev,
    dtype,
    bounded ? { capacity: LEFT + 1 + 1024, window: [LEFT, 0], sinkTokens: 0 } : {},
  );
  for (let start = 0; start < length; start += 1024) {
    const end = Math.min(length, start + 1024);
    const rows = (t: FlatTensor, width: number) => {
      const out = new Float64Array(Hkv * (end - start) * width); // [1, Hkv, end - start, width]
      for (let s = 0; s < Hkv; s++) {
        out.set(
          Float64Array.from(t.data.subarray((s * length + start) * width, (s * length + end) * width)),
          s * (end - start) * width,
        );
      }
      return tensor([1, Hkv, end - start, width], dtype, out);
    };
    cache.append(rows(key, E), rows(value, Ev));
  }
  return cache;
}

const results: string[] = [];
for (const dtype of ["float32", "float64"] as const) {
  const query = tensor([1, Hq, 1, E], dtype);
  const [key, value] = [tensor([1, Hkv, POSITION + 1, E], dtype), tensor([1, Hkv, POSITION + 1, Ev], dtype)];
  const short = LEFT + 1; // the unwindowed step's keys: 0 .. 4,095
  const [shortKey, shortValue] = [
    tensor([1, Hkv, short, E], dtype, numbers(Hkv * short * E)),
    tensor([1, Hkv, short, Ev], dtype, numbers(Hkv * short * Ev)),
  ];
  const plain = { isCausal: true, enableGqa: true, queryOffset: short - 1 };
  const windowed = {
    isCausal: true,
    enableGqa: true,
    queryOffset: POSITION,
    window: [LEFT, 0] as [number, number],
  };

  const shortCache = filled(shortKey, shortValue, dtype, false);
  const fullCache = filled(key, value, dtype, false);
  const ring = filled(key, value, dtype, true);
  const rows: [string, () => unknown][] = [
    ["4,096 keys, no window, plain cache", () => shortCache.attend(query, plain)],
    [
      "4,096 keys, no window, flat entry",
      () => scaledDotProductAttentionFlat(query, shortKey, shortValue, plain),
    ],
    ["window at 16,384, plain cache", () => fullCache.attend(query, windowed)],
    ["window at 16,384, ring cache", () => ring.attend(query, windowed)],
    ["window at 16,384, flat entry", () => scaledDotProductAttentionFlat(query, key, value, windowed)],
    [
      "window at 16,384, plain cache, unfolded",
      () => fullCache.attend(query, { ...windowed, attnMask: EVERY_KEY }),
    ],
    [
      "window at 16,384, ring cache, unfolded",
      () => ring.attend(query, { ...windowed, attnMask: EVERY_KEY }),
    ],
  ];
  const times = cpuMs(rows.map(([, step]) => step));
  const [base] = times;
  rows.forEach(([name], n) => {
    results.push(
      `${dtype}  ${name.padEnd(42)} ${times[n].toFixed(2).padStart(7)} ms  ${(times[n] / base).toFixed(2)}x`,
    );
  });
  for (const cache of [shortCache, fullCache, ring]) {
    cache.close();
  }
}
console.log(
  `Hq ${Hq}, Hkv ${Hkv}, E = Ev = ${E}; CPU ms per step (median of ${REPEATS}); x: of the 4,096-key cache step`,
);
console.log(results.join("\n"));
