/**
 * The WebGPU port's compute shader, in WGSL: flash.ts's tiled online softmax, one workgroup per
 * block of query rows. webgpu.ts's header explains the shape of the kernel and how each step maps
 * to attention.ts's five steps and to flash.ts's tiles; this file is only the shader and the sizes
 * the host must agree on.
 *
 * It is a plain string in a .ts module, not a .wgsl file, so that it reaches the GPU the same way
 * from every place the port runs: Node imports it as a module, esbuild bundles it into a page, and
 * a package ships it with the JavaScript. No loader, no fetch, no file read at run time.
 */

/** Br: query rows per workgroup. Each thread keeps Br running sums (one per row) for its column. */
export const QUERY_BLOCK = 16;
/** Bc: keys per tile, and threads per workgroup: thread t scores key j0 + t of each tile. */
export const KEY_TILE = 64;
/** Output columns per workgroup: thread t accumulates column c0 + t. Ev > 64 takes more
 * workgroups along the dispatch's z, each recomputing the scores of its rows. */
export const VALUE_COLUMNS = KEY_TILE;
/** Features of query and key staged through workgroup memory at a time (any E is taken in chunks). */
export const FEATURE_CHUNK = 16;
/** Keys of value staged through workgroup memory at a time, within a key tile. */
export const VALUE_ROWS = 16;
/** Bytes of the uniform block Params below (a multiple of 16). */
export const PARAMS_BYTES = 64;
/** Bytes of one slice's entry (the struct Slice below) in binding 5. */
export const SLICE_BYTES = 40;
/** A logit's kinds, the shader's FINITE .. NOT_A_NUMBER below: the host says with one what a sink
 * logit is. */
export const LOGIT_KIND = { FINITE: 0, MASKED: 1, PLUS_INFINITY: 2, NOT_A_NUMBER: 3 } as const;

/** The shader. Bindings: 0 the uniform Params; 1 query, 2 key, 3 value (float32, read as their
 * 32-bit patterns); 4 the mask (raw 32-bit words: bool bytes four to a word, or float32 bits); 5 one
 * Slice per slice (its kv slice, mask offset, which keys its rows see and its sink logit); 6 per kv
 * slice, key and value column, how many key rows before it hold NaN or ±inf there (read only where
 * a block skips keys and value holds one); 7 the output (float32 bit patterns).
 *
 * No IEEE special value is ever a number inside this shader. WGSL lets an implementation assume
 * that NaN and the infinities do not occur (its isNan was removed for that reason, and a shader
 * compiler may fold x != x to false or reorder arithmetic as if they cannot appear): SwiftShader
 * keeps IEEE's rules, a GPU's compiler need not. So the inputs are read as bits and a number is made
 * only of a finite pattern (a NaN or an infinity reads as 0 and sets a flag); what IEEE would give
 * is decided from flags and counts: a score whose query or key row holds NaN or ±inf is classified
 * product by product (NaN, +inf, -inf), a logit carries a kind beside its finite value (finite,
 * masked (-inf), +inf, NaN), a row is NaN, fully masked or seen by its state, value's NaN and
 * infinities reach a column as per-row bit sets, and the output is written as bits: NaN and ±inf
 * are patterns, never results of arithmetic. Where the host knows acc could overflow (|value| near
 * float32's largest), every cell is computed the readable port's way (normalisedCell) instead of
 * testing a sum for infinity. */
export const ATTENTION_WGSL = /* wgsl */ `
const QUERY_BLOCK: u32 = ${QUERY_BLOCK}u;     // Br
const KEY_TILE: u32 = ${KEY_TILE}u;           // Bc = threads per workgroup
const FEATURE_CHUNK: u32 = ${FEATURE_CHUNK}u;
const VALUE_ROWS: u32 = ${VALUE_ROWS}u;
const MASK_NONE: u32 = 0u;
const MASK_BOOL: u32 = 1u;
const MASK_FLOAT: u32 = 2u;
const EXPONENT: u32 = 0x7f800000u;            // the exponent bits: all set for NaN and ±inf
const ABS: u32 = 0x7fffffffu;
const SIGN: u32 = 0x80000000u;
const NAN_BITS: u32 = 0x7fc00000u;            // written, never computed
const POSITIVE_INFINITY_BITS: u32 = 0x7f800000u;
const NEGATIVE_INFINITY_BITS: u32 = 0xff800000u;
const LOG2_E: f32 = 1.4426950408889634;

// A logit's kind, beside its value (the value is meaningful only for FINITE).
const FINITE: u32 = ${LOGIT_KIND.FINITE}u;
const MASKED: u32 = ${LOGIT_KIND.MASKED}u;                       // -inf: weight 0
const PLUS_INFINITY: u32 = ${LOGIT_KIND.PLUS_INFINITY}u;                // makes its row NaN (inf - inf in softmax)
const NOT_A_NUMBER: u32 = ${LOGIT_KIND.NOT_A_NUMBER}u;                 // makes its row NaN

struct Params {
  rows: u32,           // query rows of each slice in this dispatch
  rowStart: u32,       // index in Lq of the dispatch's first row (a row's keys count from row 0)
  keyLength: u32,      // Lk
  features: u32,       // E
  valueFeatures: u32,  // Ev
  maskKind: u32,       // MASK_NONE, MASK_BOOL or MASK_FLOAT
  maskI: u32,          // the mask's stride along Lq (0: it broadcasts)
  maskJ: u32,          // the mask's stride along Lk
  scale: f32,          // finite (the host clamps it to float32's range)
  softcap: f32,        // 0: none; finite
  accMayOverflow: u32, // 1: sum p · value could overflow float32: normalise every cell (see below)
  countsGiven: u32,    // 1: nonFiniteBefore holds, per column, the NaN or ±inf values before each key
  pad1: u32,
  pad2: u32,
  pad3: u32,
  pad4: u32,
}

// One (batch, head) slice of the dispatch: what it reads, and which keys its rows see: key-range.ts's
// RowKeys, which the host copies in; row i (of Lq) sees [keyStart(i), keyEnd(i)) and the sinks
// [0, sinkEnd). This shader evaluates key-range.ts's formula and knows nothing of causality.
struct Slice {
  kv: u32,             // the key/value slice it reads (grouped-query heads share one)
  maskBase: u32,       // the mask cell (i = 0, j = 0) of this slice
  startShift: i32,
  endShift: i32,
  limit: i32,
  sinkEnd: i32,
  sink: f32,           // the head's sink logit, finite (sinkKind says what else it is)
  sinkKind: u32,       // FINITE, MASKED (no sink: -inf), PLUS_INFINITY or NOT_A_NUMBER
  pad0: u32,
  pad1: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> query: array<u32>;        // [slices, rows, E] float32 bits
@group(0) @binding(2) var<storage, read> key: array<u32>;          // [kv slices, Lk, E] float32 bits
@group(0) @binding(3) var<storage, read> value: array<u32>;        // [kv slices, Lk, Ev] float32 bits
@group(0) @binding(4) var<storage, read> mask: array<u32>;         // as given, read through strides
@group(0) @binding(5) var<storage, read> slices: array<Slice>;
@group(0) @binding(6) var<storage, read> nonFiniteBefore: array<u32>; // [kv slices, Lk + 1, Ev] (params.countsGiven)
@group(0) @binding(7) var<storage, read_write> output: array<u32>; // [slices, rows, Ev] float32 bits

// Workgroup memory: 13.6 KiB, under the 16 KiB every WebGPU device offers.
var<workgroup> queryTile: array<f32, ${QUERY_BLOCK * FEATURE_CHUNK}>;  // [Br, FEATURE_CHUNK] finite (specials read as 0)
var<workgroup> stage: array<u32, ${FEATURE_CHUNK * KEY_TILE}>;        // key [FEATURE_CHUNK, Bc] (transposed, finite), then value bits [VALUE_ROWS, 64]
var<workgroup> tile: array<f32, ${QUERY_BLOCK * KEY_TILE}>;           // [Br, Bc] finite logits, then p = exp(logit - m)
var<workgroup> tileKind: array<u32, ${QUERY_BLOCK * KEY_TILE}>;       // [Br, Bc] each logit's kind
var<workgroup> rowMax: array<f32, ${QUERY_BLOCK}>;                    // m per row
var<workgroup> rowSum: array<f32, ${QUERY_BLOCK}>;                    // l per row
var<workgroup> rowAlpha: array<f32, ${QUERY_BLOCK}>;                  // exp(m_old - m_new) of this tile
var<workgroup> rowState: array<u32, ${QUERY_BLOCK}>;                  // 0 nothing seen, 1 a finite logit, 2 NaN row
var<workgroup> rowKeySeen: array<u32, ${QUERY_BLOCK}>;                // 1 once a key's finite logit is seen (the sink aside)
var<workgroup> rowSpecial: array<atomic<u32>, ${QUERY_BLOCK}>;        // the query row holds NaN or ±inf
var<workgroup> keySpecial: array<atomic<u32>, ${KEY_TILE}>;           // the tile's key row holds NaN or ±inf

const NOTHING_SEEN: u32 = 0u;
const SEEN: u32 = 1u;
const NAN_ROW: u32 = 2u;

fn isFinite(bits: u32) -> bool {
  return (bits & EXPONENT) != EXPONENT;
}

// The number a finite pattern holds; 0 for NaN and ±inf, which are never made into numbers.
fn finiteOr0(bits: u32) -> f32 {
  return bitcast<f32>(select(0u, bits, isFinite(bits)));
}

struct Logit {
  value: f32,  // meaningful for FINITE only
  kind: u32,
}

// IEEE's score for a query and key row of which one holds NaN or ±inf, from the classes of the
// products alone (a finite sum cannot outweigh an infinite term): NaN if a product is NaN (NaN, or
// inf · 0) or +inf and -inf both occur, else ±inf. Such a row always has a NaN or infinite product.
fn specialScore(queryAt: u32, keyAt: u32) -> u32 {
  var nanSeen = false;
  var plus = false;
  var minus = false;
  for (var e = 0u; e < params.features; e++) {
    let q = query[queryAt + e];
    let k = key[keyAt + e];
    let qa = q & ABS;
    let ka = k & ABS;
    if (qa > EXPONENT || ka > EXPONENT) {
      nanSeen = true;                         // NaN times anything
    } else if (qa == EXPONENT || ka == EXPONENT) {
      if (qa == 0u || ka == 0u) {
        nanSeen = true;                       // inf · 0
      } else if (((q ^ k) & SIGN) == 0u) {
        plus = true;
      } else {
        minus = true;
      }
    }
  }
  if (nanSeen || (plus && minus)) {
    return NOT_A_NUMBER;
  }
  return select(MASKED, PLUS_INFINITY, plus);  // -inf is MASKED's value: weight 0
}

// Step 2 for a special score: ±inf times the scale (inf · 0 is NaN), then softcap's ±softcap.
fn scaledSpecial(kind: u32) -> Logit {
  if (kind == NOT_A_NUMBER || params.scale == 0.0) {
    return Logit(0.0, NOT_A_NUMBER);
  }
  var positive = kind == PLUS_INFINITY;
  if (params.scale < 0.0) {
    positive = !positive;
  }
  if (params.softcap > 0.0) {
    return Logit(select(-params.softcap, params.softcap, positive), FINITE);
  }
  return Logit(0.0, select(MASKED, PLUS_INFINITY, positive));
}

// softcap * tanh(x / softcap) for a finite x; tanh is ±1 in float32 past |x / softcap| = 20, and
// x / softcap is only taken below that, so it cannot overflow.
fn softcapped(x: f32) -> f32 {
  let cap = params.softcap;
  if (abs(x) * 0.05 > cap) {
    return select(-cap, cap, x > 0.0);
  }
  return cap * tanh(x / cap);
}

// 2^x for x <= 0 (a logit minus the running max, in log2 units), as simd.ts's kernel computes it:
// x = k + f with k the nearest integer and |f| <= 1/2, 2^f by its Taylor polynomial in f ln 2
// (degree 7: truncation below 2^-27 relative), 2^k written into exponent bits. Below -126 the
// result would be subnormal: it is taken in two halves, each a normal number.
fn exp2Weight(x: f32) -> f32 {
  let y = max(x, -150.0);
  let k = round(y);
  let f = y - k;
  var p = 1.5252733804059841e-5;
  p = fma(p, f, 1.540353039338161e-4);
  p = fma(p, f, 1.3333558146428443e-3);
  p = fma(p, f, 9.618129107628477e-3);
  p = fma(p, f, 5.550410866482158e-2);
  p = fma(p, f, 2.4022650695910072e-1);
  p = fma(p, f, 6.931471805599453e-1);
  p = fma(p, f, 1.0);
  let n = i32(k);
  let low = max(n, -126);  // 2^low is normal; the rest, 2^(n - low), is too
  let high = n - low;
  return p * bitcast<f32>(u32(low + 127) << 23u) * bitcast<f32>(u32(high + 127) << 23u);
}

// exp(x - m) for finite x <= m, with x - m taken as 2 · (x/2 - m/2), which cannot overflow
// (x - m can, for logits near float32's largest) and rounds the same for normal numbers.
fn weightOf(x: f32, m: f32) -> f32 {
  let half = x * 0.5 - m * 0.5;
  return exp2Weight(max(half, -100.0) * 2.0 * LOG2_E);
}

// key-range.ts's keyEnd and keyStart for row i (of Lq) of a slice: it sees no key from keyEnd on
// and none before keyStart, sinks aside.
fn keyEnd(part: Slice, i: u32) -> u32 {
  return u32(min(part.limit, max(0, i32(i) + part.endShift)));
}
fn keyStart(part: Slice, i: u32) -> u32 {
  return u32(min(i32(keyEnd(part, i)), max(0, i32(i) + part.startShift)));
}
fn sinkKeyEnd(part: Slice, i: u32) -> u32 {
  return min(u32(part.sinkEnd), keyEnd(part, i));  // sinks obey the row's end (causality, kvSeqlen)
}
fn seesKey(part: Slice, i: u32, j: u32) -> bool {
  return j < sinkKeyEnd(part, i) || (keyStart(part, i) <= j && j < keyEnd(part, i));
}
// Whether key j of row i belongs to the segment a tile walks: the sinks the row sees, or the rest
// (its band; seesKey says which of those it sees). A key in both is the sinks' alone.
fn inSegment(part: Slice, i: u32, j: u32, sinks: bool) -> bool {
  return (j < sinkKeyEnd(part, i)) == sinks;
}
// How many keys of [first, end) hold NaN or ±inf in value column \`column\` of kv slice kv.
fn nonFiniteIn(kv: u32, column: u32, first: u32, end: u32) -> u32 {
  let stride = params.valueFeatures;
  let at = kv * (params.keyLength + 1u) * stride + column;
  return nonFiniteBefore[at + end * stride] - nonFiniteBefore[at + first * stride];
}

// The boolean mask's cell at offset n (bytes, four to a word): whether it allows the cell.
fn maskAllows(n: u32) -> bool {
  let word = mask[n / 4u];
  return ((word >> ((n % 4u) * 8u)) & 0xffu) != 0u;
}

// Steps 2-3 for one cell, (row, j) of slice part (row counts from the dispatch's first row): the
// score (finite, or a special kind from specialScore) scaled, softcapped and masked. A key the row
// may not see (with isCausal, j > i + queryOffset) and a false boolean cell mask it whatever the
// score (even NaN); a float mask is added by the rules of IEEE's sum, decided on kinds.
fn logit(score: f32, scoreKind: u32, part: Slice, row: u32, j: u32) -> Logit {
  if (!seesKey(part, params.rowStart + row, j)) {
    return Logit(0.0, MASKED);
  }
  let cell = part.maskBase + row * params.maskI + j * params.maskJ;
  if (params.maskKind == MASK_BOOL && !maskAllows(cell)) {
    return Logit(0.0, MASKED);
  }
  var x = Logit(score * params.scale, FINITE);
  if (scoreKind != FINITE) {
    x = scaledSpecial(scoreKind);
  } else if (params.softcap > 0.0) {
    x.value = softcapped(x.value);
  }
  if (params.maskKind == MASK_FLOAT) {
    let m = mask[cell];
    if (isFinite(m)) {
      x.value = x.value + bitcast<f32>(m);   // a finite bias (kinds other than FINITE keep theirs)
    } else if ((m & ABS) > EXPONENT || x.kind == NOT_A_NUMBER) {
      x.kind = NOT_A_NUMBER;
    } else if ((m & SIGN) == 0u) {
      x.kind = select(PLUS_INFINITY, NOT_A_NUMBER, x.kind == MASKED);  // +inf + -inf is NaN
    } else {
      x.kind = select(MASKED, NOT_A_NUMBER, x.kind == PLUS_INFINITY);
    }
  }
  return x;
}

// Query row queryRow (of the dispatch) against key row j of slice part: the cell's logit, computed
// on its own (scores summed in the tiles' order); a NaN or ±inf in either row makes it specialScore's.
fn cellLogit(queryRow: u32, part: Slice, row: u32, j: u32) -> Logit {
  let E = params.features;
  let queryAt = queryRow * E;
  let keyAt = (part.kv * params.keyLength + j) * E;
  var score = 0.0;
  var special = false;
  for (var e = 0u; e < E; e++) {
    let q = query[queryAt + e];
    let k = key[keyAt + e];
    special = special || !isFinite(q) || !isFinite(k);
    score = fma(finiteOr0(q), finiteOr0(k), score);
  }
  if (special) {
    return logit(0.0, specialScore(queryAt, keyAt), part, row, j);
  }
  return logit(score, FINITE, part, row, j);
}

// One output cell the readable port's way: each weight exp(logit - m) / l first, then their sum
// of value[., column], which stays within the values' own size. acc sums exp(logit - m) · value
// before dividing by l, so with |value| near float32's largest it can overflow where the exact
// output is an ordinary number (flash.ts recomputes such rows too). Used for every cell of a call
// whose values are that large (the host's accMayOverflow).
fn normalisedCell(queryRow: u32, part: Slice, row: u32, column: u32, blockEnd: u32, m: f32, l: f32) -> f32 {
  var out = 0.0;
  for (var j = 0u; j < blockEnd; j++) {
    let x = cellLogit(queryRow, part, row, j);
    var weight = 0.0;
    if (x.kind == FINITE) {
      weight = weightOf(x.value, m) / l;
    }
    out = fma(weight, finiteOr0(value[(part.kv * params.keyLength + j) * params.valueFeatures + column]), out);
  }
  return out;
}

@compute @workgroup_size(${KEY_TILE})
fn main(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) t: u32) {
  let Lk = params.keyLength;
  let E = params.features;
  let Ev = params.valueFeatures;
  let slice = group.y;                      // which (batch, head) of this dispatch
  let i0 = group.x * QUERY_BLOCK;           // first query row of the block, within the dispatch
  let c0 = group.z * KEY_TILE;              // first output column of the workgroup
  let rows = min(QUERY_BLOCK, params.rows - i0);
  let part = slices[slice];                 // what it reads, and which keys its rows see
  let kv = part.kv;                         // the key/value slice it reads (grouped-query heads share one)
  let queryBase = (slice * params.rows + i0) * E;
  let column = c0 + t;                      // this thread's output column

  if (t < QUERY_BLOCK) {
    // The online softmax starts with the sink: m = s, l = exp(s - m) = 1 (it has no value). A NaN
    // or +inf sink makes the row NaN (IEEE's softmax: inf - inf), once it sees a key.
    rowMax[t] = select(0.0, part.sink, part.sinkKind == FINITE);  // meaningful once rowState says a logit was seen
    rowSum[t] = select(0.0, 1.0, part.sinkKind == FINITE);
    rowState[t] = select(select(NOTHING_SEEN, SEEN, part.sinkKind == FINITE), NAN_ROW,
                         part.sinkKind == NOT_A_NUMBER || part.sinkKind == PLUS_INFINITY);
    rowKeySeen[t] = 0u;
    atomicStore(&rowSpecial[t], 0u);
  }
  atomicStore(&keySpecial[t], 0u);
  workgroupBarrier();
  // Which of the block's query rows hold NaN or ±inf: their scores are classified, not summed.
  for (var n = t; n < rows * E; n += KEY_TILE) {
    if (!isFinite(query[queryBase + n])) {
      atomicOr(&rowSpecial[n / E], 1u);
    }
  }
  workgroupBarrier();                       // (read by every thread, even with no key tile at all)
  var acc = array<f32, ${QUERY_BLOCK}>();  // acc[r]: sum of p * value[., column] for row r
  // value's NaN and ±inf reaching this column, one bit per row: a NaN (or an infinity weighed 0),
  // a +inf and a -inf weighed > 0. IEEE's sum gives NaN, +inf or -inf from them.
  var valueNan = 0u;
  var valuePlus = 0u;
  var valueMinus = 0u;

  // Tile skipping: the block's rows see the sinks [0, sinkStop) and the band [bandFrom, blockEnd)
  // (the rows' bounds grow with the row, so the first row's start and the last row's end; with
  // isCausal, blockEnd is past the last row's position + queryOffset). Each segment is walked a
  // tile at a time; the keys between and after are masked for every row of the block, and their
  // tiles are never computed. The tiles start at multiples of Bc, the same keys for every row
  // whichever block it is in, so a row's arithmetic does not depend on its block (a prefill and
  // decode steps give the same bits); a tile holding both sinks and band keys is walked once for
  // each, and each of its cells counts in one.
  let firstRow = params.rowStart + i0;
  let lastRow = firstRow + max(rows, 1u) - 1u;
  let blockEnd = keyEnd(part, lastRow);
  let sinkStop = sinkKeyEnd(part, lastRow);
  let bandFrom = max(keyStart(part, firstRow), sinkStop);
  let bandTile = (bandFrom / KEY_TILE) * KEY_TILE;

  var sinks = sinkStop > 0u;                // walking the sinks (else the band)
  var j0 = select(bandTile, 0u, sinks);
  loop {
    if (j0 >= select(blockEnd, sinkStop, sinks)) {
      if (sinks) {
        sinks = false;                      // past the sinks: on to the band
        j0 = bandTile;
        continue;
      }
      break;
    }
    let cols = min(KEY_TILE, select(blockEnd, sinkStop, sinks) - j0);

    // Step 1: scores of key j0 + t against the block's rows, E a chunk at a time: the query
    // chunk [Br, FEATURE_CHUNK] and the key chunk, transposed to [FEATURE_CHUNK, Bc], are loaded
    // once by the whole workgroup and read from workgroup memory by every thread. A NaN or an
    // infinity is staged as 0 and flags its key (its row's flag is already set).
    // Zeroed here, explicitly: a declaration without an initializer inside a loop was seen to keep
    // the previous tile's sums on SwiftShader.
    var score = array<f32, ${QUERY_BLOCK}>();
    for (var e0 = 0u; e0 < E; e0 += FEATURE_CHUNK) {
      for (var n = t; n < QUERY_BLOCK * FEATURE_CHUNK; n += KEY_TILE) {
        let r = n / FEATURE_CHUNK;
        let e = e0 + n % FEATURE_CHUNK;
        queryTile[n] = finiteOr0(select(0u, query[queryBase + r * E + e], r < rows && e < E));
      }
      for (var n = t; n < FEATURE_CHUNK * KEY_TILE; n += KEY_TILE) {
        let c = n / FEATURE_CHUNK;          // consecutive threads read consecutive features of one key
        let e = e0 + n % FEATURE_CHUNK;
        let bits = select(0u, key[(kv * Lk + j0 + c) * E + e], c < cols && e < E);
        if (!isFinite(bits)) {
          atomicOr(&keySpecial[c], 1u);
        }
        stage[(n % FEATURE_CHUNK) * KEY_TILE + c] = bitcast<u32>(finiteOr0(bits));
      }
      workgroupBarrier();
      for (var e = 0u; e < FEATURE_CHUNK; e++) {
        let k = bitcast<f32>(stage[e * KEY_TILE + t]);
        for (var r = 0u; r < QUERY_BLOCK; r++) {
          score[r] = fma(queryTile[r * FEATURE_CHUNK + e], k, score[r]);
        }
      }
      workgroupBarrier();
    }

    // Steps 2-3: scale, softcap, mask; the logits and their kinds go to the tile (masked past the
    // last key). A cell whose query or key row holds NaN or ±inf takes its kind from specialScore.
    let keyHasSpecial = atomicLoad(&keySpecial[t]) != 0u;
    atomicStore(&keySpecial[t], 0u);        // read by this thread only: ready for the next tile
    for (var r = 0u; r < rows; r++) {
      var x = Logit(0.0, MASKED);
      if (t < cols && inSegment(part, firstRow + r, j0 + t, sinks)) {
        if (keyHasSpecial || atomicLoad(&rowSpecial[r]) != 0u) {
          x = cellLogit(slice * params.rows + i0 + r, part, i0 + r, j0 + t);
        } else {
          x = logit(score[r], FINITE, part, i0 + r, j0 + t);
        }
      }
      tile[r * KEY_TILE + t] = x.value;
      tileKind[r * KEY_TILE + t] = x.kind;
    }
    workgroupBarrier();

    // Step 4, online: each row's owner (thread r) finds the tile's largest logit and rescales
    // what was summed so far by alpha = exp(m_old - m_new). A NaN or +inf logit makes the row NaN
    // (IEEE's softmax gives NaN there); a masked cell has weight 0.
    if (t < rows) {
      var state = rowState[t];
      var m = rowMax[t];
      let mOld = m;
      for (var c = 0u; c < cols; c++) {
        let kind = tileKind[t * KEY_TILE + c];
        if (kind == NOT_A_NUMBER || kind == PLUS_INFINITY) {
          state = NAN_ROW;
          rowKeySeen[t] = 1u;
        } else if (kind == FINITE) {
          let x = tile[t * KEY_TILE + c];
          m = select(x, max(m, x), state != NOTHING_SEEN);
          state = max(state, SEEN);
          rowKeySeen[t] = 1u;
        }
      }
      var alpha = 0.0;
      if (rowState[t] == SEEN) {
        alpha = weightOf(mOld, m);
      }
      rowAlpha[t] = alpha;
      rowMax[t] = m;
      rowState[t] = state;
    }
    workgroupBarrier();
    // ... every thread turns its column's logits into p = exp(logit - m) (0 for a masked cell) ...
    for (var r = 0u; r < rows; r++) {
      var p = 0.0;
      if (tileKind[r * KEY_TILE + t] == FINITE && rowState[r] == SEEN) {
        p = weightOf(tile[r * KEY_TILE + t], rowMax[r]);
      }
      tile[r * KEY_TILE + t] = p;
    }
    workgroupBarrier();
    // ... and the owner adds them to l: l = l * alpha + sum of the tile's p.
    if (t < rows) {
      var sum = 0.0;
      for (var c = 0u; c < cols; c++) {
        sum += tile[t * KEY_TILE + c];
      }
      rowSum[t] = rowSum[t] * rowAlpha[t] + sum;
    }

    // Step 5, online: acc = acc * alpha + p · value rows of the tile, for this thread's column.
    // Every key is used, even p = 0 (a masked key): NaN in value makes the column NaN, an infinity
    // ±inf where its weight is > 0 and NaN where it is 0, as IEEE's 0 · NaN in the readable port.
    for (var r = 0u; r < QUERY_BLOCK; r++) {
      acc[r] *= rowAlpha[r];
    }
    for (var v0 = 0u; v0 < cols; v0 += VALUE_ROWS) {
      workgroupBarrier();                   // the previous value rows are read by everyone
      for (var n = t; n < VALUE_ROWS * KEY_TILE; n += KEY_TILE) {
        let c = v0 + n / KEY_TILE;
        let col = c0 + n % KEY_TILE;        // consecutive threads read consecutive columns of one row
        stage[n] = select(0u, value[(kv * Lk + j0 + c) * Ev + col], c < cols && col < Ev);
      }
      workgroupBarrier();
      for (var c = 0u; c < VALUE_ROWS; c++) {
        let bits = stage[c * KEY_TILE + t];
        if (isFinite(bits)) {
          let y = bitcast<f32>(bits);
          if (params.accMayOverflow == 0u) {
            for (var r = 0u; r < QUERY_BLOCK; r++) {
              acc[r] = fma(tile[r * KEY_TILE + v0 + c], y, acc[r]);
            }
          }
        } else if (v0 + c < cols) {
          for (var r = 0u; r < rows; r++) {
            let bit = 1u << r;
            if ((bits & ABS) > EXPONENT || tile[r * KEY_TILE + v0 + c] == 0.0) {
              valueNan |= bit;              // NaN, or inf · 0
            } else if ((bits & SIGN) == 0u) {
              valuePlus |= bit;
            } else {
              valueMinus |= bit;
            }
          }
        }
      }
    }
    workgroupBarrier();                     // the tile and rowAlpha are rewritten by the next tile
    j0 += KEY_TILE;
  }

  // Finish the block: output = acc / l, the normalisation done once per row, written as bits.
  if (column >= Ev) {
    return;
  }
  var skippedNonFinite = false;             // a key the block skipped holds NaN or ±inf here
  if (params.countsGiven != 0u) {
    skippedNonFinite = nonFiniteIn(kv, column, sinkStop, max(sinkStop, bandTile)) +
                       nonFiniteIn(kv, column, blockEnd, Lk) > 0u;
  }
  for (var r = 0u; r < rows; r++) {
    // A row that sees no key's logit gives +0.0 (with a sink, all its weight is the sink's, which
    // has no value), whatever its sink logit or value hold.
    let state = select(NOTHING_SEEN, rowState[r], rowKeySeen[r] != 0u);
    let bit = 1u << r;
    var out = 0u;                           // fully masked (or Lk = 0): +0.0, whatever value holds
    if (state == NAN_ROW || (state == SEEN && (skippedNonFinite || (valueNan & bit) != 0u ||
                                               ((valuePlus & valueMinus & bit) != 0u)))) {
      out = NAN_BITS;
    } else if (state == SEEN && (valuePlus & bit) != 0u) {
      out = POSITIVE_INFINITY_BITS;
    } else if (state == SEEN && (valueMinus & bit) != 0u) {
      out = NEGATIVE_INFINITY_BITS;
    } else if (state == SEEN && params.accMayOverflow != 0u) {
      out = bitcast<u32>(normalisedCell(slice * params.rows + i0 + r, part, i0 + r, column, blockEnd,
                                        rowMax[r], rowSum[r]));
    } else if (state == SEEN) {
      out = bitcast<u32>(acc[r] / rowSum[r]);
    }
    output[(slice * params.rows + i0 + r) * Ev + column] = out;
  }
}
`;
