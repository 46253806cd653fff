"""Known wrong ways to write attention, computed with numpy, so `attention-port check` can name them.

When a learner's output fails a case and matches one of these variants on that case (and the
variant differs from the truth there), check says "looks like <the mistake>". Each variant is the
right algorithm with exactly one thing done wrong, so that a match points at one fix. None of this
is a port: the expected values always come from the fixtures, and reference.py stays correct.

Each variant takes the case's inputs and options (query, key, value, attn_mask, then the options
the case holds by their Python names: is_causal, scale, enable_gqa, softcap, window, sink_tokens,
sink_logits, kv_seqlen, ...; numpy arrays and Python values) and returns the output it would give,
or None where the mistake makes no difference (no mask to invert, no grouped heads to tile).

Which keys a row sees follows the contract (docs/design.md), written here as boolean arrays rather
than key_range's spans, so that a variant can move one bound: row i of batch b sits at
p = i + o_b (o_b the query_offset, or its entry b); a window (left, right) lets it see keys
p - left <= j <= p + right, is_causal keys j <= p, the first sink_tokens keys whatever the window's
left side says, and kv_seqlen keys j < n_b; sink_logits add one logit per query head to the softmax's
denominator, with no value of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_port import reference
from attention_port.contract import CORE_OPTIONS


def _causal(query_length: int, key_length: int, query_offset) -> np.ndarray:
    """The right causal mask: query i sees keys j <= i + query_offset (0: top-left). A per-batch
    offset comes shaped [B..., 1, 1] (_per_batch), and so does the mask."""
    if np.ndim(query_offset) == 0:
        return np.tri(query_length, key_length, query_offset, dtype=bool)  # [Lq, Lk]
    return _key_index(key_length) <= _row_index(query_length) + query_offset  # [B..., Lq, Lk]


def _row_index(query_length: int) -> np.ndarray:
    return np.arange(query_length)[:, None]  # [Lq, 1]


def _key_index(key_length: int) -> np.ndarray:
    return np.arange(key_length)  # [Lk]


def _per_batch(values, rank: int):
    """A per-batch option ([B...], the key's batch dims, which lead the logits' dims) shaped to
    broadcast against logits of this rank: [B..., 1, ..., 1]; a number stays a number."""
    values = np.asarray(values)
    if values.ndim == 0:
        return values.item()
    return values.reshape(values.shape + (1,) * (rank - values.ndim))


def _band(rows: np.ndarray, keys: np.ndarray, window) -> np.ndarray:
    """The right window: a row at position p sees keys p - left <= j <= p + right, a side of None
    unbounded (left + 1 + right keys at most, FlashAttention's convention)."""
    left, right = window
    allowed = np.ones(np.broadcast_shapes(rows.shape, keys.shape), dtype=bool)
    if left is not None:
        allowed &= keys >= rows - left
    if right is not None:
        allowed &= keys <= rows + right
    return allowed


def _counted(keys: np.ndarray, kv_seqlen) -> np.ndarray:
    """The right reading of kv_seqlen: a count, so batch b sees keys j < n_b."""
    return keys < kv_seqlen


def _sink_softmax(logits: np.ndarray, sink: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The right softmax with a sink logit s per row: exp(l - m) / (exp(s - m) + sum exp(l - m)),
    m = max(s, max l), so the keys' weights sum to less than 1; and the sink's own weight,
    exp(s - m) / (the same sum). A row with nothing at all (no key, a sink of -inf) gives 0."""
    top = np.maximum(sink, np.max(logits, axis=-1, keepdims=True, initial=-np.inf))  # [..., Lq, 1]
    return _normalized(logits, sink, top)


def _normalized(logits: np.ndarray, sink: np.ndarray, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(l - top) and exp(s - top), each over their sum: the keys' weights and the sink's."""
    empty = top == -np.inf  # [..., Lq, 1]
    shift = np.where(empty, 0.0, top)
    exps, sink_exp = np.exp(logits - shift), np.exp(sink - shift)  # [..., Lq, Lk], [..., Lq, 1]
    total = sink_exp + exps.sum(axis=-1, keepdims=True)  # [..., Lq, 1]
    with np.errstate(all="ignore"):
        weights, sink_weight = exps / total, sink_exp / total
    return np.where(empty, 0.0, weights), np.where(empty, 0.0, sink_weight)


def _consecutive(query_heads: int, kv_heads: int) -> np.ndarray:
    """The right grouping: query head h reads key/value head h // (Hq / Hkv)."""
    return np.arange(query_heads) // (query_heads // kv_heads)  # [Hq]


@np.errstate(all="ignore")
def _attention(
    query,
    key,
    value,
    attn_mask=None,
    *,
    scale_of: Callable[[int, float | None], float] = lambda e, s: 1 / math.sqrt(e) if s is None else s,
    scores_of: Callable[[np.ndarray, np.ndarray], np.ndarray] = lambda q, k: q @ np.swapaxes(k, -1, -2),
    cap: Callable[[np.ndarray, float], np.ndarray] = lambda x, c: c * np.tanh(x / c),
    blocked: float = -np.inf,
    softmax: Callable[[np.ndarray], np.ndarray] = reference.softmax,
    causal: Callable[[int, int, int], np.ndarray] = _causal,
    kv_heads_of: Callable[[int, int], np.ndarray] = _consecutive,
    mask_allows: Callable[[np.ndarray], np.ndarray] = lambda m: m,
    float_mask_as: Callable[[np.ndarray], tuple[np.ndarray | None, np.ndarray]] = lambda m: (None, m),
    weighted: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] = lambda w, k, v: w @ v,
    zero_empty_rows: bool = True,
    band: Callable[[np.ndarray, np.ndarray, tuple], np.ndarray] = _band,
    band_offset: bool = True,
    counted: Callable[[np.ndarray, object], np.ndarray] = _counted,
    sink_softmax: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = _sink_softmax,
    sink_value: Callable[[np.ndarray, np.ndarray], np.ndarray | float] = lambda w, v: 0.0,
    **options: object,
) -> np.ndarray:
    """Attention with each step swappable, so a variant changes exactly one. `options` are the
    case's, by their Python names: one left out has its default (contract/options.json); one this
    function does not read (an option newer than these variants) is passed over, not refused.
    `band_offset`: whether the window sits at the rows' positions (i + query_offset) or at i."""
    defaults = {"window": None, "sink_tokens": 0, "sink_logits": None, "kv_seqlen": None}
    options = defaults | {name: option.default for name, option in CORE_OPTIONS.items()} | options
    is_causal, scale, enable_gqa = options["is_causal"], options["scale"], options["enable_gqa"]
    softcap, window, sinks = options["softcap"], options["window"], options["sink_logits"]
    query, key, value = (np.asarray(x, dtype=np.float64) for x in (query, key, value))
    rank = max(query.ndim, key.ndim)
    query_offset = _per_batch(options["query_offset"], rank)
    if enable_gqa and query.ndim >= 3 and query.shape[-3] != key.shape[-3]:
        heads = kv_heads_of(query.shape[-3], key.shape[-3])  # [Hq]
        key, value = np.take(key, heads, axis=-3), np.take(value, heads, axis=-3)
    logits = scores_of(query, key) * scale_of(query.shape[-1], scale)  # [..., Lq, Lk]
    if softcap > 0:
        logits = cap(logits, softcap)
    allowed = np.ones(logits.shape, dtype=bool)
    if is_causal:
        allowed &= causal(logits.shape[-2], logits.shape[-1], query_offset)
    keys = _key_index(logits.shape[-1])  # [Lk]
    if window is not None:
        rows = _row_index(logits.shape[-2]) + (query_offset if band_offset else 0)  # [B..., Lq, 1]
        window = tuple(window)  # the first sink_tokens keys: in view whatever its left side says
        sinks_in_view = (keys < options["sink_tokens"]) & _band(rows, keys, (None, window[1]))
        allowed &= band(rows, keys, window) | sinks_in_view
    if options["kv_seqlen"] is not None:
        allowed &= counted(keys, _per_batch(options["kv_seqlen"], rank))
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.dtype == bool:
            allowed &= mask_allows(mask)
        else:
            mask_allowed, bias = float_mask_as(mask)
            if mask_allowed is not None:
                allowed &= mask_allowed
            logits = logits + bias
    logits = np.where(allowed, logits, blocked)
    if sinks is None:
        weights = softmax(logits)  # [..., Lq, Lk]
    else:  # one sink logit per query head: [Hq] as [Hq, 1, 1] (a rank-2 query has one head)
        sink = np.asarray(sinks, dtype=np.float64).reshape((-1, 1, 1) if logits.ndim >= 3 else (1, 1))
        weights, sink_weight = sink_softmax(logits, sink)
    output = weighted(weights, key, value)  # [..., Lq, Ev]
    if zero_empty_rows:
        output = np.where(np.all(logits == -np.inf, axis=-1, keepdims=True), 0.0, output)
    if sinks is not None:
        output = output + sink_value(sink_weight, value)  # nothing: the sink has no value
    return output


# ---- The variants: one mistake each. ----


def scale_forgotten(query, key, value, attn_mask=None, **options):
    """The scores go into softmax unscaled. A dot product of E unit-variance terms has spread
    sqrt(E), so unscaled scores saturate softmax (one weight near 1, the rest near 0) as E grows."""
    return _attention(query, key, value, attn_mask, **options, scale_of=lambda e, s: 1.0)


def scaled_by_dk(query, key, value, attn_mask=None, **options):
    """The scores are divided by d_k instead of sqrt(d_k). The spread of a dot product grows like
    sqrt(d_k), so dividing by d_k over-shrinks it and the weights come out too flat."""
    if options.get("scale") is not None:
        return None
    return _attention(query, key, value, attn_mask, **options, scale_of=lambda e, s: 1 / e)


def scale_option_ignored(query, key, value, attn_mask=None, **options):
    """A given `scale` is ignored and 1/sqrt(E) used anyway. The option replaces the default."""
    if options.get("scale") is None:
        return None
    return _attention(query, key, value, attn_mask, **options, scale_of=lambda e, s: 1 / math.sqrt(e))


def softmax_without_max(query, key, value, attn_mask=None, **options):
    """Softmax as exp(x) / sum(exp(x)), without subtracting the row max first. exp overflows to
    inf past 709 (inf / inf is NaN) and underflows to 0 below -745 (0 / 0 is NaN); the shift changes
    nothing mathematically, so the stable form is always right."""

    def naive(logits):
        exps = np.exp(logits)
        return exps / exps.sum(axis=-1, keepdims=True)

    return _attention(query, key, value, attn_mask, **options, softmax=naive)


def finite_sentinel(query, key, value, attn_mask=None, **options):
    """Masked cells set to a large finite number such as -1e9 instead of -inf. A finite number is
    only a large bias: in a row where every key is masked the cells tie, and softmax spreads the
    weight evenly instead of giving the row nothing to attend to (weights and output 0)."""
    if attn_mask is None and not options.get("is_causal"):
        return None
    return _attention(query, key, value, attn_mask, **options, blocked=-1e9)


def softmax_wrong_axis(query, key, value, attn_mask=None, **options):
    """Softmax over the queries (each column sums to 1) instead of over the keys (each row). Each
    query's weights must be a distribution over the keys it looks at."""

    def by_column(logits):
        return np.swapaxes(reference.softmax(np.swapaxes(logits, -1, -2)), -1, -2)

    return _attention(query, key, value, attn_mask, **options, softmax=by_column)


def _textbook_softmax(logits: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum: NaN in a row whose every logit is -inf (-inf - (-inf) is NaN)."""
    exps = np.exp(logits - np.max(logits, axis=-1, keepdims=True))
    return exps / exps.sum(axis=-1, keepdims=True)


def fully_masked_nan(query, key, value, attn_mask=None, **options):
    """A fully-masked row left to the textbook softmax: its max is -inf, and -inf - (-inf) is NaN.
    Such a row attends to nothing, so its weights and output are defined as 0 (as in torch)."""
    return _attention(
        query, key, value, attn_mask, **options, softmax=_textbook_softmax, zero_empty_rows=False
    )


def fully_masked_zero_times_value(query, key, value, attn_mask=None, **options):
    """A fully-masked row's weights right (all 0), but its output left to weights · value: 0 · NaN
    and 0 · inf are NaN, so a value holding either reaches a row that attends to nothing. Such a
    row's output is defined as 0, whatever the values hold."""
    return _attention(query, key, value, attn_mask, **options, zero_empty_rows=False)


def mask_inverted(query, key, value, attn_mask=None, **options):
    """A boolean mask read backwards (true = blocked). As in torch, true means 'may attend'."""
    if attn_mask is None or np.asarray(attn_mask).dtype != bool:
        return None
    return _attention(query, key, value, attn_mask, **options, mask_allows=lambda m: ~m)


def causal_bottom_right(query, key, value, attn_mask=None, **options):
    """The causal mask aligned bottom-right (query i sees keys j <= i + Lk - Lq). The contract, as
    torch's is_causal, aligns it top-left: query i sees keys j <= i, also when Lq != Lk."""
    if not options.get("is_causal"):
        return None

    def bottom_right(query_length, key_length, query_offset):
        return np.tri(query_length, key_length, key_length - query_length, dtype=bool)

    return _attention(query, key, value, attn_mask, **options, causal=bottom_right)


def gqa_tiled(query, key, value, attn_mask=None, **options):
    """Grouped heads tiled (query head h reads key/value head h % Hkv) instead of consecutive
    (h // (Hq / Hkv), as torch's repeat_interleave): heads 0 and 1 share key/value head 0."""
    if not options.get("enable_gqa"):
        return None
    return _attention(
        query, key, value, attn_mask, **options, kv_heads_of=lambda hq, hkv: np.arange(hq) % hkv
    )


def key_not_transposed(query, key, value, attn_mask=None, **options):
    """The scores as Q · K instead of Q · Kᵀ. Each score pairs a query row with a key row; only with
    a square key (Lk = E) does the wrong product have the right shape, so only there is it a
    wrong number rather than an error."""
    key = np.asarray(key)
    if key.ndim < 2 or key.shape[-1] != key.shape[-2]:
        return None
    return _attention(query, key, value, attn_mask, **options, scores_of=lambda q, k: q @ k)


def weights_returned(query, key, value, attn_mask=None, **options):
    """The weights [..., Lq, Lk] returned instead of the output: the last step, weights · V, left out."""
    return _attention(query, key, value, attn_mask, **options, weighted=lambda w, k, v: w)


def weights_times_key(query, key, value, attn_mask=None, **options):
    """weights · K instead of weights · V: the output averages the key rows, not the value rows."""
    return _attention(query, key, value, attn_mask, **options, weighted=lambda w, k, v: w @ k)


def float_mask_as_boolean(query, key, value, attn_mask=None, **options):
    """A float mask read as yes/no, as a boolean one is: a cell of 0 blocks, any other number (even
    -inf) lets the key through, and nothing is added. A float mask is added to the logits."""
    if attn_mask is None or np.asarray(attn_mask).dtype == bool:
        return None
    return _attention(
        query, key, value, attn_mask, **options, float_mask_as=lambda m: (m != 0, np.zeros_like(m))
    )


def causal_ignored(query, key, value, attn_mask=None, **options):
    """is_causal ignored: every query sees every key, also the keys after it."""
    if not options.get("is_causal"):
        return None
    return _attention(query, key, value, attn_mask, **{**options, "is_causal": False})


def causal_diagonal_hidden(query, key, value, attn_mask=None, **options):
    """The causal mask off by one: query i sees keys j < i instead of j <= i. A query may attend to
    its own position; with the diagonal hidden, query 0 has nothing to attend to."""
    if not options.get("is_causal"):
        return None
    return _attention(
        query, key, value, attn_mask, **options, causal=lambda lq, lk, p: np.tri(lq, lk, p - 1, dtype=bool)
    )


def query_offset_ignored(query, key, value, attn_mask=None, **options):
    """query_offset ignored: the causal rule aligned top-left (query i sees keys j <= i) for rows
    that come after P cached keys, so a decode step sees only the first keys of the cache."""
    if not options.get("is_causal") or not options.get("query_offset"):
        return None
    return _attention(
        query, key, value, attn_mask, **options, causal=lambda lq, lk, p: np.tri(lq, lk, 0, dtype=bool)
    )


def query_offset_off_by_one(query, key, value, attn_mask=None, **options):
    """query_offset counted one too far: query i sees keys j <= i + P + 1, one key past its own
    position (the new row's position is P + i, counting from 0)."""
    if not options.get("is_causal") or not options.get("query_offset"):
        return None
    return _attention(
        query, key, value, attn_mask, **options, causal=lambda lq, lk, p: np.tri(lq, lk, p + 1, dtype=bool)
    )


def softcap_without_divide(query, key, value, attn_mask=None, **options):
    """softcap · tanh(x) instead of softcap · tanh(x / softcap): the logits squashed at the wrong scale."""
    if not options.get("softcap", 0) > 0:
        return None
    return _attention(query, key, value, attn_mask, **options, cap=lambda x, c: c * np.tanh(x))


def softcap_without_multiply(query, key, value, attn_mask=None, **options):
    """tanh(x / softcap) instead of softcap · tanh(x / softcap): the logits squashed into (-1, 1)."""
    if not options.get("softcap", 0) > 0:
        return None
    return _attention(query, key, value, attn_mask, **options, cap=lambda x, c: np.tanh(x / c))


def key_times_query(query, key, value, attn_mask=None, **options):
    """The scores as K · Qᵀ instead of Q · Kᵀ: the [Lk, Lq] transpose of the right scores, so each
    row of weights ranges over the queries. With Lq = Lk the shapes fit and only the numbers are
    wrong; where query and key are equal (the tutorial's Q = K) it even gives the right answer."""
    return _attention(
        query, key, value, attn_mask, **options, scores_of=lambda q, k: k @ np.swapaxes(q, -1, -2)
    )


def _scores_one_feature_short(q, k):
    return q[..., :-1] @ np.swapaxes(k[..., :-1], -1, -2)  # [..., Lq, Lk] without the last feature


def _weighted_one_key_short(w, k, v):
    return w[..., :-1] @ v[..., :-1, :]  # [..., Lq, Ev] without the last key's value


def last_feature_dropped(query, key, value, attn_mask=None, **options):
    """The dot product of a query and a key stops one feature short (t < E - 1): the scores leave
    out the last feature."""
    return _attention(
        query,
        key,
        value,
        attn_mask,
        **options,
        scores_of=_scores_one_feature_short,
    )


def last_key_dropped(query, key, value, attn_mask=None, **options):
    """The weighted sum over the value rows stops one key short (j < Lk - 1): the last key's value
    is left out of every output, though its weight was counted."""
    return _attention(query, key, value, attn_mask, **options, weighted=_weighted_one_key_short)


def matmul_one_short(query, key, value, attn_mask=None, **options):
    """One matrix product used for both steps with its inner loop one short (t < n - 1): the scores
    leave out the last feature and the output the last key."""
    return _attention(
        query,
        key,
        value,
        attn_mask,
        **options,
        scores_of=_scores_one_feature_short,
        weighted=_weighted_one_key_short,
    )


def key_length_from_query(query, key, value, attn_mask=None, **options):
    """Lk taken from the query's length: a loop over the keys that runs to Lq. With fewer queries
    than keys it sees only the first Lq keys (with more it reads past the last key and crashes)."""
    query, key, value = (np.asarray(x, dtype=np.float64) for x in (query, key, value))
    queries, keys = query.shape[-2], key.shape[-2]
    if query.ndim < 2 or queries >= keys:
        return None
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        attn_mask = mask[..., :queries] if mask.shape[-1] == keys else mask
    return _attention(query, key[..., :queries, :], value[..., :queries, :], attn_mask, **options)


def mask_read_per_query(query, key, value, attn_mask=None, **options):
    """A broadcast [Lk] mask read as if it had a row per query: entry i of the mask taken for the
    whole of query row i (mask[i] instead of mask[j]). A [Lk] mask holds one entry per key and
    applies to every query row alike, as numpy broadcasts it to [Lq, Lk]."""
    if attn_mask is None or np.asarray(attn_mask).ndim != 1:
        return None
    mask = np.asarray(attn_mask)
    queries = np.asarray(query).shape[-2]
    if mask.shape[0] < queries:
        return None
    return _attention(query, key, value, mask[:queries, None], **options)


def enable_gqa_ignored(query, key, value, attn_mask=None, **options):
    """enable_gqa ignored: query head h reads key/value head h, so the heads past the last key/value
    head have nothing to read (NaN, or a crash)."""
    if not options.get("enable_gqa"):
        return None
    query, key = np.asarray(query), np.asarray(key)
    if query.ndim < 3 or query.shape[-3] == key.shape[-3] or key.shape[-3] == 0:
        return None
    kv_heads = key.shape[-3]
    output = _attention(
        query,
        key,
        value,
        attn_mask,
        **options,
        kv_heads_of=lambda hq, hkv: np.minimum(np.arange(hq), hkv - 1),
    )
    output[..., kv_heads:, :, :] = np.nan
    return output


def softcap_ignored(query, key, value, attn_mask=None, **options):
    """softcap ignored: the logits are not squashed at all."""
    if not options.get("softcap", 0) > 0:
        return None
    return _attention(query, key, value, attn_mask, **{**options, "softcap": 0.0})


def attn_mask_ignored(query, key, value, attn_mask=None, **options):
    """attn_mask ignored: every key is let through and nothing is added."""
    if attn_mask is None:
        return None
    return _attention(query, key, value, None, **options)


def _window(options: dict) -> tuple | None:
    window = options.get("window")
    return None if window is None else tuple(window)


def _left_moved(by: int) -> Callable[[np.ndarray, np.ndarray, tuple], np.ndarray]:
    """The window with its left bound moved `by` keys (a negative `by` reaches further back)."""

    def band(rows, keys, window):
        left, right = window
        return _band(rows, keys, (None, right)) & (keys >= rows - left + by)

    return band


def window_one_key_too_wide(query, key, value, attn_mask=None, **options):
    """The window's left side one key too far back: a row at position p sees keys from
    p - left - 1, left + 2 + right keys (as if left counted the keys before the row's own one, and
    one more)."""
    window = _window(options)
    if window is None or window[0] is None:
        return None
    return _attention(query, key, value, attn_mask, **options, band=_left_moved(-1))


def window_one_key_too_narrow(query, key, value, attn_mask=None, **options):
    """The window's left side one key short: a row at position p sees keys from p - left + 1,
    left + right keys (left read as the number of keys the row sees, its own included)."""
    window = _window(options)
    if window is None or window[0] is None:
        return None
    return _attention(query, key, value, attn_mask, **options, band=_left_moved(1))


def window_top_left(query, key, value, attn_mask=None, **options):
    """The window placed at row i instead of the row's position i + query_offset: after P cached
    keys a decode row's window covers the first keys of the cache, not the last ones."""
    offset = options.get("query_offset", 0)
    if _window(options) is None or not np.any(np.asarray(offset)):
        return None
    return _attention(query, key, value, attn_mask, **options, band_offset=False)


def _sink_after_softmax(logits: np.ndarray, sink: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """softmax over the keys first, then the sink: the weights (summing to 1) divided by 1 + e^s."""
    weights = reference.softmax(logits)  # [..., Lq, Lk]
    total = 1.0 + np.exp(sink)  # [..., Lq, 1]
    has_key = np.any(logits > -np.inf, axis=-1, keepdims=True)
    return weights / total, np.where(has_key, np.exp(sink) / total, 0.0)


def _sink_out_of_max(logits: np.ndarray, sink: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The shift m taken over the keys alone, max_j l_ij, not max(s, max_j l_ij)."""
    return _normalized(logits, sink, np.max(logits, axis=-1, keepdims=True, initial=-np.inf))


def _with_sinks(options: dict) -> bool:
    return options.get("sink_logits") is not None


def sink_given_a_value(query, key, value, attn_mask=None, **options):
    """The sink logit treated as one more key with a value (the first key's, as if it were a
    StreamingLLM sink token): its weight, exp(s - m) over the sum, comes back in the output as
    that weight times a value row. The sink has no value: its weight is what the keys do not get."""
    if not _with_sinks(options) or np.asarray(key).shape[-2] == 0:
        return None
    return _attention(query, key, value, attn_mask, **options, sink_value=lambda w, v: w * v[..., :1, :])


def sink_after_softmax(query, key, value, attn_mask=None, **options):
    """The sink applied after the softmax: the keys' weights, already summing to 1, divided by
    1 + exp(s), as if exp(s) sat beside a sum of 1. The sink joins the softmax's own sum,
    exp(s - m) + sum_j exp(l_ij - m)."""
    if not _with_sinks(options):
        return None
    return _attention(query, key, value, attn_mask, **options, sink_softmax=_sink_after_softmax)


def sink_left_out_of_max(query, key, value, attn_mask=None, **options):
    """The row's max taken over the keys alone: exp(s - m) overflows where the sink is far above
    every logit (and +inf gives weights of 0 where s - m is inf - inf, NaN)."""
    if not _with_sinks(options):
        return None
    return _attention(query, key, value, attn_mask, **options, sink_softmax=_sink_out_of_max)


def kv_seqlen_one_short(query, key, value, attn_mask=None, **options):
    """kv_seqlen read as the index of the last key and the keys counted below it: batch b sees
    n_b - 1 keys, j < n_b - 1. It is a count: keys j < n_b, n_b of them."""
    if options.get("kv_seqlen") is None:
        return None
    return _attention(query, key, value, attn_mask, **options, counted=lambda keys, n: keys < n - 1)


def kv_seqlen_one_past(query, key, value, attn_mask=None, **options):
    """kv_seqlen read as the index of the last key (onnxruntime's seqlens_k): batch b sees keys
    j <= n_b, the key at n_b included. It is a count (ONNX's nonpad_kv_seqlen): keys j < n_b."""
    if options.get("kv_seqlen") is None:
        return None
    return _attention(query, key, value, attn_mask, **options, counted=lambda keys, n: keys <= n)


def kv_seqlen_ignored(query, key, value, attn_mask=None, **options):
    """A ragged batch padded but not masked: kv_seqlen ignored, so every sequence attends to the
    padding after its last key."""
    if options.get("kv_seqlen") is None:
        return None
    return _attention(query, key, value, attn_mask, **{**options, "kv_seqlen": None})


@dataclass(frozen=True)
class Mistake:
    variant: Callable[..., np.ndarray | None]
    # What check prints after "looks like": {E} and {sqrt_E} are the case's d_k and its root, and
    # the case's options ({softcap}, {scale}, ...) are there by name.
    says: str
    topic: str  # where the lesson does this step right (lesson.PLACES)

    @property
    def name(self) -> str:
        """A short name, for tests and docs: the variant's."""
        return self.variant.__name__

    def explain(self, features: int, params: dict | None = None) -> str:
        """What check prints after "looks like", for a case with d_k = features and these options."""
        return self.says.format(**(params or {}), E=features, sqrt_E=f"{math.sqrt(features):.3g}")


MISTAKES = (
    # The window's, the sinks' and kv_seqlen's first: they are named only where a case sets those
    # options, which a learner reaches with the earlier levels passed, and there a window one key
    # short can give what hiding the diagonal gives; the window is the thing to name.
    Mistake(
        window_one_key_too_wide,
        "the window is one key too wide: a window (left, right) lets a row at position p see keys"
        " p - left <= j <= p + right, left + 1 + right of them, its own included; yours reaches back"
        " to p - left - 1",
        topic="window",
    ),
    Mistake(
        window_one_key_too_narrow,
        "the window is one key too narrow: a window (left, right) lets a row at position p see keys"
        " p - left <= j <= p + right, left + 1 + right of them, its own included; yours starts at"
        " p - left + 1",
        topic="window",
    ),
    Mistake(
        window_top_left,
        "the window was placed at the row's index, not its position: after query_offset cached keys,"
        " row i sits at p = i + query_offset and its window covers keys p - left <= j <= p + right,"
        " the last keys of the cache, not the first",
        topic="window",
    ),
    Mistake(
        sink_given_a_value,
        "the sink logit was given a value: it joins the softmax's sum, so the keys' weights sum to"
        " less than 1, but it has no value row; the output is the keys' weights times their values"
        " alone (a row with every key hidden gives 0), and yours adds the sink's weight times the"
        " first key's value",
        topic="sink_logits",
    ),
    Mistake(
        sink_after_softmax,
        "the sink logit was applied after the softmax: head h's weights are exp(l - m) / (exp(s_h - m)"
        " + the sum of exp(l - m) over the row), the sink inside the softmax's own sum, not the"
        " keys' softmax divided by 1 + exp(s_h)",
        topic="sink_logits",
    ),
    Mistake(
        sink_left_out_of_max,
        "the sink logit was left out of the row's max: m = max(s_h, the row's largest logit), so"
        " that exp(s_h - m) cannot overflow; with m over the keys alone, a sink far above them gives"
        " exp(s_h - m) = inf and weights of 0",
        topic="sink_logits",
    ),
    Mistake(
        kv_seqlen_one_short,
        "kv_seqlen was read as an index, one key short: kv_seqlen[b] counts the keys sequence b"
        " has, so it sees keys j < kv_seqlen[b], not kv_seqlen[b] - 1 of them",
        topic="kv_seqlen",
    ),
    Mistake(
        kv_seqlen_one_past,
        "kv_seqlen was read as the index of the last key: it is a count (ONNX's nonpad_kv_seqlen),"
        " so sequence b sees keys j < kv_seqlen[b], not the key at kv_seqlen[b] too (onnxruntime's"
        " seqlens_k is that index)",
        topic="kv_seqlen",
    ),
    Mistake(
        kv_seqlen_ignored,
        "kv_seqlen was ignored: a ragged batch is padded, and sequence b's keys from kv_seqlen[b] on"
        " are padding; this case passes kv_seqlen, and your output matches what ignoring it gives"
        " (the padding attended to)",
        topic="kv_seqlen",
    ),
    Mistake(
        softmax_without_max,
        "softmax without subtracting the row max: exp(1000) overflows to Infinity, and"
        " Infinity / Infinity is NaN (exp(-1000) underflows to 0, and 0 / 0 is NaN)",
        topic="softmax_max",
    ),
    Mistake(
        scale_forgotten,
        "the scale was forgotten: multiply the scores by 1/sqrt(d_k) = 1/sqrt({E}) before softmax",
        topic="scale",
    ),
    Mistake(
        scaled_by_dk, "the scores were divided by d_k = {E} instead of sqrt(d_k) = {sqrt_E}", topic="scale"
    ),
    Mistake(
        scale_option_ignored,
        "the scale option was ignored: this case passes scale: {scale:g}, and your output matches what"
        " ignoring it gives; a given scale replaces 1/sqrt(d_k)",
        topic="options",
    ),
    Mistake(
        softmax_wrong_axis,
        "softmax over the wrong axis: each row of weights (one query, all keys) must sum to 1,"
        " not each column",
        topic="weights",
    ),
    Mistake(
        key_not_transposed,
        "the key was not transposed: the scores are Q · Kᵀ, each query row times each key row"
        " (Q · K has the same shape only because this key is square)",
        topic="scores",
    ),
    Mistake(
        weights_returned,
        "the weights were returned instead of the output: the last step multiplies them by the values,"
        " output = weights · V",
        topic="output",
    ),
    Mistake(
        weights_times_key,
        "the weights were multiplied by the keys: the output is weights · V, not weights · K",
        topic="output",
    ),
    Mistake(
        finite_sentinel,
        "masked cells were set to a finite number such as -1e9 instead of -Infinity: in a row where"
        " every key is masked they tie and share the weight instead of giving 0, and where the other"
        " logits are below -1e9 the masked keys take all of it",
        topic="sentinel",
    ),
    Mistake(
        fully_masked_zero_times_value,
        "a fully-masked row's output was computed as 0 · value: 0 · NaN and 0 · Infinity are NaN;"
        " a row with nothing to attend to gives output 0, whatever the values hold",
        topic="fully_masked",
    ),
    Mistake(
        fully_masked_nan,
        "a fully-masked row gives NaN: its max is -Infinity, and -Infinity - (-Infinity) is NaN;"
        " a row with nothing to attend to must give weights and output of 0",
        topic="fully_masked",
    ),
    Mistake(
        mask_inverted,
        "the boolean mask was read backwards: true means 'may attend', false means 'blocked'",
        topic="bool_mask",
    ),
    Mistake(
        float_mask_as_boolean,
        "the float mask was read as yes/no: a float mask is added to the logits (-Infinity blocks a"
        " key, 0 leaves its logit as it is, -1e4 is just a number)",
        topic="float_mask",
    ),
    # Before the causal rule's own mistakes: a decode row that ignores or miscounts the offset can
    # give what one of those gives on that case, and the offset is the thing to name.
    Mistake(
        query_offset_ignored,
        "query_offset was ignored: after P cached keys, query i sits at position i + P and sees"
        " keys j <= i + query_offset, not only j <= i",
        topic="causal",
    ),
    Mistake(
        query_offset_off_by_one,
        "query_offset is off by one: query i sees keys j <= i + query_offset (its own position"
        " included), not j <= i + query_offset + 1",
        topic="causal",
    ),
    Mistake(
        causal_ignored,
        "is_causal was ignored: with is_causal = True, query i sees only keys j <= i (this case passes"
        " is_causal: True, and your output matches what ignoring it gives)",
        topic="causal",
    ),
    Mistake(
        causal_diagonal_hidden,
        "the causal mask hides the diagonal: query i sees keys j <= i, itself included (j < i leaves"
        " query 0 nothing to attend to)",
        topic="causal",
    ),
    Mistake(
        causal_bottom_right,
        "the causal mask was aligned bottom-right: query i sees keys j <= i (top-left, as torch),"
        " also when there are more keys than queries",
        topic="causal",
    ),
    Mistake(
        gqa_tiled,
        "grouped heads were tiled (query head h reads key/value head h % Hkv); they are"
        " consecutive: query head h reads head floor(h / (Hq / Hkv)), as torch's repeat_interleave",
        topic="gqa",
    ),
    Mistake(
        softcap_without_divide,
        "softcap without the divide: the logits become softcap · tanh(logits / softcap),"
        " not softcap · tanh(logits)",
        topic="softcap",
    ),
    Mistake(
        softcap_without_multiply,
        "softcap without the multiply: the logits become softcap · tanh(logits / softcap),"
        " not tanh(logits / softcap)",
        topic="softcap",
    ),
    Mistake(
        key_times_query,
        "the scores were computed as K · Qᵀ (key times query transposed): they are Q · Kᵀ, each"
        " query row times each key row, [Lq, E] · [E, Lk] (with Q = K, as in the tutorial, the two"
        " agree, which is why that case passes)",
        topic="scores",
    ),
    Mistake(
        matmul_one_short,
        "a matrix product's inner loop stops one short (t < n - 1 instead of t < n): the scores"
        " leave out the last feature and the output the last key",
        topic="scores",
    ),
    Mistake(
        last_feature_dropped,
        "the last feature was dropped from the scores (a loop bound t < E - 1 instead of t < E):"
        " each score sums all E = {E} products",
        topic="scores",
    ),
    Mistake(
        last_key_dropped,
        "the last key was dropped from the output (a loop bound j < Lk - 1 instead of j < Lk):"
        " each output sums the weights times every value row",
        topic="output",
    ),
    Mistake(
        key_length_from_query,
        "Lk was taken from the query's length: the loop over keys stops at Lq, so only the first"
        " Lq keys are seen; the number of keys is key.length (Lk), the number of queries"
        " query.length (Lq)",
        topic="lengths",
    ),
    Mistake(
        mask_read_per_query,
        "the [Lk] mask was read as if it had one entry per query (mask[i] instead of mask[j]):"
        " a mask of rank 1 holds one entry per key and applies to every query row alike,"
        " broadcast to [Lq, Lk]",
        topic="mask_broadcast",
    ),
    Mistake(
        enable_gqa_ignored,
        "enable_gqa was ignored: this case passes enable_gqa: True, and your output matches what"
        " ignoring it gives (query head h read key/value head h, with nothing past the last one)",
        topic="gqa",
    ),
    Mistake(
        softcap_ignored,
        "softcap was ignored: this case passes softcap: {softcap:g}, and your output matches what"
        " ignoring it gives (the logits become softcap · tanh(logits / softcap) before the mask)",
        topic="softcap",
    ),
    Mistake(
        attn_mask_ignored,
        "attn_mask was ignored: this case passes attn_mask, and your output matches what ignoring"
        " it gives (every key let through)",
        topic="mask",
    ),
)


def same_values(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal shapes, NaN where the other has NaN, the same infinities, and finite values equal to
    about 1e-9 of their size: close enough to say two results came from the same computation."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return False
    if (np.isnan(a) != np.isnan(b)).any():
        return False
    infinite = np.isinf(a) | np.isinf(b)
    if (a[infinite] != b[infinite]).any():
        return False
    finite = ~(np.isnan(a) | infinite)
    if not finite.any():
        return True
    size = max(1.0, float(np.max(np.abs(b[finite]))))
    return bool(np.allclose(a[finite], b[finite], rtol=1e-7, atol=1e-9 * size))


def identify(inputs: dict, params: dict, expected: np.ndarray, output: np.ndarray) -> Mistake | None:
    """The known mistake `output` matches, among those that differ from the truth on this case.

    A mistake is also matched where the variant leaves a row with every key masked, and the output
    has NaN there: before the level on fully-masked rows, a learner's softmax gives NaN for them,
    and the mistake at hand is still the one to name."""
    arguments = (inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"])
    for mistake in MISTAKES:
        try:
            wrong = mistake.variant(*arguments, **params)
        except (ValueError, IndexError, ZeroDivisionError, TypeError):
            continue
        if wrong is None or same_values(wrong, expected):
            continue  # the mistake makes no difference here
        if same_values(output, wrong):
            return mistake
        try:  # the same mistake, with the textbook softmax's NaN in rows that have nothing to attend to
            with_nan = mistake.variant(*arguments, **params, softmax=_textbook_softmax, zero_empty_rows=False)
        except (ValueError, IndexError, ZeroDivisionError, TypeError):  # the variant sets its own softmax
            continue
        if same_values(output, with_nan):
            return mistake
    return None
