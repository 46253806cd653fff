"""key_range.py, which decides which keys each query row sees, held to the contract's sentences
(docs/design.md, section 3: with is_causal, key j is allowed for query i only when
j <= i + query_offset, written here as numpy's np.tri; a window, sink tokens and kv_seqlen,
written here as the contract's inequalities), and to the properties the ports rely on."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from attention_port.harness.node import find_node
from attention_port.inputs import MAX_QUERY_OFFSET, check_shapes
from attention_port.key_range import (
    RowKeys,
    block_end,
    key_end,
    key_range,
    key_start,
    row_keys,
    sees_every_key,
    sees_key,
    sink_key_end,
    slice_keys,
    visible_keys,
)
from attention_port.paths import TYPESCRIPT_SRC

SIZES = [(0, 0), (1, 1), (3, 5), (5, 3), (7, 7), (1, 70)]
OFFSETS = [0, 1, 2, 4, 69, MAX_QUERY_OFFSET]


@pytest.mark.parametrize(("lq", "lk"), SIZES)
@pytest.mark.parametrize("query_offset", OFFSETS)
@pytest.mark.parametrize("is_causal", [False, True])
def test_rows_see_what_the_contract_allows(lq, lk, query_offset, is_causal):
    shapes = check_shapes((2, 3, lq, 4), (2, 3, lk, 4), (2, 3, lk, 2), None, False)
    keys = key_range(shapes, is_causal=is_causal, query_offset=query_offset)
    allowed = np.tri(lq, lk, k=min(query_offset, lk), dtype=bool) if is_causal else np.ones((lq, lk), bool)
    visible = visible_keys(keys)
    assert visible.dtype == bool
    assert np.array_equal(np.broadcast_to(visible, (2, 3, lq, lk)), np.broadcast_to(allowed, (2, 3, lq, lk)))
    for shift in (keys.batches[0].start_shift, keys.batches[0].end_shift):
        assert -lq <= shift <= lk  # 32-bit integers for the kernels, whatever the offset


@pytest.mark.parametrize(
    ("query", "expected"),
    [((3, 4), (3, 5)), ((2, 3, 4), (1, 3, 5)), ((2, 2, 3, 4), (1, 1, 3, 5)), ((0, 2, 3, 4), (1, 1, 1, 1))],
)
def test_visible_keys_broadcast_over_the_heads(query, expected):
    key = (*query[:-2], 5, 4)
    shapes = check_shapes(query, key, key, None, False)
    visible = visible_keys(key_range(shapes, is_causal=True, query_offset=1))
    assert visible.shape == expected
    # Where every row sees every key, one True of the same rank.
    every = visible_keys(key_range(shapes, is_causal=True, query_offset=4))
    assert every.shape == (1,) * len(query) and every.all()


def test_one_row_keys_per_batch_index_shared_by_its_heads():
    shapes = check_shapes((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), None, False)
    keys = key_range(shapes, is_causal=True, query_offset=2)
    assert len(keys.batches) == 2
    assert [slice_keys(keys, index) for index in range(6)] == [keys.batches[index // 3] for index in range(6)]
    # Row 0 sits at position 2: keys 0, 1 and 2; row 3 at position 5: every key.
    assert (key_start(keys.batches[0], 0), key_end(keys.batches[0], 0)) == (0, 3)
    assert block_end(keys.batches[0], 3) == 6
    assert not sees_every_key(keys, 1)
    assert sees_every_key(key_range(shapes, is_causal=True, query_offset=5), 1)
    assert sees_every_key(key_range(shapes, is_causal=False, query_offset=0), 4)


def test_any_row_keys_grow_with_the_row_and_block_end_bounds_them():
    """Windows and sinks too (what the coming options may make): the tiled ports rely on both."""
    rng = np.random.default_rng(7)
    for _ in range(300):
        lq, lk = int(rng.integers(1, 12)), int(rng.integers(0, 12))
        keys = RowKeys(
            start_shift=int(rng.integers(-lq, lk + 1)),
            end_shift=int(rng.integers(-lq, lk + 1)),
            limit=int(rng.integers(0, lk + 1)),
            sink_end=int(rng.integers(0, lk + 1)),
        )
        i = np.arange(lq)
        starts, ends = key_start(keys, i), key_end(keys, i)
        assert np.all(np.diff(starts) >= 0) and np.all(np.diff(ends) >= 0)
        assert np.all(starts <= ends) and np.all(ends <= lk)
        seen = sees_key(keys, i[:, None], np.arange(lk))  # [Lq, Lk]
        for last in range(lq):
            assert not seen[: last + 1, block_end(keys, last) :].any()


def _contract_sees(i, j, *, lk, is_causal, query_offset, window, sink_tokens, kv_seqlen) -> bool:
    """The contract's words, one key at a time: row i sits at p = i + query_offset; key j is hidden
    at or past kv_seqlen, past p with is_causal, past p + right; before p - left unless a sink."""
    p = i + query_offset
    left, right = window if window is not None else (None, None)
    limit = lk if kv_seqlen is None else kv_seqlen
    if j >= limit or (is_causal and j > p) or (right is not None and j > p + right):
        return False
    return j < sink_tokens or left is None or j >= p - left


WINDOWS = [None, (None, None), (0, 0), (2, 0), (1, 1), (None, 2), (3, None), (MAX_QUERY_OFFSET, 0)]
SINKS = [0, 1, 3]


@pytest.mark.parametrize("window", WINDOWS, ids=str)
@pytest.mark.parametrize("sink_tokens", SINKS)
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("query_offset", [0, 2, 9])
def test_windows_sinks_and_key_counts_show_what_the_contract_allows(
    window, sink_tokens, is_causal, query_offset
):
    for lq, lk in [(1, 1), (4, 7), (7, 4), (6, 10)]:
        for kv_seqlen in (None, 0, lk // 2, lk):
            options = {"is_causal": is_causal, "query_offset": query_offset, "window": window,
                       "sink_tokens": sink_tokens, "kv_seqlen": kv_seqlen}  # fmt: skip
            keys = row_keys(lq, lk, **options)
            grid = sees_key(keys, np.arange(lq)[:, None], np.arange(lk))  # [Lq, Lk]
            expected = [[_contract_sees(i, j, lk=lk, **options) for j in range(lk)] for i in range(lq)]
            assert np.array_equal(grid, expected), (lq, lk, options)
            for x in (keys.start_shift, keys.end_shift, keys.limit, keys.sink_end):
                assert -lq <= x <= lk  # 32-bit integers for the kernels, whatever the options
            ends = sink_key_end(keys, np.arange(lq))
            assert np.all(np.diff(ends) >= 0) and np.all(ends <= key_end(keys, np.arange(lq)))


def test_a_ragged_batch_has_the_row_keys_of_each_sequence_alone():
    shapes = check_shapes((2, 3, 2, 1, 4), (2, 3, 2, 9, 4), (2, 3, 2, 9, 4), None, False)
    offsets = [[8, 3, 0], [5, 6, 7]]
    lengths = [[9, 4, 1], [6, 7, 0]]
    keys = key_range(
        shapes, is_causal=True, query_offset=offsets, window=(2, 0), sink_tokens=1, kv_seqlen=lengths
    )
    alone = [
        row_keys(1, 9, is_causal=True, query_offset=o, window=(2, 0), sink_tokens=1, kv_seqlen=n)
        for o, n in zip(np.ravel(offsets), np.ravel(lengths), strict=True)
    ]
    assert list(keys.batches) == alone
    assert [slice_keys(keys, index) for index in range(12)] == [alone[index // 2] for index in range(12)]
    visible = visible_keys(keys)  # [2, 3, 1, 1, 9]: one grid per batch index
    assert visible.shape == (2, 3, 1, 1, 9)
    # Batch (0, 1) sits at position 3 with 4 keys: keys 1-3 of its window and the sink key 0.
    assert visible[0, 1, 0, 0].tolist() == [True] * 4 + [False] * 5
    # Batch (1, 0) at position 5 with 6 keys: keys 3-5 and the sink key 0.
    assert visible[1, 0, 0, 0].tolist() == [True, False, False, True, True, True, False, False, False]
    assert not visible[1, 2].any()  # kv_seqlen 0: no key


def test_a_sink_is_seen_only_up_to_where_the_row_sees():
    """sink_key_end: causality, the window's right side and kv_seqlen bound the sinks too."""
    causal = row_keys(4, 8, is_causal=True, query_offset=0, window=(0, 0), sink_tokens=3)
    assert [int(sink_key_end(causal, i)) for i in range(4)] == [1, 2, 3, 3]
    assert not sees_key(causal, 0, 1) and sees_key(causal, 3, 1)
    counted = row_keys(2, 8, is_causal=False, query_offset=0, window=(0, None), sink_tokens=5, kv_seqlen=2)
    assert counted.sink_end == 2 and [int(sink_key_end(counted, i)) for i in range(2)] == [2, 2]


def _typescript(function: str, body: str, cases: list) -> list:
    """key-range.ts's `function` over `cases` in Node: `body` maps each case (JSON) to its result."""
    module = (TYPESCRIPT_SRC / "key-range.ts").as_uri()
    script = (
        f"const {{ {function} }} = await import({json.dumps(module)});"
        f"console.log(JSON.stringify(JSON.parse(process.argv[1]).map({body})));"
    )
    ran = subprocess.run(
        [find_node(), "--input-type=module", "-e", script, json.dumps(cases)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(ran.stdout)


def _row_keys(record: dict) -> RowKeys:
    return RowKeys(record["startShift"], record["endShift"], record["limit"], record["sinkEnd"])


def test_the_twins_agree():
    """typescript/src/key-range.ts gives the same RowKeys for the same options and lengths."""
    cases = [
        (lq, lk, is_causal, offset) for lq, lk in SIZES for offset in OFFSETS for is_causal in (False, True)
    ]
    body = "([Lq, Lk, isCausal, queryOffset]) => rowKeys({ isCausal, queryOffset }, Lq, Lk)"
    typescript = [_row_keys(r) for r in _typescript("rowKeys", body, cases)]
    python = [row_keys(lq, lk, is_causal=c, query_offset=offset) for lq, lk, c, offset in cases]
    assert typescript == python


def test_the_twins_agree_on_windows_sinks_and_ragged_batches():
    """key-range.ts's keyRange gives the same RowKeys per batch index for every option."""
    shapes = (2, 3, 4, 4), (2, 3, 7, 4)
    option_sets = [
        {"is_causal": c, "query_offset": o, "window": w, "sink_tokens": s, "kv_seqlen": n}
        for c in (False, True)
        for o in (0, 3, [1, 5], MAX_QUERY_OFFSET)
        for w in WINDOWS
        for s in (0, 2)
        for n in (None, 0, [7, 3])
    ]
    body = (
        "(o) => keyRange({ isCausal: o.is_causal, queryOffset: o.query_offset, window: o.window,"
        " sinkTokens: o.sink_tokens, kvSeqlen: o.kv_seqlen },"
        " { batch: [2], queryHeads: 3, queryLength: 4, keyLength: 7 }).batches"
    )
    checked = check_shapes(shapes[0], shapes[1], shapes[1], None, False)
    for options, batches in zip(option_sets, _typescript("keyRange", body, option_sets), strict=True):
        assert [_row_keys(r) for r in batches] == list(key_range(checked, **options).batches), options
