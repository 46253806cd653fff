"""Which keys each query row may see: decided here, once, and read by every port.

Row i of batch index b (the B... dims flattened) sees the keys

    [0, sink_end)  and  [start(i), end(i)),   end(i)   = clamp(i + end_shift, 0, limit)
                                              start(i) = clamp(i + start_shift, 0, end(i))

from four integers per batch index (RowKeys), which key_range derives from the checked options.
Today: with is_causal, query i sits at position i + query_offset and sees the keys
j <= i + query_offset, so end_shift = query_offset + 1; without it every row sees every key. No row
starts late (start_shift = -Lq), no key is a sink (sink_end = 0) and limit is Lk. Its twin is
typescript/src/key-range.ts: the same record and the same names, in camelCase; that file's header
says why the range has this shape (a few numbers per batch index, monotone in the row, room for a
sliding window, sink tokens, per-batch key counts and offsets) and how the tiled ports use it.
Here the numpy and torch ports read it whole, as visible_keys's boolean array.

The oracle (golden/oracle.py) decides the same thing on its own: it is the truth the ports are
held to, so it shares no code with them.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from attention_port.inputs import AttentionShapes

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
    "slice_keys",
    "visible_keys",
]


@dataclass(frozen=True)
class RowKeys:
    """The keys the query rows of one batch index see (see the module docstring for the formula)."""

    start_shift: int  # start(i) = clamp(i + start_shift, 0, end(i))
    end_shift: int  # end(i) = clamp(i + end_shift, 0, limit)
    limit: int  # no row sees a key from here on, sinks aside (Lk today)
    sink_end: int  # every row sees keys [0, sink_end) (0 today: no sinks)


@dataclass(frozen=True)
class KeyRange:
    """Each batch index's RowKeys, and the shapes they are laid against."""

    batches: tuple[RowKeys, ...]  # [B...] flattened (one entry without batch dims)
    heads: int  # Hq: consecutive slices of one batch index
    shapes: AttentionShapes


def key_range(shapes: AttentionShapes, *, is_causal: bool, query_offset: int) -> KeyRange:
    """The key range of a call, from its checked options and shapes."""
    keys = row_keys(
        shapes.query_length, shapes.key_length, is_causal=is_causal, query_offset=query_offset
    )  # the same for every batch index
    return KeyRange(batches=(keys,) * prod(shapes.batch), heads=shapes.query_heads, shapes=shapes)


def row_keys(lq: int, lk: int, *, is_causal: bool, query_offset: int) -> RowKeys:
    """The RowKeys of Lq query rows against Lk keys, from the checked options."""

    def shift(x: int) -> int:  # clamped to [-Lq, Lk]: no row's bounds change (see key-range.ts)
        return max(-lq, min(lk, x))

    return RowKeys(
        start_shift=-lq,  # start(i) = 0 for every row
        end_shift=shift(query_offset + 1) if is_causal else lk,  # causal: keys j <= i + query_offset
        limit=lk,
        sink_end=0,
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


def sees_key(keys: RowKeys, i, j):
    """Whether row i sees key j (arrays of rows and keys broadcast, numpy-style)."""
    return (j < keys.sink_end) | ((key_start(keys, i) <= j) & (j < key_end(keys, i)))


def block_end(keys: RowKeys, last: int) -> int:
    """Where the keys that rows up to `last` may see end (the bounds grow with the row)."""
    return int(max(keys.sink_end, key_end(keys, last)))


def sees_every_key(key_range: KeyRange, rows: int) -> bool:
    """Whether rows 0 .. rows - 1 of every batch index see every key."""
    lk = key_range.shapes.key_length
    # The latest start is the last row's, the earliest end row 0's; the sinks may cover the start.
    return rows == 0 or all(
        keys.sink_end >= lk or (key_start(keys, rows - 1) <= keys.sink_end and key_end(keys, 0) >= lk)
        for keys in key_range.batches
    )


def visible_keys(key_range: KeyRange) -> np.ndarray:
    """Whether query row i sees key j, for every batch index: [B..., 1, Lq, Lk] booleans (the 1
    broadcasts over the heads; [Lq, Lk] for rank-2 inputs), to combine with the scores' mask. A
    dim of size 1 broadcasts: where every batch index has the same RowKeys, as today, one [Lq, Lk]
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
