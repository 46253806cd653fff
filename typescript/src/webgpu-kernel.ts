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

/** The shader. Bindings: 0 the uniform Params; 1 query, 2 key, 3 value (float32); 4 the mask
 * (raw 32-bit words: bool bytes four to a word, or float32 bits); 5 one (kv slice, mask offset)
 * pair per slice; 6 per kv slice and value column, the last key row whose value is NaN or ±inf
 * (-1 for none; read only with isCausal); 7 the output. */
export const ATTENTION_WGSL = /* wgsl */ `
const QUERY_BLOCK: u32 = ${QUERY_BLOCK}u;     // Br
const KEY_TILE: u32 = ${KEY_TILE}u;           // Bc = threads per workgroup
const FEATURE_CHUNK: u32 = ${FEATURE_CHUNK}u;
const VALUE_ROWS: u32 = ${VALUE_ROWS}u;
const MASK_NONE: u32 = 0u;
const MASK_BOOL: u32 = 1u;
const MASK_FLOAT: u32 = 2u;
const NEGATIVE_INFINITY: u32 = 0xff800000u;   // bits of -inf
const POSITIVE_INFINITY: u32 = 0x7f800000u;   // bits of +inf
const LOG2_E: f32 = 1.4426950408889634;

struct Params {
  rows: u32,           // query rows of each slice in this dispatch
  rowStart: u32,       // index in Lq of the dispatch's first row (causality counts from 0)
  keyLength: u32,      // Lk
  features: u32,       // E
  valueFeatures: u32,  // Ev
  isCausal: u32,
  maskKind: u32,       // MASK_NONE, MASK_BOOL or MASK_FLOAT
  maskI: u32,          // the mask's stride along Lq (0: it broadcasts)
  maskJ: u32,          // the mask's stride along Lk
  scale: f32,
  softcap: f32,        // 0: none
  // NaN and -inf, from the host: WGSL refuses a constant expression that is NaN or infinite, so
  // the special values the shader writes come in as data. (It tests for them by their bits.)
  nan: f32,
  negativeInfinity: f32,
  queryOffset: u32,    // causal: query row i (of Lq) may see keys j <= i + queryOffset (at most Lk)
  pad1: u32,
  pad2: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> query: array<f32>;        // [slices, rows, E]
@group(0) @binding(2) var<storage, read> key: array<f32>;          // [kv slices, Lk, E]
@group(0) @binding(3) var<storage, read> value: array<f32>;        // [kv slices, Lk, Ev]
@group(0) @binding(4) var<storage, read> mask: array<u32>;         // as given, read through strides
@group(0) @binding(5) var<storage, read> slices: array<vec2<u32>>; // per slice: kv slice, mask offset
@group(0) @binding(6) var<storage, read> lastNonFinite: array<i32>; // [kv slices, Ev]
@group(0) @binding(7) var<storage, read_write> output: array<f32>;  // [slices, rows, Ev]

// Workgroup memory: 9.3 KiB, under the 16 KiB every WebGPU device offers.
var<workgroup> queryTile: array<f32, ${QUERY_BLOCK * FEATURE_CHUNK}>;  // [Br, FEATURE_CHUNK]
var<workgroup> stage: array<f32, ${FEATURE_CHUNK * KEY_TILE}>;        // key [FEATURE_CHUNK, Bc] (transposed), then value [VALUE_ROWS, 64]
var<workgroup> tile: array<f32, ${QUERY_BLOCK * KEY_TILE}>;           // [Br, Bc] logits, then p = exp(logit - m)
var<workgroup> rowMax: array<f32, ${QUERY_BLOCK}>;                    // m per row
var<workgroup> rowSum: array<f32, ${QUERY_BLOCK}>;                    // l per row
var<workgroup> rowAlpha: array<f32, ${QUERY_BLOCK}>;                  // exp(m_old - m_new) of this tile
var<workgroup> rowState: array<u32, ${QUERY_BLOCK}>;                  // 0 nothing seen, 1 a finite logit, 2 NaN row

const NOTHING_SEEN: u32 = 0u;
const SEEN: u32 = 1u;
const NAN_ROW: u32 = 2u;

fn isNan(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

fn isInfinite(x: f32) -> bool {
  return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u;
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

// Step 2's softcap, softcap * tanh(x / softcap), with the infinities mapped to ±softcap and the
// argument held where tanh is ±1 in float32 (some tanh implementations give NaN for large ones).
fn softcapped(x: f32, softcap: f32) -> f32 {
  if (isNan(x)) {
    return x;
  }
  let y = x / softcap;
  if (isInfinite(y)) {
    return select(-softcap, softcap, y > 0.0);
  }
  return softcap * tanh(clamp(y, -20.0, 20.0));
}

// The boolean mask's cell at offset n (bytes, four to a word): whether it allows the cell.
fn maskAllows(n: u32) -> bool {
  let word = mask[n / 4u];
  return ((word >> ((n % 4u) * 8u)) & 0xffu) != 0u;
}

// Steps 2-3 for one cell, (row, j) of the slice whose mask starts at maskBase (row counts from the
// dispatch's first row): the score scaled, softcapped and masked. A masked cell is -inf: a false
// boolean cell or causality whatever the score (even NaN), a float mask by addition.
fn logit(score: f32, maskBase: u32, row: u32, j: u32) -> f32 {
  var x = score * params.scale;
  if (params.softcap > 0.0) {
    x = softcapped(x, params.softcap);
  }
  let cell = maskBase + row * params.maskI + j * params.maskJ;
  if (params.isCausal != 0u && j > params.rowStart + row + params.queryOffset) {
    return params.negativeInfinity;
  }
  if (params.maskKind == MASK_BOOL && !maskAllows(cell)) {
    return params.negativeInfinity;
  }
  if (params.maskKind == MASK_FLOAT) {
    x = x + bitcast<f32>(mask[cell]);       // -inf masks; a finite value is a bias
  }
  return x;
}

// One output cell the readable port's way, for a row whose acc overflowed: each weight
// exp(logit - m) / l first, then their sum of value[., column], which stays within the values'
// own size. acc sums exp(logit - m) · value before dividing by l, so with |value| near float32's
// largest it can overflow where the exact output is an ordinary number (flash.ts does the same).
// One more pass over the keys, for such cells only; scores summed in the tiles' order.
fn normalisedCell(queryRow: u32, kv: u32, maskBase: u32, row: u32, column: u32, keyEnd: u32,
                  m: f32, l: f32) -> f32 {
  let E = params.features;
  var out = 0.0;
  for (var j = 0u; j < keyEnd; j++) {
    var score = 0.0;
    for (var e = 0u; e < E; e++) {
      score = fma(query[queryRow * E + e], key[(kv * params.keyLength + j) * E + e], score);
    }
    let x = logit(score, maskBase, row, j);
    var weight = 0.0;
    if (bitcast<u32>(x) != NEGATIVE_INFINITY) {
      weight = exp2Weight((x - m) * LOG2_E) / l;
    }
    out = fma(weight, value[(kv * params.keyLength + j) * params.valueFeatures + column], out);
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
  let kv = slices[slice].x;                 // the key/value slice it reads (grouped-query heads share one)
  let maskBase = slices[slice].y;           // the mask cell (i = 0, j = 0) of this slice
  let queryBase = (slice * params.rows + i0) * E;
  let column = c0 + t;                      // this thread's output column

  if (t < QUERY_BLOCK) {
    rowMax[t] = 0.0;                        // meaningful once rowState says a logit was seen
    rowSum[t] = 0.0;
    rowState[t] = NOTHING_SEEN;
  }
  workgroupBarrier();                       // (read by every thread, even with no key tile at all)
  var acc = array<f32, ${QUERY_BLOCK}>();  // acc[r]: sum of p * value[., column] for row r

  // Causal tile skipping: key j is allowed for query row i only when j <= i + queryOffset, so keys
  // from the block's last row + queryOffset + 1 on are masked for every row of it: those tiles are
  // never computed.
  var keyEnd = Lk;
  if (params.isCausal != 0u) {
    keyEnd = min(Lk, params.rowStart + i0 + rows + params.queryOffset);
  }

  for (var j0 = 0u; j0 < keyEnd; j0 += KEY_TILE) {
    let cols = min(KEY_TILE, keyEnd - j0);

    // Step 1: scores of key j0 + t against the block's rows, E a chunk at a time: the query
    // chunk [Br, FEATURE_CHUNK] and the key chunk, transposed to [FEATURE_CHUNK, Bc], are loaded
    // once by the whole workgroup and read from workgroup memory by every thread.
    // Zeroed here, explicitly: a declaration without an initializer inside a loop was seen to keep
    // the previous tile's sums on SwiftShader.
    var score = array<f32, ${QUERY_BLOCK}>();
    for (var e0 = 0u; e0 < E; e0 += FEATURE_CHUNK) {
      for (var n = t; n < QUERY_BLOCK * FEATURE_CHUNK; n += KEY_TILE) {
        let r = n / FEATURE_CHUNK;
        let e = e0 + n % FEATURE_CHUNK;
        queryTile[n] = select(0.0, query[queryBase + r * E + e], r < rows && e < E);
      }
      for (var n = t; n < FEATURE_CHUNK * KEY_TILE; n += KEY_TILE) {
        let c = n / FEATURE_CHUNK;          // consecutive threads read consecutive features of one key
        let e = e0 + n % FEATURE_CHUNK;
        stage[(n % FEATURE_CHUNK) * KEY_TILE + c] =
          select(0.0, key[(kv * Lk + j0 + c) * E + e], c < cols && e < E);
      }
      workgroupBarrier();
      for (var e = 0u; e < FEATURE_CHUNK; e++) {
        let k = stage[e * KEY_TILE + t];
        for (var r = 0u; r < QUERY_BLOCK; r++) {
          score[r] = fma(queryTile[r * FEATURE_CHUNK + e], k, score[r]);
        }
      }
      workgroupBarrier();
    }

    // Steps 2-3: scale, softcap, mask; the logits go to the tile (-inf past the last key).
    for (var r = 0u; r < rows; r++) {
      var x = params.negativeInfinity;
      if (t < cols) {
        x = logit(score[r], maskBase, i0 + r, j0 + t);
      }
      tile[r * KEY_TILE + t] = x;
    }
    workgroupBarrier();

    // Step 4, online: each row's owner (thread r) finds the tile's largest logit and rescales
    // what was summed so far by alpha = exp(m_old - m_new). A NaN or +inf logit makes the row NaN
    // (IEEE's softmax gives NaN there); -inf is a masked cell, weight 0.
    if (t < rows) {
      var state = rowState[t];
      var m = rowMax[t];
      let mOld = m;
      for (var c = 0u; c < cols; c++) {
        let x = tile[t * KEY_TILE + c];
        if (isNan(x) || bitcast<u32>(x) == POSITIVE_INFINITY) {
          state = NAN_ROW;
        } else if (bitcast<u32>(x) != NEGATIVE_INFINITY) {
          m = select(x, max(m, x), state != NOTHING_SEEN);
          state = max(state, SEEN);
        }
      }
      rowAlpha[t] = select(0.0, exp2Weight((mOld - m) * LOG2_E), rowState[t] == SEEN);
      rowMax[t] = m;
      rowState[t] = state;
    }
    workgroupBarrier();
    // ... every thread turns its column's logits into p = exp(logit - m) (0 for a masked cell) ...
    for (var r = 0u; r < rows; r++) {
      let x = tile[r * KEY_TILE + t];
      let p = exp2Weight((x - rowMax[r]) * LOG2_E);
      tile[r * KEY_TILE + t] = select(p, 0.0, bitcast<u32>(x) == NEGATIVE_INFINITY || rowState[r] != SEEN);
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
    // Every p is used, even p = 0 (a masked key): 0 * NaN is NaN, as in the readable port.
    for (var r = 0u; r < QUERY_BLOCK; r++) {
      acc[r] *= rowAlpha[r];
    }
    for (var v0 = 0u; v0 < cols; v0 += VALUE_ROWS) {
      workgroupBarrier();                   // the previous value rows are read by everyone
      for (var n = t; n < VALUE_ROWS * KEY_TILE; n += KEY_TILE) {
        let c = v0 + n / KEY_TILE;
        let col = c0 + n % KEY_TILE;        // consecutive threads read consecutive columns of one row
        stage[n] = select(0.0, value[(kv * Lk + j0 + c) * Ev + col], c < cols && col < Ev);
      }
      workgroupBarrier();
      for (var c = 0u; c < VALUE_ROWS; c++) {
        let y = stage[c * KEY_TILE + t];
        for (var r = 0u; r < QUERY_BLOCK; r++) {
          acc[r] = fma(tile[r * KEY_TILE + v0 + c], y, acc[r]);
        }
      }
    }
    workgroupBarrier();                     // the tile and rowAlpha are rewritten by the next tile
  }

  // Finish the block: output = acc / l, the normalisation done once per row.
  if (column >= Ev) {
    return;
  }
  var skippedNonFinite = false;             // a key a causal block skipped holds NaN or ±inf here
  if (params.isCausal != 0u) {
    skippedNonFinite = lastNonFinite[kv * Ev + column] >= i32(keyEnd);
  }
  for (var r = 0u; r < rows; r++) {
    let state = rowState[r];
    var out = acc[r] / rowSum[r];
    if (state == NOTHING_SEEN) {
      out = 0.0;                            // fully masked (or Lk = 0): +0.0, whatever value holds
    } else if (state == NAN_ROW || skippedNonFinite) {
      out = params.nan;
    } else if (isNan(out) || isInfinite(out)) {
      out = normalisedCell(slice * params.rows + i0 + r, kv, maskBase, i0 + r, column, keyEnd,
                           rowMax[r], rowSum[r]);
    }
    output[(slice * params.rows + i0 + r) * Ev + column] = out;
  }
}
`;
