"""key_range.py, which decides which keys each query row sees, held to the contract's sentence
(docs/design.md, section 3: with is_causal, key j is allowed for query i only when
j <= i + query_offset), written here as numpy's np.tri, and to the properties the ports rely on."""

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


def test_the_twins_agree():
    """typescript/src/key-range.ts gives the same RowKeys for the same options and lengths."""
    cases = [
        (lq, lk, is_causal, offset) for lq, lk in SIZES for offset in OFFSETS for is_causal in (False, True)
    ]
    module = (TYPESCRIPT_SRC / "key-range.ts").as_uri()
    script = (
        f"const {{ rowKeys }} = await import({json.dumps(module)});"
        "const cases = JSON.parse(process.argv[1]);"
        "console.log(JSON.stringify(cases.map(([Lq, Lk, isCausal, queryOffset]) =>"
        " rowKeys({ isCausal, queryOffset }, Lq, Lk))));"
    )
    ran = subprocess.run(
        [find_node(), "--input-type=module", "-e", script, json.dumps(cases)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    typescript = [
        RowKeys(r["startShift"], r["endShift"], r["limit"], r["sinkEnd"]) for r in json.loads(ran.stdout)
    ]
    python = [row_keys(lq, lk, is_causal=c, query_offset=offset) for lq, lk, c, offset in cases]
    assert typescript == python
