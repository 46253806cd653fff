"""Which keys each query row may see: decided here, once, and read by every port.

Row i of batch index b (the B... dims flattened) sees the keys

    [0, sink_key_end(i))  and  [start(i), end(i)),   end(i)   = clamp(i + end_shift, 0, limit)
                                                      start(i) = clamp(i + start_shift, 0, end(i))
                                                      sink_key_end(i) = min(sink_end, end(i))

from four integers per batch index (RowKeys), which key_range derives from the checked options.
Row i sits at position p = i + o_b (o_b: query_offset, or query_offset[b] for a ragged batch).
With window (L, R), is_causal c, kv_seqlen n_b (Lk without it) and sink_tokens S:
  - end_shift = o_b + 1 + min(R, 0 if c else inf): key j <= p + R, and j <= p with is_causal;
    with neither bound, every key (the shift clamps to Lk);
  - start_shift = o_b - L: key j >= p - L; -Lq (every row from key 0) without a left side;
  - limit = n_b: no key from kv_seqlen[b] on;
  - sink_end = min(S, limit): keys 0..S-1 whatever the window's left side says, but a row sees a
    sink only where it sees up to it (sink_key_end): is_causal, the window's right side and kv_seqlen
    still apply to sinks.
Without these options (is_causal and query_offset alone), no row starts late, no key is a sink and
limit is Lk. Its twin is typescript/src/key-range.ts: the same record and the same names, in
camelCase; that file's header says why the range has this shape (a few numbers per batch index,
monotone in the row) and how the tiled ports use it. Here the numpy and torch ports read it whole,
as visible_keys's boolean array.

The oracle (golden/oracle.py) decides the same thing on its own: it is the truth the ports are
held to, so it shares no code with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from attention_port.inputs import AttentionShapes, leaves

__all__ = [
    "KeyRange",
    "RowKeys",
    "block_end",
    "key_end",
    "key_range",
    "key_start",
    "row_keys",
    "sees_every_key",
    "sees_key",
    "sink_key_end",
    "slice_keys",
    "visible_keys",
]


@dataclass(frozen=True)
class RowKeys:
    """The keys the query rows of one batch index see (see the module docstring for the formula)."""

    start_shift: int  # start(i) = clamp(i + start_shift, 0, end(i))
    end_shift: int  # end(i) = clamp(i + end_shift, 0, limit)
    limit: int  # no row sees a key from here on: kv_seqlen[b], or Lk
    sink_end: int  # keys [0, sink_end) are sinks, seen up to sink_key_end(i) (0: no sinks)


@dataclass(frozen=True)
class KeyRange:
    """Each batch index's RowKeys, and the shapes they are laid against."""

    batches: tuple[RowKeys, ...]  # [B...] flattened (one entry without batch dims)
    heads: int  # Hq: consecutive slices of one batch index
    shapes: AttentionShapes


def key_range(
    shapes: AttentionShapes,
    *,
    is_causal: bool,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    kv_seqlen: int | list | None = None,
) -> KeyRange:
    """The key range of a call, from its checked options (inputs.check_options and
    check_option_shapes: query_offset and kv_seqlen an integer or [B...] of them) and shapes."""
    count = prod(shapes.batch)
    offsets = _per_batch(query_offset, shapes, count)  # o_b
    lengths = _per_batch(shapes.key_length if kv_seqlen is None else kv_seqlen, shapes, count)  # n_b
    options = {"is_causal": is_causal, "window": window, "sink_tokens": sink_tokens}
    batches = tuple(
        row_keys(shapes.query_length, shapes.key_length, query_offset=o, kv_seqlen=n, **options)
        for o, n in zip(offsets, lengths, strict=True)
    )
    return KeyRange(batches=batches, heads=shapes.query_heads, shapes=shapes)


def _per_batch(x: int | list, shapes: AttentionShapes, count: int) -> list[int]:
    """One integer per batch index (row-major over [B...]): one integer stands for every one."""
    if isinstance(x, list):
        return [int(n) for _, n in leaves(x, len(shapes.batch))]
    return [int(x)] * count


def row_keys(
    lq: int,
    lk: int,
    *,
    is_causal: bool,
    query_offset: int,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    kv_seqlen: int | None = None,
) -> RowKeys:
    """The RowKeys of Lq query rows against Lk keys, from one batch index's checked options
    (query_offset and kv_seqlen its own integers)."""

    def shift(x: int) -> int:  # clamped to [-Lq, Lk]: no row's bounds change (see key-range.ts)
        return max(-lq, min(lk, x))

    left, right = window if window is not None else (None, None)
    # The last key row i may see is p + right, and p itself with is_causal (right >= 0 or unbounded).
    ahead = [bound for bound in (right, 0 if is_causal else None) if bound is not None]
    limit = lk if kv_seqlen is None else kv_seqlen
    return RowKeys(
        start_shift=-lq if left is None else shift(query_offset - left),  # keys j >= p - left
        end_shift=shift(query_offset + 1 + min(ahead)) if ahead else lk,  # keys j <= p + min(ahead)
        limit=limit,
        sink_end=min(sink_tokens, limit),
    )


def slice_keys(key_range: KeyRange, index: int) -> RowKeys:
    """The RowKeys of (batch, head) slice `index` (row-major over [B..., Hq])."""
    return key_range.batches[index // key_range.heads]


def key_end(keys: RowKeys, i):
    """end(i): row i sees no key from here on, sinks aside. i: an int or an array of them."""
    return np.minimum(keys.limit, np.maximum(0, i + keys.end_shift))


def key_start(keys: RowKeys, i):
    """start(i): row i sees no key before it, sinks aside. i: an int or an array of them."""
    return np.minimum(key_end(keys, i), np.maximum(0, i + keys.start_shift))


def sink_key_end(keys: RowKeys, i):
    """Where the sinks row i sees end: min(sink_end, end(i)), since is_causal, the window's right
    side and kv_seqlen hide a sink as they hide any key. i: an int or an array of them."""
    return np.minimum(keys.sink_end, key_end(keys, i))


def sees_key(keys: RowKeys, i, j):
    """Whether row i sees key j (arrays of rows and keys broadcast, numpy-style)."""
    return (j < sink_key_end(keys, i)) | ((key_start(keys, i) <= j) & (j < key_end(keys, i)))


def block_end(keys: RowKeys, last: int) -> int:
    """Where the keys that rows up to `last` may see end (the bounds grow with the row; a row's
    sinks end by its end(i))."""
    return int(key_end(keys, last))


def sees_every_key(key_range: KeyRange, rows: int) -> bool:
    """Whether rows 0 .. rows - 1 of every batch index see every key."""
    lk = key_range.shapes.key_length
    # The earliest end is row 0's, the latest start the last row's; the sinks may cover the start.
    return rows == 0 or all(
        key_end(keys, 0) >= lk and key_start(keys, rows - 1) <= sink_key_end(keys, rows - 1)
        for keys in key_range.batches
    )


def visible_keys(key_range: KeyRange) -> np.ndarray:
    """Whether query row i sees key j, for every batch index: [B..., 1, Lq, Lk] booleans (the 1
    broadcasts over the heads; [Lq, Lk] for rank-2 inputs), to combine with the scores' mask. A
    dim of size 1 broadcasts: where every batch index has the same RowKeys, one [Lq, Lk]
    grid stands for them all, and where every row sees every key, one True (nothing to build)."""
    shapes = key_range.shapes
    heads = (1,) if shapes.has_heads else ()
    if sees_every_key(key_range, shapes.query_length):
        return np.ones((1,) * (len(shapes.batch) + len(heads) + 2), dtype=bool)  # [1..., 1, 1, 1]
    i = np.arange(shapes.query_length)[:, None]  # [Lq, 1]
    j = np.arange(shapes.key_length)  # [Lk]
    kinds = set(key_range.batches)
    batch = (1,) * len(shapes.batch) if len(kinds) == 1 else shapes.batch
    rows = [sees_key(keys, i, j) for keys in (kinds if len(kinds) == 1 else key_range.batches)]
    grid = (shapes.query_length, shapes.key_length)
    return np.array(rows, dtype=bool).reshape(*batch, *heads, *grid)  # [B..., 1, Lq, Lk]
