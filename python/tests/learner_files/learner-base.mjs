// A learner's attention in plain loops over nested arrays, with one mistake switched on by name,
// for the tests of `attention-port check`: each mistake file exports makeAttention("<mistake>").
// Written independently of the project's ports and of mistakes.py, as a learner would write it.

function shapeOf(x) {
  const shape = [];
  while (Array.isArray(x)) {
    shape.push(x.length);
    x = x[0];
  }
  return shape;
}

/** A softmax with a sink logit beside the row's: its weights sum to less than 1; the sink's own
 * weight comes back too (it has no value, so the output leaves it out). */
function softmaxWithSink(row, sink, mistake) {
  // No key to see: 0, whatever the sink (unless the sink is taken for a key of its own).
  if (Math.max(...row) === -Infinity && mistake !== "sink_given_a_value") {
    return { weights: row.map(() => 0), sinkWeight: 0 };
  }
  if (mistake === "sink_after_softmax") {
    const total = 1 + Math.exp(sink); // the keys' softmax first, then the sink beside it
    return { weights: softmaxRow(row, mistake).map((w) => w / total), sinkWeight: Math.exp(sink) / total };
  }
  const max = mistake === "sink_left_out_of_max" ? Math.max(...row) : Math.max(sink, ...row);
  const exps = row.map((x) => Math.exp(x - max));
  const total = exps.reduce((a, b) => a + b, 0) + Math.exp(sink - max);
  return { weights: exps.map((e) => e / total), sinkWeight: Math.exp(sink - max) / total };
}

function softmaxRow(row, mistake) {
  if (mistake === "softmax_without_max") {
    const exps = row.map((x) => Math.exp(x));
    const sum = exps.reduce((a, b) => a + b, 0);
    return exps.map((e) => e / sum);
  }
  const max = Math.max(...row);
  if (max === -Infinity && mistake !== "fully_masked_nan") {
    return row.map(() => 0);
  }
  const exps = row.map((x) => Math.exp(x - max));
  const sum = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / sum);
}

/** A per-sequence option ([B...], the leading dims) at this matrix's place, or the number itself. */
function perSequence(x, path) {
  let node = x;
  for (let d = 0; Array.isArray(node); d++) node = node[path[d]];
  return node;
}

/** Whether the window lets the row at position p (index i) see key j: a sink key (j < sinkTokens)
 * whatever the window's left side says. */
function inWindow(window, sinkTokens, i, p, j, mistake) {
  const [left, right] = window;
  const at = mistake === "window_top_left" ? i : p; // top-left: the window at the row's index
  let from = left === null ? -Infinity : at - left;
  if (mistake === "window_one_key_too_wide") from -= 1;
  if (mistake === "window_one_key_too_narrow") from += 1;
  const to = right === null ? Infinity : at + right;
  return (j >= from || j < sinkTokens) && j <= to;
}

function attend2d(q, k, v, maskCell, options, mistake, path = []) {
  const E = q[0].length;
  const Lq = q.length;
  const Lk = mistake === "key_length_from_query" ? q.length : k.length;
  const short = mistake === "matmul_one_short";
  let scale = options.scale ?? 1 / Math.sqrt(E);
  if (mistake === "scale_forgotten") scale = 1;
  if (mistake === "scaled_by_dk" && options.scale == null) scale = 1 / E;
  if (mistake === "scale_option_ignored") scale = 1 / Math.sqrt(E);
  const blocked = mistake === "finite_sentinel" ? -1e9 : -Infinity;
  const offset = perSequence(options.queryOffset ?? 0, path);
  const window = options.window ?? null;
  const sinkTokens = options.sinkTokens ?? 0;
  let keyCount = Lk;
  if (options.kvSeqlen != null && mistake !== "kv_seqlen_ignored") {
    keyCount = perSequence(options.kvSeqlen, path);
    if (mistake === "kv_seqlen_one_short") keyCount -= 1;
    if (mistake === "kv_seqlen_one_past") keyCount += 1;
  }
  const logits = [];
  for (let i = 0; i < Lq; i++) {
    const row = [];
    for (let j = 0; j < Lk; j++) {
      let s = 0;
      const features = mistake === "last_feature_dropped" || short ? E - 1 : E;
      for (let t = 0; t < features; t++) {
        if (mistake === "key_times_query") s += k[i][t] * q[j][t];
        else s += q[i][t] * (mistake === "key_not_transposed" ? k[t][j] : k[j][t]);
      }
      s *= scale;
      const cap = mistake === "softcap_ignored" ? 0 : options.softcap;
      if (cap > 0 && mistake === "softcap_without_divide") s = cap * Math.tanh(s);
      else if (cap > 0 && mistake === "softcap_without_multiply") s = Math.tanh(s / cap);
      else if (cap > 0) s = cap * Math.tanh(s / cap);
      let allowed = true;
      if (options.isCausal && mistake !== "causal_ignored") {
        let limit = mistake === "causal_bottom_right" ? i + Lk - Lq : i + offset;
        if (mistake === "causal_diagonal_hidden") limit = i + offset - 1;
        if (mistake === "query_offset_ignored") limit = i;
        if (mistake === "query_offset_off_by_one" && offset > 0) limit = i + offset + 1;
        if (j > limit) allowed = false;
      }
      if (window !== null && !inWindow(window, sinkTokens, i, i + offset, j, mistake)) allowed = false;
      if (j >= keyCount) allowed = false;
      if (maskCell !== null) {
        const m = maskCell(i, j);
        if (typeof m === "boolean") {
          if (mistake === "mask_inverted" ? m : !m) allowed = false;
        } else if (mistake === "float_mask_as_boolean") {
          if (!m) allowed = false;
        } else {
          s += m;
        }
      }
      row.push(allowed ? s : blocked);
    }
    logits.push(row);
  }
  let weights;
  let sinkWeights = null;
  const sinks = options.sinkLogits ?? null;
  if (sinks !== null) {
    const sink = sinks[path.length > 0 ? path[path.length - 1] : 0]; // one per query head
    const rows = logits.map((row) => softmaxWithSink(row, sink, mistake));
    weights = rows.map((r) => r.weights);
    sinkWeights = rows.map((r) => r.sinkWeight);
  } else if (mistake === "softmax_wrong_axis") {
    const columns = Array.from({ length: Lk }, (_, j) => softmaxRow(logits.map((r) => r[j]), mistake));
    weights = logits.map((_, i) => columns.map((c) => c[i]));
  } else {
    weights = logits.map((row) => softmaxRow(row, mistake));
  }
  if (mistake === "weights_returned") return weights;
  const rows = mistake === "weights_times_key" ? k : v;
  const Ev = rows[0].length;
  const keys = mistake === "last_key_dropped" || short ? Lk - 1 : Lk;
  return weights.map((w, i) =>
    Array.from({ length: Ev }, (_, c) => {
      const sum = w.slice(0, keys).reduce((total, x, j) => total + x * rows[j][c], 0);
      // sink_given_a_value: the sink as one more key, with the first key's value
      const given = mistake === "sink_given_a_value" && sinkWeights !== null;
      return given ? sum + sinkWeights[i] * rows[0][c] : sum;
    }),
  );
}

export function makeAttention(mistake = null) {
  return function scaledDotProductAttention(query, key, value, options = {}) {
    const rank = shapeOf(query).length;
    const mask = mistake === "attn_mask_ignored" ? null : (options.attnMask ?? null);
    const maskShape = mask === null ? [] : shapeOf(mask);
    function maskFor(path) {
      if (mask === null) return null;
      let node = mask;
      const mr = maskShape.length;
      for (let d = 0; d < mr - 2; d++) {
        node = node[maskShape[d] === 1 ? 0 : path[rank - mr + d]];
      }
      if (mr === 1) return mistake === "mask_read_per_query" ? (i, _j) => node[i] : (_i, j) => node[j];
      return (i, j) => node[maskShape[mr - 2] === 1 ? 0 : i][maskShape[mr - 1] === 1 ? 0 : j];
    }
    function walk(q, k, v, path) {
      if (path.length === rank - 2) return attend2d(q, k, v, maskFor(path), options, mistake, path);
      if (mistake === "enable_gqa_ignored" && path.length === rank - 3 && q.length !== k.length) {
        // Query head h reads head h; past the last key/value head it reads nothing, as a loop over
        // flat arrays reads undefined there, which its arithmetic turns into NaN.
        const nothing = (x) => x[0].map((row) => row.map(() => Number.NaN));
        return q.map((qh, h) => walk(qh, k[h] ?? nothing(k), v[h] ?? nothing(v), [...path, h]));
      }
      if (path.length === rank - 3 && options.enableGqa && q.length !== k.length) {
        const group = q.length / k.length;
        const kv = (h) => {
          if (mistake === "gqa_heads_unmapped") return h; // query head h reads key head h, past the last
          return mistake === "gqa_tiled" ? h % k.length : Math.floor(h / group);
        };
        return q.map((qh, h) => walk(qh, k[kv(h)], v[kv(h)], [...path, h]));
      }
      return q.map((qn, n) => walk(qn, k[n], v[n], [...path, n]));
    }
    return walk(query, key, value, []);
  };
}
