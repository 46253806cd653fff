// The WebAssembly SIMD kernel of the SIMD port (typescript/src/simd.ts), in AssemblyScript.
//
// AssemblyScript is TypeScript with machine types (f32, f64, i32, usize, v128); `asc` compiles it
// to WebAssembly (typescript/wasm/build.ts, run by scripts/setup). One generic kernel is compiled
// twice, for f32 (f32x4: 4 lanes per 128-bit vector) and f64 (f64x2: 2 lanes). Read
// typescript/src/simd.ts first: it says what this file computes and why it is laid out this way.
//
// Memory is one linear memory that simd.ts owns (imported, shared with worker threads). simd.ts
// copies the inputs into it (a resident cache, SimdKeyValueCache, keeps its keys and values in a
// memory of its own from call to call) and writes a job descriptor; `runItem*` computes one work
// item: one query block (BR rows) of one (batch, head) slice, against every key it may see. A
// job covers one chunk of query rows, [row0, row0 + rows), of every slice: simd.ts copies the
// query in and the output out a chunk at a time, so neither is ever whole in this memory. Items write
// disjoint output rows and use their own scratch, so any thread may compute any item and the
// result is the same bit for bit.
//
// Dimension letters as in simd.ts: Lq, Lk query and key length, E features, Ev value features;
// BR query rows per block, BC keys per tile, L lanes per vector. Pointers are byte offsets.

// BR: query rows per work item (a multiple of 4, the score blocking). BC: keys per tile.
const BR: i32 = 64;
const BC: i32 = 64;
const WIDE: i32 = 3 * BC; // the scores buffer's row: three key tiles (runItem)
const LOG2E: f64 = 1.4426950408889634; // log2(e): exp(x) = exp2(x * log2(e))

// ---- The job descriptor, written by simd.ts (attend; J_BLOCKS, J_ROWS and J_ROW0 once per chunk). ----
const J_BLOCKS: i32 = 0; // query blocks per slice in this job: ceil(rows / BR)
const J_ROWS: i32 = 4; // query rows per slice in this job (a chunk of Lq)
const J_LK: i32 = 8;
const J_E: i32 = 12;
const J_EV: i32 = 16;
const J_Q: i32 = 20; // the chunk's query rows [slices, rows, E]
const J_K: i32 = 24; // key, transposed by tiles of [BC / 2L, E, 2L] (transposeKey), placed by J_K_KV, J_K_TILE
const J_V: i32 = 28; // value rows [Ev], placed by J_V_KV, J_V_TILE and J_V_ROW
const J_OUT: i32 = 32; // the chunk's output rows [slices, rows, Ev]
const J_SLICES: i32 = 36; // per slice, SLICE_BYTES: i32 kv slice, i32 mask offset (elements), then
// the four i32 of key-range.ts's RowKeys for the slice: startShift, endShift, limit, sinkEnd; then
// the slice's sink logit, f64 (-inf for none)
const J_MASK_KIND: i32 = 40; // 0 none, 1 bool (u8, 0 = masked), 2 float (T, added)
const J_MASK: i32 = 44;
const J_MASK_I: i32 = 48; // mask stride along Lq (elements; 0 when broadcast)
const J_MASK_J: i32 = 52; // mask stride along Lk
const J_LAST_NON_FINITE: i32 = 56; // i32 [kvSlices, Ev]: last key row with NaN/±inf value, or -1
// (bytes 60 to 63 are free, before the f64s)
const J_SCALE: i32 = 64; // f64
const J_SOFTCAP: i32 = 72; // f64
const J_ROW0: i32 = 80; // the chunk's first query row (for the rows' keys and the mask's rows)
// (bytes 84 to 87 are free)
// Where a kv slice's key tile and value rows are, in bytes: a call's own copy is [kvSlices, tiles,
// E, BC] and [kvSlices, Lk, Ev]; a resident cache (simd.ts's SimdKeyValueCache) keeps tile after
// tile, each holding BC keys and their values for every kv slice, so that it grows at its end.
const J_K_KV: i32 = 88; // from one kv slice's key tiles to the next's
const J_K_TILE: i32 = 92; // from one key tile to the next of the same kv slice
const J_V_KV: i32 = 96; // from one kv slice's value row 0 to the next's
const J_V_TILE: i32 = 100; // from value row j to row j + BC of the same kv slice
const J_V_ROW: i32 = 104; // from value row j to row j + 1 within a tile
const SLICE_BYTES: usize = 32; // one slice's entry in the J_SLICES table

// Which keys query row i of a slice sees: [rowStart(i), rowEnd(i)) and the sinks
// [0, min(sinkEnd, rowEnd(i))). The formula of key-range.ts's keyEnd, keyStart and sinkKeyEnd, from
// the four numbers simd.ts passes per slice (key-range.ts decides them; this file knows nothing of
// causality or windows).
// @ts-ignore: decorator
@inline function rowEnd(i: i32, endShift: i32, limit: i32): i32 {
  return min(limit, max(0, i + endShift));
}
// @ts-ignore: decorator
@inline function rowStart(i: i32, startShift: i32, end: i32): i32 {
  return min(end, max(0, i + startShift));
}

/** Bytes of scratch one thread needs for features E and Ev (the same for f32 and f64). */
export function scratchBytes(E: i32, Ev: i32): i32 {
  const evPad = (Ev + 1) & ~1; // Ev rounded up to whole f64x2 vectors
  return 8 * (BR * WIDE + 3 * BR + BR * evPad) + 64;
}

// ---- Vector helpers, generic over the lane type T (f32 or f64). ----

// a * b + c. With relaxed SIMD this is one fused multiply-add where the CPU has one (V8 emits
// vfmadd on x86 with FMA3); the baseline build (chosen where relaxed SIMD does not validate)
// multiplies, rounds, then adds.
// @ts-ignore: decorator
@inline function madd<T>(a: v128, b: v128, c: v128): v128 {
  if (ASC_FEATURE_RELAXED_SIMD) {
    return v128.relaxed_madd<T>(a, b, c);
  } else {
    return v128.add<T>(v128.mul<T>(a, b), c);
  }
}

// exp2v's constants, in memory: a vector constant written inline is rebuilt from its bits at every
// use inside the loop (several instructions each), while a splat load from memory is one.
const EXP2_F32: usize = memory.data<f32>([
  -150.0, // 0: lowest argument (2^-150 rounds to 0)
  12582912.0, // 1: 1.5 * 2^23, the rounding constant
  1.5252733804059841e-5, // 2..9: ln2^n / n!, n = 7 down to 0
  1.540353039338161e-4,
  1.3333558146428443e-3,
  9.618129107628477e-3,
  5.550410866482158e-2,
  2.4022650695910072e-1,
  6.931471805599453e-1,
  1.0,
  2.3283064365386963e-10, // 10: 2^-32
]);
const EXP2_F64: usize = memory.data<f64>([
  -1075.0, // 0: lowest argument (2^-1075 rounds to 0)
  6755399441055744.0, // 1: 1.5 * 2^52, the rounding constant
  1.3691488853904128e-12, // 2..15: ln2^n / n!, n = 13 down to 0
  2.5678435993488206e-11,
  4.4455382718708116e-10,
  7.054911620801123e-9,
  1.01780860092397e-7,
  1.321548679014431e-6,
  1.5252733804059841e-5,
  1.540353039338161e-4,
  1.3333558146428443e-3,
  9.618129107628477e-3,
  5.550410866482158e-2,
  2.4022650695910072e-1,
  6.931471805599453e-1,
  1.0,
  5.421010862427522e-20, // 16: 2^-64
]);
const EXP2_BIAS_F32: usize = memory.data<i32>([127 + 32]); // exponent bias + 32
const EXP2_BIAS_F64: usize = memory.data<i64>([1023 + 64]); // exponent bias + 64

/** Constant n of exp2v's table for lane type T, splat to every lane. */
// @ts-ignore: decorator
@inline function k<T>(n: i32): v128 {
  if (sizeof<T>() == 4) {
    return v128.load_splat<f32>(EXP2_F32 + (<usize>n << 2));
  } else {
    return v128.load_splat<f64>(EXP2_F64 + (<usize>n << 3));
  }
}

/** 2^x per lane, for x <= 0, -Infinity or NaN (the only arguments the softmax makes: a logit minus
 * the running max). x = k + f with k the nearest integer and |f| <= 1/2; 2^f is its Taylor
 * polynomial in f·ln 2 (degree 7 for f32, 13 for f64: truncation error below 2^-27 and 2^-58
 * relative), and 2^k is written into exponent bits.
 *
 * The rounding trick: adding M = 1.5 · 2^23 (f32) or 1.5 · 2^52 (f64) rounds x to the integer k
 * and leaves k in the low bits of the sum, so k as a float is (x + M) - M and k as an integer is
 * the sum's bit pattern; (those bits + bias + K) << mantissa width is then the float 2^(k + K).
 * K = 32 (f32) or 64 (f64) keeps that power of two a normal number for every k down to the clamp;
 * the last multiplication by 2^-K rounds once, so results in the subnormal range come out as one
 * rounding gives them (as Math.exp's do) instead of being flushed to zero. x is first raised to
 * -150 (f32) or -1075 (f64), where 2^x is half the smallest subnormal and rounds to 0.0:
 * -Infinity gives exactly 0.0. NaN stays NaN (pmax keeps its first argument when the comparison
 * fails, and the sums and the polynomial propagate it). */
// @ts-ignore: decorator
@inline function exp2v<T>(x: v128): v128 {
  x = v128.pmax<T>(x, k<T>(0)); // x < lowest ? lowest : x
  const sum = v128.add<T>(x, k<T>(1));
  const f = v128.sub<T>(x, v128.sub<T>(sum, k<T>(1))); // x - k, in [-1/2, 1/2]
  // Horner, from the highest degree down (written out: a loop here would not be unrolled).
  let p = madd<T>(k<T>(2), f, k<T>(3));
  p = madd<T>(p, f, k<T>(4));
  p = madd<T>(p, f, k<T>(5));
  p = madd<T>(p, f, k<T>(6));
  p = madd<T>(p, f, k<T>(7));
  p = madd<T>(p, f, k<T>(8));
  p = madd<T>(p, f, k<T>(9)); // f32: degree 7 done
  if (sizeof<T>() == 8) {
    p = madd<T>(p, f, k<T>(10));
    p = madd<T>(p, f, k<T>(11));
    p = madd<T>(p, f, k<T>(12));
    p = madd<T>(p, f, k<T>(13));
    p = madd<T>(p, f, k<T>(14));
    p = madd<T>(p, f, k<T>(15)); // f64: degree 13 done
  }
  let two: v128;
  if (sizeof<T>() == 4) {
    two = i32x4.shl(i32x4.add(sum, v128.load32_splat(EXP2_BIAS_F32)), 23); // 2^(k + 32)
  } else {
    two = i64x2.shl(i64x2.add(sum, v128.load64_splat(EXP2_BIAS_F64)), 52); // 2^(k + 64)
  }
  return v128.mul<T>(v128.mul<T>(p, two), k<T>(sizeof<T>() == 4 ? 10 : 16)); // · 2^-K
}

/** The largest lane (NaN if any lane is NaN: wasm's max propagates NaN). */
// @ts-ignore: decorator
@inline function laneMax<T>(v: v128): T {
  if (sizeof<T>() == 4) {
    const a = Mathf.max(f32x4.extract_lane(v, 0), f32x4.extract_lane(v, 1));
    const b = Mathf.max(f32x4.extract_lane(v, 2), f32x4.extract_lane(v, 3));
    return <T>Mathf.max(a, b);
  } else {
    return <T>Math.max(f64x2.extract_lane(v, 0), f64x2.extract_lane(v, 1));
  }
}

/** The sum of the lanes, in a fixed order. */
// @ts-ignore: decorator
@inline function laneSum<T>(v: v128): T {
  if (sizeof<T>() == 4) {
    const a = f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1);
    const b = f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3);
    return <T>(a + b);
  } else {
    return <T>(f64x2.extract_lane(v, 0) + f64x2.extract_lane(v, 1));
  }
}

/** Step 4 for one row of a tile, online (see simd.ts): m, l and acc follow the largest logit so
 * far; the row's logits (log2 units) become p = 2^(x - m). `tileMax` is the row's largest logit
 * in this tile, taken with pmax (one instruction; wasm's NaN-propagating max is several), so it
 * may miss a NaN logit: that logit's p = 2^(NaN - m) is NaN all the same, and makes l and every
 * acc lane of its row NaN, as the readable port's NaN row. */
// @ts-ignore: decorator
@inline function softmaxRow<T>(
  row: usize,
  colsPad: i32,
  tileMax: T,
  r: i32,
  rowMax: usize,
  rowSum: usize,
  acc: usize,
  evPad: i32,
): void {
  const S = <usize>sizeof<T>();
  const L = 16 / <i32>sizeof<T>();
  const mOld = load<T>(rowMax + <usize>r * S);
  const mNew = <T>max<T>(mOld, tileMax);
  // While every logit is -inf, shift by 0: exp2(-inf - 0) = 0 (and not -inf - -inf = NaN).
  const shift = mNew == <T>-Infinity ? <T>0 : mNew;
  const vshift = v128.splat<T>(shift);
  let vsum = v128.splat<T>(<T>0);
  for (let c = 0; c < colsPad; c += L) {
    const p = exp2v<T>(v128.sub<T>(v128.load(row + <usize>c * S), vshift));
    v128.store(row + <usize>c * S, p);
    vsum = v128.add<T>(vsum, p);
  }
  const tileSum = laneSum<T>(vsum);
  if (mNew != mOld) {
    // The max grew (or is NaN): what was summed relative to mOld is rescaled by 2^(mOld - mNew).
    const alpha = v128.extract_lane<T>(exp2v<T>(v128.splat<T>(mOld - shift)), 0);
    store<T>(rowSum + <usize>r * S, load<T>(rowSum + <usize>r * S) * alpha + tileSum);
    const valpha = v128.splat<T>(alpha);
    const a = acc + <usize>(r * evPad) * S;
    for (let t = 0; t < evPad; t += L) {
      v128.store(a + <usize>t * S, v128.mul<T>(v128.load(a + <usize>t * S), valpha));
    }
    store<T>(rowMax + <usize>r * S, mNew);
  } else {
    store<T>(rowSum + <usize>r * S, load<T>(rowSum + <usize>r * S) + tileSum);
  }
}

// ---- One work item. ----

/** Where row i's keys of segment `seg` start: 0 for the sinks, and for the band its start past the
 * sinks it sees (a key in both is the sinks' alone). */
// @ts-ignore: decorator
@inline function segFrom(seg: i32, i: i32, startShift: i32, endShift: i32, limit: i32, sinkEnd: i32): i32 {
  if (seg == 0) {
    return 0;
  }
  const end = rowEnd(i, endShift, limit);
  return max(rowStart(i, startShift, end), min(sinkEnd, end));
}
/** Where row i's keys of segment `seg` end: its sinks end at min(sinkEnd, end(i)), its band at end(i). */
// @ts-ignore: decorator
@inline function segTo(seg: i32, i: i32, endShift: i32, limit: i32, sinkEnd: i32): i32 {
  const end = rowEnd(i, endShift, limit);
  return seg == 0 ? min(sinkEnd, end) : end;
}

/** Step 1 for one key tile: scores[r][c] = query row (i0 + r) · key row c of the tile at keyT, into
 * `scores` (rows WIDE numbers apart). Register blocking: 4 query rows x 2 vectors of keys, 8
 * independent sums, each over t from 0 in order (so a score's bits do not depend on its tile). */
// @ts-ignore: decorator
@inline function scoreTile<T>(query: usize, rows: i32, rowsPad: i32, E: i32, keyT: usize, scores: usize): void {
  tilesScored++;
  const S = <usize>sizeof<T>();
  const L = 16 / <i32>sizeof<T>();
  const zero = v128.splat<T>(<T>0);
  if (rows == 1) {
    // One row (a decode step's): 4 blocks of keys at a time, 8 independent sums, instead of the
    // 4-row blocking's three copies of the row. Each sum runs over t from 0 in order, as below, so
    // the scores are the same bits.
    const W = <usize>(2 * L) * S; // one block's numbers for one feature
    const blockBytes = <usize>E * W; // one block of 2L keys: [E, 2L]
    for (let c = 0; c < BC; c += 8 * L) {
      let s0 = zero, s1 = zero, s2 = zero, s3 = zero, s4 = zero, s5 = zero, s6 = zero, s7 = zero;
      let kp = keyT + <usize>c * <usize>E * S;
      for (let t = 0; t < E; t++) {
        const x = v128.load_splat<T>(query + <usize>t * S);
        s0 = madd<T>(x, v128.load(kp), s0);
        s1 = madd<T>(x, v128.load(kp, 16), s1);
        s2 = madd<T>(x, v128.load(kp + blockBytes), s2);
        s3 = madd<T>(x, v128.load(kp + blockBytes, 16), s3);
        s4 = madd<T>(x, v128.load(kp + 2 * blockBytes), s4);
        s5 = madd<T>(x, v128.load(kp + 2 * blockBytes, 16), s5);
        s6 = madd<T>(x, v128.load(kp + 3 * blockBytes), s6);
        s7 = madd<T>(x, v128.load(kp + 3 * blockBytes, 16), s7);
        kp += W;
      }
      const at = scores + <usize>c * S;
      v128.store(at, s0);
      v128.store(at, s1, 16);
      v128.store(at + W, s2);
      v128.store(at + W, s3, 16);
      v128.store(at + 2 * W, s4);
      v128.store(at + 2 * W, s5, 16);
      v128.store(at + 3 * W, s6);
      v128.store(at + 3 * W, s7, 16);
    }
    return;
  }
  for (let r = 0; r < rowsPad; r += 4) {
    const qa = query + <usize>min(r, rows - 1) * <usize>E * S;
    const qb = query + <usize>min(r + 1, rows - 1) * <usize>E * S;
    const qc = query + <usize>min(r + 2, rows - 1) * <usize>E * S;
    const qd = query + <usize>min(r + 3, rows - 1) * <usize>E * S;
    for (let c = 0; c < BC; c += 2 * L) {
      let s00 = zero, s01 = zero, s10 = zero, s11 = zero;
      let s20 = zero, s21 = zero, s30 = zero, s31 = zero;
      let kp = keyT + <usize>c * <usize>E * S; // the block of keys c .. c + 2L - 1: [E, 2L]
      for (let t = 0; t < E; t++) {
        const y0 = v128.load(kp);
        const y1 = v128.load(kp, 16);
        const off = <usize>t * S;
        const xa = v128.load_splat<T>(qa + off);
        const xb = v128.load_splat<T>(qb + off);
        s00 = madd<T>(xa, y0, s00);
        s01 = madd<T>(xa, y1, s01);
        s10 = madd<T>(xb, y0, s10);
        s11 = madd<T>(xb, y1, s11);
        const xc = v128.load_splat<T>(qc + off);
        const xd = v128.load_splat<T>(qd + off);
        s20 = madd<T>(xc, y0, s20);
        s21 = madd<T>(xc, y1, s21);
        s30 = madd<T>(xd, y0, s30);
        s31 = madd<T>(xd, y1, s31);
        kp += <usize>(2 * L) * S;
      }
      const at = scores + <usize>(r * WIDE + c) * S;
      v128.store(at, s00);
      v128.store(at, s01, 16);
      v128.store(at + <usize>WIDE * S, s10);
      v128.store(at + <usize>WIDE * S, s11, 16);
      v128.store(at + <usize>(2 * WIDE) * S, s20);
      v128.store(at + <usize>(2 * WIDE) * S, s21, 16);
      v128.store(at + <usize>(3 * WIDE) * S, s30);
      v128.store(at + <usize>(3 * WIDE) * S, s31, 16);
    }
  }
}

/** Step 5 for a run of n keys that two rows both see: acc_a += p_a[c] · value row c, and the same
 * for b, each key in order. Register blocking: 2 rows x 4 vectors of value features, summed over
 * the run in registers. Loads past Ev in a value row read the next row (or the padding after
 * value): those lanes only reach acc lanes past Ev, which are never written out. */
// @ts-ignore: decorator
@inline function weighPair<T>(pa: usize, pb: usize, aa: usize, ab: usize, v0: usize, n: i32, vrow: usize, evPad: i32): void {
  const S = <usize>sizeof<T>();
  const L = 16 / <i32>sizeof<T>();
  let t = 0;
  for (; t + 4 * L <= evPad; t += 4 * L) {
    const ta = aa + <usize>t * S;
    const tb = ab + <usize>t * S;
    let a0 = v128.load(ta), a1 = v128.load(ta, 16), a2 = v128.load(ta, 32), a3 = v128.load(ta, 48);
    let b0 = v128.load(tb), b1 = v128.load(tb, 16), b2 = v128.load(tb, 32), b3 = v128.load(tb, 48);
    let vp = v0 + <usize>t * S;
    for (let c = 0; c < n; c++) {
      const wa = v128.load_splat<T>(pa + <usize>c * S);
      const wb = v128.load_splat<T>(pb + <usize>c * S);
      const y0 = v128.load(vp);
      const y1 = v128.load(vp, 16);
      const y2 = v128.load(vp, 32);
      const y3 = v128.load(vp, 48);
      a0 = madd<T>(wa, y0, a0);
      a1 = madd<T>(wa, y1, a1);
      a2 = madd<T>(wa, y2, a2);
      a3 = madd<T>(wa, y3, a3);
      b0 = madd<T>(wb, y0, b0);
      b1 = madd<T>(wb, y1, b1);
      b2 = madd<T>(wb, y2, b2);
      b3 = madd<T>(wb, y3, b3);
      vp += vrow;
    }
    v128.store(ta, a0);
    v128.store(ta, a1, 16);
    v128.store(ta, a2, 32);
    v128.store(ta, a3, 48);
    v128.store(tb, b0);
    v128.store(tb, b1, 16);
    v128.store(tb, b2, 32);
    v128.store(tb, b3, 48);
  }
  for (; t < evPad; t += L) {
    const ta = aa + <usize>t * S;
    const tb = ab + <usize>t * S;
    let a0 = v128.load(ta);
    let b0 = v128.load(tb);
    let vp = v0 + <usize>t * S;
    for (let c = 0; c < n; c++) {
      const y0 = v128.load(vp);
      a0 = madd<T>(v128.load_splat<T>(pa + <usize>c * S), y0, a0);
      b0 = madd<T>(v128.load_splat<T>(pb + <usize>c * S), y0, b0);
      vp += vrow;
    }
    v128.store(ta, a0);
    v128.store(tb, b0);
  }
}

/** weighPair for a run of keys that one row alone sees: a decode step's one row, and the ends of
 * two rows' runs that differ. 8 vectors of value features at a time, so that 8 independent sums
 * keep the multiply-adds busy (one sum per vector would wait on itself). */
// @ts-ignore: decorator
@inline function weighOne<T>(pa: usize, aa: usize, v0: usize, n: i32, vrow: usize, evPad: i32): void {
  const S = <usize>sizeof<T>();
  const L = 16 / <i32>sizeof<T>();
  let t = 0;
  for (; t + 8 * L <= evPad; t += 8 * L) {
    const ta = aa + <usize>t * S;
    let a0 = v128.load(ta), a1 = v128.load(ta, 16), a2 = v128.load(ta, 32), a3 = v128.load(ta, 48);
    let a4 = v128.load(ta, 64), a5 = v128.load(ta, 80), a6 = v128.load(ta, 96), a7 = v128.load(ta, 112);
    let vp = v0 + <usize>t * S;
    for (let c = 0; c < n; c++) {
      const w = v128.load_splat<T>(pa + <usize>c * S);
      a0 = madd<T>(w, v128.load(vp), a0);
      a1 = madd<T>(w, v128.load(vp, 16), a1);
      a2 = madd<T>(w, v128.load(vp, 32), a2);
      a3 = madd<T>(w, v128.load(vp, 48), a3);
      a4 = madd<T>(w, v128.load(vp, 64), a4);
      a5 = madd<T>(w, v128.load(vp, 80), a5);
      a6 = madd<T>(w, v128.load(vp, 96), a6);
      a7 = madd<T>(w, v128.load(vp, 112), a7);
      vp += vrow;
    }
    v128.store(ta, a0);
    v128.store(ta, a1, 16);
    v128.store(ta, a2, 32);
    v128.store(ta, a3, 48);
    v128.store(ta, a4, 64);
    v128.store(ta, a5, 80);
    v128.store(ta, a6, 96);
    v128.store(ta, a7, 112);
  }
  for (; t < evPad; t += L) {
    const ta = aa + <usize>t * S;
    let a0 = v128.load(ta);
    let vp = v0 + <usize>t * S;
    for (let c = 0; c < n; c++) {
      a0 = madd<T>(v128.load_splat<T>(pa + <usize>c * S), v128.load(vp), a0);
      vp += vrow;
    }
    v128.store(ta, a0);
  }
}

/** The smallest of `next` and `point`, where point lies past c: the sweep's next break. */
// @ts-ignore: decorator
@inline function nextBreak(next: i32, c: i32, point: i32): i32 {
  return point > c && point < next ? point : next;
}

// ---- One work item. ----

/** One query block of one (batch, head) slice: output rows i0 .. i0 + rows - 1, where i0 counts
 * from the start of Lq and `local` from the start of the job's chunk.
 *
 * Each row walks two segments of keys, each a tile of BC at a time from its own first key: its
 * sinks [0, min(sinkEnd, end)) and its band [max(start, sinks' end), end). Every other key is
 * skipped, and a row's arithmetic depends only on the keys it sees and their order, not on the
 * other rows of its block nor on where its keys sit: the same bits in a prefill, in decode steps,
 * or against a cache holding only those keys. Rows' bands start at different keys (a sliding
 * window moves by one key a row), at most BR - 1 apart in a block (start and end grow by at most
 * one a row), so a block scores whole key tiles as laid out, three at a time in a [BR, 3 BC]
 * buffer, and each row reads its own tile of BC keys out of it at its own offset. */
// @ts-ignore: decorator
@inline function runItem<T>(job: usize, item: i32, scratch: usize): void {
  const S = <usize>sizeof<T>(); // bytes per number
  const L = 16 / <i32>sizeof<T>(); // lanes per vector
  const blocks = load<i32>(job + J_BLOCKS);
  const chunkRows = load<i32>(job + J_ROWS);
  const Lk = load<i32>(job + J_LK);
  const E = load<i32>(job + J_E);
  const Ev = load<i32>(job + J_EV);
  const slice = item / blocks;
  const local = (item % blocks) * BR;
  const i0 = load<i32>(job + J_ROW0) + local;
  const rows = min(BR, chunkRows - local);
  const rowsPad = (rows + 3) & ~3; // whole groups of 4 rows; the extra rows repeat row rows - 1
  const sliceAt = load<usize>(job + J_SLICES) + <usize>slice * SLICE_BYTES;
  const kv = load<i32>(sliceAt);
  const maskBase = load<i32>(sliceAt, 4);
  const startShift = load<i32>(sliceAt, 8); // the slice's RowKeys (key-range.ts)
  const endShift = load<i32>(sliceAt, 12);
  const limit = load<i32>(sliceAt, 16);
  const sinkEnd = load<i32>(sliceAt, 20);
  const sink = <T>(load<f64>(sliceAt, 24) * LOG2E); // the head's sink logit in log2 units (-inf: none)
  const query = load<usize>(job + J_Q) + <usize>(slice * chunkRows + local) * <usize>E * S; // row i0
  const key = load<usize>(job + J_K) + <usize>kv * <usize>load<i32>(job + J_K_KV);
  const keyTileBytes = <usize>load<i32>(job + J_K_TILE);
  const value = load<usize>(job + J_V) + <usize>kv * <usize>load<i32>(job + J_V_KV);
  const valueTileBytes = <usize>load<i32>(job + J_V_TILE);
  const vrow = <usize>load<i32>(job + J_V_ROW);
  const output = load<usize>(job + J_OUT) + <usize>(slice * chunkRows + local) * <usize>Ev * S; // row i0
  const maskKind = load<i32>(job + J_MASK_KIND);
  const mask = load<usize>(job + J_MASK);
  const maskI = load<i32>(job + J_MASK_I);
  const maskJ = load<i32>(job + J_MASK_J);
  const scale = load<f64>(job + J_SCALE);
  const softcap = load<f64>(job + J_SOFTCAP);
  const evPad = (Ev + L - 1) & ~(L - 1); // acc rows hold whole vectors

  // Scratch: scores [BR, WIDE] (three key tiles) -> logits (log2 units) -> p; rowMax m, rowSum l
  // and keyMax (the largest key logit, the sink aside) [BR]; acc [BR, evPad].
  const tile = (scratch + 15) & ~(<usize>15);
  const rowMax = tile + <usize>(BR * WIDE) * S;
  const rowSum = rowMax + <usize>BR * S;
  const keyMax = rowSum + <usize>BR * S;
  const acc = keyMax + <usize>BR * S;

  const negInf = v128.splat<T>(<T>-Infinity);
  const zero = v128.splat<T>(<T>0);
  // The online softmax starts with the sink: m = s, l = exp(s - m) = 1 (0 for no sink, shifted by
  // 0 as below; NaN for a NaN or +inf sink, which makes the row NaN), acc = 0 (it has no value).
  const sinkSum: T = sink == <T>-Infinity ? <T>0 : <T>1 + (sink - sink);
  for (let r = 0; r < rowsPad; r++) {
    store<T>(rowMax + <usize>r * S, sink);
    store<T>(rowSum + <usize>r * S, sinkSum);
    store<T>(keyMax + <usize>r * S, <T>-Infinity); // no key's logit seen yet
    for (let t = 0; t < evPad; t += L) {
      v128.store(acc + <usize>(r * evPad + t) * S, zero); // acc = 0
    }
  }
  // Without softcap and float mask the logit in log2 units is one multiply: score * scale·log2(e).
  const simpleLogits = softcap <= 0 && maskKind != 2;
  const scaleLog2 = v128.splat<T>(<T>(scale * LOG2E));

  for (let seg = 0; seg < 2; seg++) {
    // The block's keys of this segment: from its first row's start to its last row's end.
    const first = segFrom(seg, i0, startShift, endShift, limit, sinkEnd);
    const to = segTo(seg, i0 + rows - 1, endShift, limit, sinkEnd);
    if (to <= first) {
      continue;
    }
    let steps = 0; // the most tiles of BC keys a row of the block walks
    for (let r = 0; r < rows; r++) {
      const from = segFrom(seg, i0 + r, startShift, endShift, limit, sinkEnd);
      steps = max(steps, (segTo(seg, i0 + r, endShift, limit, sinkEnd) - from + BC - 1) / BC);
    }
    const tile0 = first / BC; // the key tile holding the block's first key
    const lastTile = (to - 1) / BC;
    for (let k = 0; k < steps; k++) {
      // The buffer holds key tiles tile0 + k .. tile0 + k + 2: scored as they come, moved down one
      // tile a step (each row's own tile k starts at buffer column `from - tile0 · BC`, in
      // [0, 2 BC), and ends within the three).
      if (k == 0) {
        for (let n = 0; n < 3 && tile0 + n <= lastTile; n++) {
          scoreTile<T>(query, rows, rowsPad, E, key + <usize>(tile0 + n) * keyTileBytes, tile + <usize>(n * BC) * S);
        }
      } else {
        for (let r = 0; r < rowsPad; r++) {
          const row = tile + <usize>(r * WIDE) * S;
          memory.copy(row, row + <usize>BC * S, <usize>(2 * BC) * S);
        }
        if (tile0 + k + 2 <= lastTile) {
          scoreTile<T>(query, rows, rowsPad, E, key + <usize>(tile0 + k + 2) * keyTileBytes, tile + <usize>(2 * BC) * S);
        }
      }

      // Steps 2-4 for each row's own tile k: keys [from + k BC, from + k BC + cols).
      for (let r = 0; r < rows; r++) {
        const i = i0 + r;
        const from = segFrom(seg, i, startShift, endShift, limit, sinkEnd);
        const j0 = from + k * BC; // the row's first key of this tile
        const cols = min(BC, segTo(seg, i, endShift, limit, sinkEnd) - j0);
        if (cols <= 0) {
          continue; // the row has walked its keys of this segment
        }
        const colsPad = (cols + 2 * L - 1) & ~(2 * L - 1); // whole pairs of vectors (only a last tile is short)
        const row = tile + <usize>(r * WIDE + from - tile0 * BC) * S;
        let vmax = negInf;
        // Steps 2-3: scale, softcap, mask, then log2 units (x · log2(e)) so that exp is exp2. Every
        // key of the row's own tile is one it may see (masks aside); the padding is -inf.
        if (simpleLogits) {
          const full = cols & ~(L - 1); // whole vectors of keys
          for (let c = 0; c < full; c += L) {
            v128.store(row + <usize>c * S, v128.mul<T>(v128.load(row + <usize>c * S), scaleLog2));
          }
          for (let c = full; c < cols; c++) {
            store<T>(row + <usize>c * S, load<T>(row + <usize>c * S) * <T>(scale * LOG2E));
          }
        } else {
          const cell = maskBase + i * maskI + j0 * maskJ;
          for (let c = 0; c < cols; c++) {
            let x = <f64>load<T>(row + <usize>c * S) * scale;
            x = <f64><T>x; // rounded to T, as a T port rounds the scaled score
            if (softcap > 0) {
              x = <f64><T>(softcap * Math.tanh(x / softcap));
            }
            let y = <T>x;
            if (maskKind == 2) {
              y += load<T>(mask + <usize>(cell + c * maskJ) * S); // -inf masks; finite is a bias
            }
            store<T>(row + <usize>c * S, y * <T>LOG2E);
          }
        }
        if (maskKind == 1) {
          const cell = maskBase + i * maskI + j0 * maskJ;
          for (let c = 0; c < cols; c++) {
            if (load<u8>(mask + <usize>(cell + c * maskJ)) == 0) {
              store<T>(row + <usize>c * S, <T>-Infinity); // false: may not attend, whatever the score
            }
          }
        }
        for (let c = cols; c < colsPad; c++) {
          store<T>(row + <usize>c * S, <T>-Infinity); // past the row's last key: weight 0
        }
        for (let c = 0; c < colsPad; c += L) {
          vmax = v128.pmax<T>(v128.load(row + <usize>c * S), vmax);
        }
        const tileMax = laneMax<T>(vmax);
        store<T>(keyMax + <usize>r * S, max<T>(load<T>(keyMax + <usize>r * S), tileMax));
        softmaxRow<T>(row, colsPad, tileMax, r, rowMax, rowSum, acc, evPad);
      }

      // Step 5, online: acc[r] += p[r][c] · value row (j0 + c) over each row's own keys, in order,
      // two rows at a time. Two rows' runs of keys are in buffer columns [lo, hi) each; a sweep
      // over both takes, between any two of their ends and the tiles' edges (where value rows
      // jump to the next tile), the keys both see together and the others row by row.
      for (let r = 0; r < rows; r += 2) {
        let loA = 0, hiA = 0, loB = 0, hiB = 0;
        for (let n = 0; n < 2; n++) {
          let lo = 0, hi = 0;
          if (r + n < rows) {
            const i = i0 + r + n;
            const from = segFrom(seg, i, startShift, endShift, limit, sinkEnd);
            const cols = min(BC, segTo(seg, i, endShift, limit, sinkEnd) - from - k * BC);
            if (cols > 0) {
              lo = from - tile0 * BC;
              hi = lo + cols;
            }
          }
          if (n == 0) {
            loA = lo;
            hiA = hi;
          } else {
            loB = lo;
            hiB = hi;
          }
        }
        if (hiA == loA) {
          loA = hiA = loB; // empty: never inside the sweep
        }
        if (hiB == loB) {
          loB = hiB = loA;
        }
        const pa = tile + <usize>(r * WIDE) * S;
        const pb = pa + <usize>WIDE * S;
        const aa = acc + <usize>(r * evPad) * S;
        const ab = aa + <usize>evPad * S;
        let c = min(loA, loB);
        const end = max(hiA, hiB);
        while (c < end) {
          let next = end;
          next = nextBreak(next, c, loA);
          next = nextBreak(next, c, hiA);
          next = nextBreak(next, c, loB);
          next = nextBreak(next, c, hiB);
          next = nextBreak(next, c, BC);
          next = nextBreak(next, c, 2 * BC);
          const inA = c >= loA && c < hiA;
          const inB = c >= loB && c < hiB;
          const v0 = value + <usize>(tile0 + k + c / BC) * valueTileBytes + <usize>(c % BC) * vrow;
          if (inA && inB) {
            weighPair<T>(pa + <usize>c * S, pb + <usize>c * S, aa, ab, v0, next - c, vrow, evPad);
          } else if (inA) {
            weighOne<T>(pa + <usize>c * S, aa, v0, next - c, vrow, evPad);
          } else if (inB) {
            weighOne<T>(pb + <usize>c * S, ab, v0, next - c, vrow, evPad);
          }
          c = next;
        }
      }
    }
  }

  // Finish the block: output = acc / l, the normalisation done once per row.
  const lastNonFinite = load<usize>(job + J_LAST_NON_FINITE) + <usize>kv * <usize>Ev * 4;
  for (let r = 0; r < rows; r++) {
    const out = output + <usize>r * <usize>Ev * S;
    const a = acc + <usize>(r * evPad) * S;
    const l = load<T>(rowSum + <usize>r * S);
    if (load<T>(keyMax + <usize>r * S) == <T>-Infinity && l == l) {
      // Every key's logit was -inf (or the row sees no key): the row attends to no key (with a
      // sink, all its weight is the sink's, which has no value); +0.0 by the contract, even where
      // value holds NaN. (keyMax = -inf with l = NaN is a NaN logit among -inf ones, which pmax
      // missed: a NaN row.)
      for (let t = 0; t < Ev; t++) {
        store<T>(out + <usize>t * S, <T>0);
      }
      continue;
    }
    for (let t = 0; t < Ev; t++) {
      // `+ 0` turns -0.0 (an underflowed negative acc) into +0.0, as a sum that starts at +0.0 gives.
      let y = load<T>(a + <usize>t * S) / l + <T>0;
      if (load<i32>(lastNonFinite + <usize>t * 4) >= 0) {
        // Some key's value is NaN or infinite in this column, maybe one this row skipped (the
        // readable port's weight 0 times it is NaN): NaN here, and simd.ts computes the row again
        // plainly, which gives the readable port's answer.
        y = <T>NaN;
      }
      store<T>(out + <usize>t * S, y);
    }
  }
}

/** Key rows [rows, E] (one kv slice's, contiguous) into transposed tiles: row j goes to key
 * position p = first + j, in tile p / BC at out + (p / BC) * tileBytes, as column p % BC of that
 * tile's E x BC numbers, which are blocks of W = 2L keys [BC / W, E, W]. Scores then run along
 * contiguous keys (one vector = L keys of one feature), the scores of one block of keys read it
 * as one contiguous run (a stride of BC numbers between features measured 7-12% slower on a
 * decode step, whose tiles come from memory), and a tile stays in cache while a query block uses
 * it. Positions
 * the rows do not reach are left as they are (a call zeroes its last tile first; a resident
 * cache's tiles start zeroed). Returns the largest |k| of the rows (NaN if one is NaN), the key's
 * part of simd.ts's bound on the logits, found here while the rows pass through registers anyway.
 * Groups of L rows at an aligned position are transposed with shuffles, L x L numbers at a time. */
// @ts-ignore: decorator
@inline function transposeKey<T>(key: usize, rows: i32, E: i32, out: usize, first: i32, tileBytes: i32): f64 {
  const S = <usize>sizeof<T>();
  const L = 16 / <i32>sizeof<T>();
  const W = 2 * L; // keys per block of the tile
  // The vector maxima use pmax (one instruction; wasm's NaN-propagating max is several), which
  // drops NaN: a NaN is noted on the side instead (x != x), and makes the result NaN at the end.
  let vmax = v128.splat<T>(<T>0);
  let vnan = v128.splat<i32>(0);
  let smax = <T>0; // scalar max: NaN propagates
  let j = 0;
  while (j < rows) {
    const p = first + j;
    const c = p % BC;
    const tileT = out + <usize>(p / BC) * <usize>tileBytes + <usize>((c / W) * E * W + c % W) * S;
    const from = key + <usize>j * <usize>E * S;
    if (c % L == 0 && j + L <= rows) {
      const rowBytes = <usize>E * S;
      let t = 0;
      for (; t + L <= E; t += L) {
        const at = from + <usize>t * S;
        const to = tileT + <usize>(t * W) * S;
        if (sizeof<T>() == 4) {
          const a0 = v128.load(at), a1 = v128.load(at + rowBytes);
          const a2 = v128.load(at + 2 * rowBytes), a3 = v128.load(at + 3 * rowBytes);
          vmax = f32x4.pmax(f32x4.pmax(vmax, f32x4.abs(a0)), f32x4.abs(a1));
          vmax = f32x4.pmax(f32x4.pmax(vmax, f32x4.abs(a2)), f32x4.abs(a3));
          vnan = v128.or(vnan, v128.or(f32x4.ne(a0, a0), f32x4.ne(a1, a1)));
          vnan = v128.or(vnan, v128.or(f32x4.ne(a2, a2), f32x4.ne(a3, a3)));
          const t0 = i32x4.shuffle(a0, a1, 0, 4, 1, 5); // a0[0] a1[0] a0[1] a1[1]
          const t1 = i32x4.shuffle(a0, a1, 2, 6, 3, 7);
          const t2 = i32x4.shuffle(a2, a3, 0, 4, 1, 5);
          const t3 = i32x4.shuffle(a2, a3, 2, 6, 3, 7);
          v128.store(to, i64x2.shuffle(t0, t2, 0, 2)); // feature t of the 4 keys
          v128.store(to + <usize>W * S, i64x2.shuffle(t0, t2, 1, 3));
          v128.store(to + <usize>(2 * W) * S, i64x2.shuffle(t1, t3, 0, 2));
          v128.store(to + <usize>(3 * W) * S, i64x2.shuffle(t1, t3, 1, 3));
        } else {
          const a0 = v128.load(at), a1 = v128.load(at + rowBytes);
          vmax = f64x2.pmax(f64x2.pmax(vmax, f64x2.abs(a0)), f64x2.abs(a1));
          vnan = v128.or(vnan, v128.or(f64x2.ne(a0, a0), f64x2.ne(a1, a1)));
          v128.store(to, i64x2.shuffle(a0, a1, 0, 2));
          v128.store(to + <usize>W * S, i64x2.shuffle(a0, a1, 1, 3));
        }
      }
      for (; t < E; t++) {
        for (let r = 0; r < L; r++) {
          const x = load<T>(from + <usize>r * rowBytes + <usize>t * S);
          smax = max<T>(smax, abs<T>(x));
          store<T>(tileT + <usize>(t * W + r) * S, x);
        }
      }
      j += L;
    } else {
      for (let t = 0; t < E; t++) {
        const x = load<T>(from + <usize>t * S);
        smax = max<T>(smax, abs<T>(x));
        store<T>(tileT + <usize>(t * W) * S, x);
      }
      j += 1;
    }
  }
  if (v128.any_true(vnan)) {
    return NaN;
  }
  return <f64>max<T>(smax, laneMax<T>(vmax));
}

/** lastNonFinite[t] = the last key row j whose value[j][t] is NaN or ±inf, or -1; for one kv slice. */
// @ts-ignore: decorator
@inline function scanValue<T>(value: usize, Lk: i32, Ev: i32, lastNonFinite: usize): void {
  const S = <usize>sizeof<T>();
  for (let t = 0; t < Ev; t++) {
    store<i32>(lastNonFinite + <usize>t * 4, -1);
  }
  for (let j = 0; j < Lk; j++) {
    for (let t = 0; t < Ev; t++) {
      const y = load<T>(value + (<usize>j * <usize>Ev + <usize>t) * S);
      if (y - y != <T>0) {
        store<i32>(lastNonFinite + <usize>t * 4, j); // y - y is NaN exactly when y is NaN or ±inf
      }
    }
  }
}

/** exp(x) as the kernel computes it: exp2(x · log2(e)) with exp2v, in place on n numbers (n a
 * multiple of the lane count). For the tests of the approximation. */
// @ts-ignore: decorator
@inline function expInPlace<T>(ptr: usize, n: i32): void {
  const L = 16 / <i32>sizeof<T>();
  const log2e = v128.splat<T>(<T>LOG2E);
  for (let i = 0; i < n; i += L) {
    const at = ptr + <usize>i * sizeof<T>();
    v128.store(at, exp2v<T>(v128.mul<T>(v128.load(at), log2e)));
  }
}

export function runItemF32(job: usize, item: i32, scratch: usize): void {
  runItem<f32>(job, item, scratch);
}
export function runItemF64(job: usize, item: i32, scratch: usize): void {
  runItem<f64>(job, item, scratch);
}
export function scanValueF32(value: usize, Lk: i32, Ev: i32, lastNonFinite: usize): void {
  scanValue<f32>(value, Lk, Ev, lastNonFinite);
}
export function scanValueF64(value: usize, Lk: i32, Ev: i32, lastNonFinite: usize): void {
  scanValue<f64>(value, Lk, Ev, lastNonFinite);
}
export function transposeKeyF32(key: usize, rows: i32, E: i32, out: usize, first: i32, tileBytes: i32): f64 {
  return transposeKey<f32>(key, rows, E, out, first, tileBytes);
}
export function transposeKeyF64(key: usize, rows: i32, E: i32, out: usize, first: i32, tileBytes: i32): f64 {
  return transposeKey<f64>(key, rows, E, out, first, tileBytes);
}
export function expF32(ptr: usize, n: i32): void {
  expInPlace<f32>(ptr, n);
}
export function expF64(ptr: usize, n: i32): void {
  expInPlace<f64>(ptr, n);
}
/** Key tiles scored (one block of rows against one tile of BC keys) since the last reset: the work
 * the tile skipping left, for the tests (counted per instance, unsynchronised: one thread's count). */
let tilesScored: i32 = 0;
export function scoredKeyTiles(): i32 {
  return tilesScored;
}
export function resetScoredKeyTiles(): void {
  tilesScored = 0;
}
/** Where simd.ts may start placing data: the end of this module's static data. */
export function heapBase(): usize {
  return __heap_base;
}
/** The kernel's block sizes, for simd.ts's work split and memory plan. */
export function queryBlock(): i32 {
  return BR;
}
export function keyTile(): i32 {
  return BC;
}

// ---- The machine's limits, for the bench (typescript/bench/worker.ts): not used by simd.ts. ----

/** The sum of n f32 at ptr (n a multiple of 32), read with 128-bit loads into 8 independent sums:
 * a streaming read whose speed, over a buffer several times the last-level cache, is the read
 * bandwidth WebAssembly gets here. The sum is returned so that the loads cannot be dropped. */
export function limitReadSum(ptr: usize, n: i32): f32 {
  let s0 = f32x4.splat(0), s1 = f32x4.splat(0), s2 = f32x4.splat(0), s3 = f32x4.splat(0);
  let s4 = f32x4.splat(0), s5 = f32x4.splat(0), s6 = f32x4.splat(0), s7 = f32x4.splat(0);
  const end = ptr + (<usize>n << 2);
  for (let p = ptr; p < end; p += 128) {
    s0 = f32x4.add(s0, v128.load(p));
    s1 = f32x4.add(s1, v128.load(p, 16));
    s2 = f32x4.add(s2, v128.load(p, 32));
    s3 = f32x4.add(s3, v128.load(p, 48));
    s4 = f32x4.add(s4, v128.load(p, 64));
    s5 = f32x4.add(s5, v128.load(p, 80));
    s6 = f32x4.add(s6, v128.load(p, 96));
    s7 = f32x4.add(s7, v128.load(p, 112));
  }
  const s = f32x4.add(f32x4.add(f32x4.add(s0, s1), f32x4.add(s2, s3)), f32x4.add(f32x4.add(s4, s5), f32x4.add(s6, s7)));
  return laneSum<f32>(s);
}

/** `iterations` rounds of 12 independent f32x4 multiply-adds (the kernel's madd: fused where
 * relaxed SIMD is built in): 12 · 4 · 2 = 96 floating-point operations a round, with chains long
 * enough apart that the CPU can keep its multiply-add units busy. The 128-bit SIMD peak is
 * 96 · iterations / time. The lanes' sum is returned so that the work cannot be dropped. The
 * factors come in as arguments: written as constants, the optimiser folds them into the loop,
 * where the engine rebuilds each vector constant from its bits at every use (several instructions
 * per multiply-add, which measured a third of the peak). */
export function limitMaddPeak(iterations: i32, factor: f32, addend: f32): f32 {
  const a = f32x4.splat(factor);
  const b = f32x4.splat(addend);
  let s0 = f32x4.splat(1), s1 = f32x4.splat(2), s2 = f32x4.splat(3), s3 = f32x4.splat(4);
  let s4 = f32x4.splat(5), s5 = f32x4.splat(6), s6 = f32x4.splat(7), s7 = f32x4.splat(8);
  let s8 = f32x4.splat(9), s9 = f32x4.splat(10), s10 = f32x4.splat(11), s11 = f32x4.splat(12);
  for (let n = 0; n < iterations; n++) {
    s0 = madd<f32>(s0, a, b);
    s1 = madd<f32>(s1, a, b);
    s2 = madd<f32>(s2, a, b);
    s3 = madd<f32>(s3, a, b);
    s4 = madd<f32>(s4, a, b);
    s5 = madd<f32>(s5, a, b);
    s6 = madd<f32>(s6, a, b);
    s7 = madd<f32>(s7, a, b);
    s8 = madd<f32>(s8, a, b);
    s9 = madd<f32>(s9, a, b);
    s10 = madd<f32>(s10, a, b);
    s11 = madd<f32>(s11, a, b);
  }
  const s = f32x4.add(
    f32x4.add(f32x4.add(f32x4.add(s0, s1), f32x4.add(s2, s3)), f32x4.add(f32x4.add(s4, s5), f32x4.add(s6, s7))),
    f32x4.add(f32x4.add(s8, s9), f32x4.add(s10, s11)),
  );
  return laneSum<f32>(s);
}
