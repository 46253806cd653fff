// Random inputs for the TypeScript tests: one generator of valid attention problems for the
// property tests of both ports, and one seeded source of numbers. (Fixture cases come from
// python/attention_port/golden/cases.py.)

import fc from "fast-check";

import type { AttentionOptions } from "../src/attention.ts";
import type { ShapedMask, ShapedTensor } from "../src/inputs.ts";
import { product } from "./helpers.ts";

// Under CI every property draws the same examples each run, so that a landing is decided by the code,
// not by the luck of a draw; on a developer's machine fast-check keeps exploring new seeds.
if (process.env.CI) {
  fc.configureGlobal({ seed: 20261130 });
}

/** Deterministic numbers in [0, 1) from a seed (fast for big tensors; fast-check shrinks the seed). */
export function generator(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

/** A valid problem, and the sizes the properties need to read its steps. */
export interface Problem {
  query: ShapedTensor;
  key: ShapedTensor;
  value: ShapedTensor;
  options: AttentionOptions & { attnMask?: ShapedMask };
  hq: number;
  hkv: number;
  lq: number;
  lk: number;
  ev: number;
  outer: number[]; // [B..., Hq] or [] for rank 2
}

/** A length from 1 to 6, and now and then 0 (empty tensors must work too). */
export const SMALL_LENGTH = fc.oneof(
  { arbitrary: fc.constant(0), weight: 1 },
  { arbitrary: fc.integer({ min: 1, max: 6 }), weight: 8 },
);

/** Random valid problems: rank 2 to 5, GQA groups, a broadcast mask (bool or float, with a share
 * of masked cells from none to all), causal, scale, softcap, logits from small to the thousands.
 * `length` draws Lq and Lk, `features` E and `valueFeatures` Ev; with `keyTile`, some rows have one
 * whole key tile masked. */
export function attentionProblems({
  length = SMALL_LENGTH,
  keyTile,
  features = fc.integer({ min: 1, max: 9 }),
  valueFeatures = fc.integer({ min: 0, max: 5 }),
}: {
  length?: fc.Arbitrary<number>;
  keyTile?: number;
  features?: fc.Arbitrary<number>;
  valueFeatures?: fc.Arbitrary<number>;
} = {}): fc.Arbitrary<Problem> {
  return fc
    .record({
      rank2: fc.boolean(),
      batch: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 2 }),
      hkv: fc.integer({ min: 1, max: 2 }),
      group: fc.integer({ min: 1, max: 3 }),
      lq: length,
      lk: length,
      e: features,
      ev: valueFeatures,
      isCausal: fc.boolean(),
      scale: fc.option(fc.double({ min: -2, max: 2, noNaN: true }), { nil: undefined }),
      softcap: fc.oneof(fc.constant(0), fc.double({ min: 0.25, max: 5, noNaN: true })),
      maskKind: fc.constantFrom("none", "bool", "float"),
      maskRank: fc.integer({ min: 1, max: 5 }),
      maskOnes: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }), // which mask dims are 1
      masked: fc.constantFrom(0, 0.2, 0.6, 1), // share of masked cells
      blockTiles: fc.boolean(), // with keyTile: some rows have one whole key tile masked
      spread: fc.constantFrom(1, 4, 40), // query/key magnitude: 40 gives logits in the thousands
      seed: fc.integer(),
    })
    .map((c): Problem => {
      const random = generator(c.seed);
      const big = c.lq * c.lk > 64; // keep the readable port's work small on big lengths
      const [hq, hkv] = c.rank2 ? [1, 1] : big ? [c.group, 1] : [c.hkv * c.group, c.hkv];
      const batch = c.rank2 || big ? [] : c.batch;
      const heads = (h: number) => (c.rank2 ? [] : [h]);
      const qShape = [...batch, ...heads(hq), c.lq, c.e];
      const kShape = [...batch, ...heads(hkv), c.lk, c.e];
      const vShape = [...batch, ...heads(hkv), c.lk, c.ev];
      const scoresShape = [...batch, ...heads(hq), c.lq, c.lk];
      const numbers = (shape: number[], spread: number) =>
        Array.from({ length: product(shape) }, () => (2 * random() - 1) * spread);
      const maskRank = Math.min(c.maskRank, scoresShape.length);
      const maskShape = scoresShape.slice(-maskRank).map((n, d) => (c.maskOnes[d] ? 1 : n));
      const cells: (number | boolean)[] = Array.from({ length: product(maskShape) }, () => {
        const masked = random() < c.masked;
        return c.maskKind === "bool" ? !masked : masked ? -Infinity : 6 * random() - 3;
      });
      const [rows, cols] = maskShape.slice(-2);
      if (keyTile !== undefined && c.blockTiles && maskShape.length >= 2 && rows > 1 && cols > 1) {
        // Row i of every (b, h) has key tile (i mod 3) fully masked when i is odd: rows masked in
        // some tiles only, so the running max starts at -Infinity or stays put across whole tiles.
        for (let n = 0; n < cells.length; n++) {
          const [i, j] = [Math.floor(n / cols) % rows, n % cols];
          if (i % 2 === 1 && Math.floor(j / keyTile) === i % 3) {
            cells[n] = c.maskKind === "bool" ? false : -Infinity;
          }
        }
      }
      return {
        query: { shape: qShape, data: numbers(qShape, c.spread) },
        key: { shape: kShape, data: numbers(kShape, c.spread) },
        value: { shape: vShape, data: numbers(vShape, 4) },
        options: {
          isCausal: c.isCausal,
          scale: c.scale,
          softcap: c.softcap,
          enableGqa: hq !== hkv,
          ...(c.maskKind === "none" ? {} : { attnMask: { shape: maskShape, data: cells } }),
        },
        hq,
        hkv,
        lq: c.lq,
        lk: c.lk,
        ev: c.ev,
        outer: scoresShape.slice(0, -2),
      };
    });
}

/** Sizes across float64's whole range for `atTheEdges`: subnormal, tiny, ordinary, huge. */
const MAGNITUDES = [1e-310, 1e-300, 1e-160, 1e-20, 1, 1, 1e20, 1e150, 1e300, 1e307];
const SPECIALS = [NaN, Infinity, -Infinity, 0, -0, 5e-324, -1.7e308];

/** Problems drawn from `problems`, their tensors scaled across float64's range (subnormal to
 * 1e307), with special values written into some cells, and scale and softcap from 1e-300 to
 * 1e300: python/tests/strategies.py's `extreme` draws, for the TypeScript ports. */
export function atTheEdges(problems: fc.Arbitrary<Problem>): fc.Arbitrary<Problem> {
  return fc
    .record({
      problem: problems,
      sizes: fc.array(fc.constantFrom(...MAGNITUDES), { minLength: 4, maxLength: 4 }),
      specials: fc.array(fc.tuple(fc.nat(3), fc.nat(), fc.constantFrom(...SPECIALS)), { maxLength: 4 }),
      scale: fc.constantFrom(undefined, 1, -0.5, 0, 1e-300, 1e-30, 1e30, 1e300),
      softcap: fc.constantFrom(0, 0, 1e-300, 2, 1e60, 1e300),
    })
    .map(({ problem, sizes, specials, scale, softcap }): Problem => {
      const mask = problem.options.attnMask;
      const floatMask = mask !== undefined && typeof mask.data[0] === "number";
      const [query, key, value] = [problem.query, problem.key, problem.value].map((t, n) => ({
        shape: t.shape,
        data: Array.from(t.data, (x) => x * sizes[n]),
      }));
      const maskData =
        mask === undefined ? [] : Array.from(mask.data, (x) => (floatMask ? (x as number) * sizes[3] : x));
      for (const [which, at, special] of specials) {
        const target = [query.data, key.data, value.data, floatMask ? (maskData as number[]) : []][which];
        if (target.length > 0) {
          target[at % target.length] = special;
        }
      }
      const attnMask = mask === undefined ? {} : { attnMask: { shape: mask.shape, data: maskData } };
      return { ...problem, query, key, value, options: { ...problem.options, ...attnMask, scale, softcap } };
    });
}
