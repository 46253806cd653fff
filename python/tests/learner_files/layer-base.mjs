// A learner's multi-head attention layer and RoPE in plain loops over nested arrays, with one
// mistake switched on by name, for the tests of `attention-port check`'s layer, RoPE and cache levels:
// each layer mistake file exports makeLayer("<mistake>") and makeRotary("<mistake>"). The attention
// inside is learner-base.mjs's, a learner's own; nothing here is the project's layer.
import { makeAttention } from "./learner-base.mjs";

const attend = makeAttention();
const attendWeights = makeAttention("weights_returned"); // the same core, its weights instead

const isMatrix = (x) => !Array.isArray(x[0][0]);
/** f on every [L, F] matrix of x, keeping the dims before them. */
const eachMatrix = (x, f) => (isMatrix(x) ? f(x) : x.map((m) => eachMatrix(m, f)));
/** f on matching [L, F] matrices of x and y (x_q and x_kv share their batch dims). */
const bothMatrices = (x, y, f) => (isMatrix(x) ? f(x, y) : x.map((m, n) => bothMatrices(m, y[n], f)));
/** f on every [H, L, F] block of x (the dims before the heads are batch dims). */
const eachBlock = (x, f) => (isMatrix(x[0]) ? f(x) : x.map((m) => eachBlock(m, f)));

function linear(x, w, b, mistake) {
  return eachMatrix(x, (rows) =>
    rows.map((row) => {
      if (mistake === "weights_not_transposed") {
        // x · W: the weight read as [in, out]
        return w[0].map((_, o) => row.reduce((s, xc, c) => s + xc * w[c][o], 0) + (b ? b[o] : 0));
      }
      return w.map((wo, o) => row.reduce((s, xc, c) => s + xc * wo[c], 0) + (b ? b[o] : 0));
    }),
  );
}

function split(x, heads, mistake) {
  return eachMatrix(x, (rows) => {
    const E = rows[0].length / heads;
    if (mistake === "heads_split_on_wrong_axis") {
      // [L, H·E] read as [L, E, H]: head h takes features h, h + H, h + 2H, ...
      return Array.from({ length: heads }, (_, h) => rows.map((row) => row.filter((_, f) => f % heads === h)));
    }
    if (mistake === "split_without_transpose") {
      const flat = rows.flat(); // [L, H·E] read straight as [H, L, E]
      return Array.from({ length: heads }, (_, h) =>
        rows.map((_, l) => flat.slice((h * rows.length + l) * E, (h * rows.length + l + 1) * E)),
      );
    }
    return Array.from({ length: heads }, (_, h) => rows.map((row) => row.slice(h * E, (h + 1) * E)));
  });
}

function merge(x, mistake) {
  return eachBlock(x, (heads) => {
    const L = heads[0].length;
    if (mistake === "merge_without_transpose") {
      const flat = heads.flat(2); // [H, L, Ev] read straight as [L, H·Ev]
      const width = flat.length / L;
      return Array.from({ length: L }, (_, l) => flat.slice(l * width, (l + 1) * width));
    }
    const order = mistake === "heads_in_wrong_order" ? [...heads].reverse() : heads;
    return Array.from({ length: L }, (_, l) => order.flatMap((head) => head[l]));
  });
}

function rotateMatrix(rows, positions, { theta: given = 10000, rotaryDim = null, interleaved = false }, mistake) {
  const E = rows[0].length;
  const dim = mistake === "rope_rotary_dim_ignored" ? E : (rotaryDim ?? E);
  const theta = mistake === "rope_theta_ignored" ? 10000 : given;
  const two = mistake === "rope_exponent_halved" ? 1 : 2; // the exponent -2i/d
  const half = dim / 2;
  const pairsInterleaved = mistake === "rope_conventions_swapped" ? !interleaved : interleaved;
  return rows.map((row, l) => {
    const out = [...row];
    for (let i = 0; i < half; i++) {
      const angle = positions[l] * theta ** ((-two * i) / (mistake === "rope_denominator_e" ? E : dim));
      const a = pairsInterleaved ? 2 * i : i;
      const c = pairsInterleaved ? 2 * i + 1 : i + half;
      out[a] = row[a] * Math.cos(angle) - row[c] * Math.sin(angle);
      out[c] = row[a] * Math.sin(angle) + row[c] * Math.cos(angle);
    }
    return out;
  });
}

export function makeRotary(mistake = null) {
  return function applyRotary(x, positions, options = {}) {
    const depth = (p) => (Array.isArray(p) ? 1 + depth(p[0]) : 0);
    const dim = options.rotaryDim ?? null;
    const E = eachMatrix(x, (rows) => rows[0].length);
    const features = typeof E === "number" ? E : E.flat(Infinity)[0];
    if (dim !== null && (dim % 2 !== 0 || dim < 2 || dim > features)) {
      throw new Error(`rotaryDim must be even, from 2 to ${features}, got ${dim}`);
    }
    const walk = (part, pos) => {
      if (isMatrix(part)) {
        if (pos.length !== part.length) throw new Error(`${pos.length} positions for ${part.length} rows`);
        return rotateMatrix(part, pos, options, mistake);
      }
      // positions [B..., L]: a batch dim of x that positions has too
      return part.map((p, n) => walk(p, depth(pos) > 1 ? pos[n] : pos));
    };
    return walk(x, positions);
  };
}

const shapeOf = (x) => (Array.isArray(x) ? [x.length, ...shapeOf(x[0])] : []);
/** A tensor's shape, nested or {shape, data} (a cache of zero positions comes so). */
const shapeOfTensor = (x) => (Array.isArray(x) ? shapeOf(x) : x.shape);

/** The cached rows, then the new ones, in every [H, L, F] block: [B..., H, P+L, F]. An empty
 * cache ({shape, data}) adds nothing. */
function appendRows(past, x) {
  if (!Array.isArray(past)) return x;
  const each = (p, n) => (isMatrix(p[0]) ? p.map((head, h) => [...head, ...n[h]]) : p.map((m, i) => each(m, n[i])));
  return each(past, x);
}

/** The layer; makeLayer(mistake, { cache: false }) is one written before the KV cache, which
 * leaves pastKey, pastValue and returnCache unread. */
export function makeLayer(mistake = null, { cache = true } = {}) {
  const applyRotary = makeRotary(mistake);
  return function multiHeadAttention(xQ, xKv, params, options) {
    const { numHeads, numKvHeads = null, attnMask = null, isCausal = false, scale = null } = options;
    const { softcap = 0, needWeights = false } = options;
    const rope = mistake === "rope_ignored" ? null : (options.rope ?? null); // rope_ignored: never read
    const { pastKey = null, pastValue = null, returnCache = false } = cache ? options : {};
    // past_ignored: the past is taken, checked and then never read
    const kvHeads = numKvHeads ?? numHeads;
    if (rope !== null && xKv !== null) throw new Error("rope needs self-attention");
    if ((pastKey === null) !== (pastValue === null)) throw new Error("pastKey and pastValue come together");
    const D = eachMatrix(xQ, (rows) => rows[0].length);
    const features = typeof D === "number" ? D : D.flat(Infinity)[0];
    // A weight's outputs and inputs, as this learner reads the weights.
    const untransposed = mistake === "weights_not_transposed";
    const outs = (w) => (untransposed ? w[0].length : w.length);
    const ins = (w) => (untransposed ? w.length : w[0].length);
    if (ins(params.wQ) !== features) throw new Error(`wQ takes ${ins(params.wQ)} features, xQ has ${features}`);
    if (outs(params.wQ) % numHeads !== 0) throw new Error(`wQ's outputs do not split into ${numHeads} heads`);
    if (outs(params.wK) !== kvHeads * (outs(params.wQ) / numHeads)) {
      throw new Error("wK's outputs do not match the heads");
    }
    const source = xKv ?? xQ;
    // Step 1: project
    let q = linear(xQ, params.wQ, params.bQ, mistake);
    let k = linear(source, params.wK, params.bK, mistake);
    let v = linear(source, params.wV, params.bV, mistake);
    // Step 2: split heads
    q = split(q, numHeads, mistake);
    k = split(k, kvHeads, mistake);
    v = split(v, kvHeads, mistake);
    // The cache holds P earlier positions: its shape is the keys' but for the rows
    let cached = 0;
    for (const [name, past, x] of [["pastKey", pastKey, k], ["pastValue", pastValue, v]]) {
      if (past === null) continue;
      const [want, got] = [shapeOf(x), shapeOfTensor(past)];
      if (got.length !== want.length || got.some((n, d) => d !== got.length - 2 && n !== want[d])) {
        throw new Error(`${name} [${got}] does not fit the layer's [${want}]`);
      }
      cached = mistake === "past_ignored" ? 0 : got[got.length - 2];
    }
    const unturned = k; // the new keys as projected
    // Step 3: rotate queries and keys by their positions P..P+L-1
    if (rope !== null) {
      const L = eachMatrix(xQ, (rows) => rows.length);
      const length = typeof L === "number" ? L : L.flat(Infinity)[0];
      const start = mistake === "rope_positions_from_zero" ? 0 : cached;
      const positions = Array.from({ length }, (_, l) => start + l);
      const turn = (x) => eachBlock(x, (heads) => applyRotary(heads, positions, rope));
      q = turn(q);
      k = turn(k);
      if (mistake === "rope_applied_to_value") v = turn(v);
    }
    let cacheKey = mistake === "keys_cached_before_rope" ? unturned : null; // null: the keys attended
    if (pastKey !== null && mistake !== "past_ignored") {
      const ahead = mistake === "new_keys_prepended" && Array.isArray(pastKey); // the new rows first
      k = ahead ? appendRows(k, pastKey) : appendRows(pastKey, k);
      v = ahead ? appendRows(v, pastValue) : appendRows(pastValue, v);
      if (cacheKey !== null) cacheKey = appendRows(pastKey, cacheKey);
    }
    cacheKey = cacheKey ?? k;
    // Step 4: attend, every head; the new rows sit after the cached ones
    const queryOffset = mistake === "cache_offset_ignored" ? 0 : cached;
    // scaled_by_model_dim: 1/√D, the layer's features, where each head's core scales by 1/√E
    const scaled = mistake === "scaled_by_model_dim" && scale === null ? 1 / Math.sqrt(features) : scale;
    const core = { attnMask, isCausal, scale: scaled, softcap, enableGqa: kvHeads !== numHeads, queryOffset };
    // the window, the sinks and the key counts: the core's, passed on as given
    const { window = null, sinkTokens = 0, sinkLogits = null, kvSeqlen = null } = options;
    Object.assign(core, { window, sinkTokens, sinkLogits, kvSeqlen });
    const heads = attend(q, k, v, core);
    // Steps 5 and 6: merge heads, out-project
    const merged = merge(heads, mistake);
    const output = mistake === "out_projection_forgotten" ? merged : linear(merged, params.wO, params.bO, mistake);
    if (!needWeights && !returnCache) return output;
    // cache_expanded_to_query_heads: each query head's copy of its key/value head kept
    const group = numHeads / kvHeads;
    const expand = (x) => eachBlock(x, (heads) => heads.flatMap((head) => Array(group).fill(head)));
    const expanded = mistake === "cache_expanded_to_query_heads";
    const kept = expanded ? { presentKey: expand(cacheKey), presentValue: expand(v) } : { presentKey: cacheKey, presentValue: v };
    const cacheAfter = returnCache ? kept : {};
    return { output, ...(needWeights ? { weights: attendWeights(q, k, v, core) } : {}), ...cacheAfter };
  };
}
