"""Decoding with query_offset, in the Python ports: the rows of one causal pass over n keys,
computed again a block at a time (a prefill, then decode steps of 1, 3, 7 and 4 rows, each block
against the keys up to its last row with query_offset = its first row's position), are the same
rows within the tolerance rule's budget in numpy (float64) and torch (float64 and float32). numpy
and torch multiply by BLAS, whose order of summation depends on the shapes, so bit for bit is not
asked of them (the TypeScript ports are held to it: typescript/test/decode.test.ts). The budget
comes from the oracle's exact values for the whole pass, so both sides are held to the truth.

Also: torch's own kernel given the offset (torch_sdpa folds it into a mask) agrees, and the
top-left rule (query_offset 0) gives other rows, so the equality rests on the offset.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from attention_port import reference, torch_port
from attention_port.golden import oracle

B, HQ, HKV, E, EV = 1, 4, 2, 8, 4
PREFILL = 25
STEPS = (1, 3, 7, 4)
N = PREFILL + sum(STEPS)  # 40 tokens
BLOCKS = [(sum((PREFILL, *STEPS)[:n]), rows) for n, rows in enumerate((PREFILL, *STEPS))]  # (start, rows)

_rng = np.random.default_rng(27)
QUERY = _rng.standard_normal((B, HQ, N, E))
KEY = _rng.standard_normal((B, HKV, N, E))
VALUE = _rng.standard_normal((B, HKV, N, EV))


@functools.cache
def exact_pass():
    """The oracle's whole pass, exact: computed where a test asks for it (about 2 s of CPU), not
    in every process that collects this module."""
    return oracle.attention(QUERY, KEY, VALUE, is_causal=True, enable_gqa=True)


def _numpy(query, key, value, **options):
    return reference.scaled_dot_product_attention(query, key, value, **options)


def _torch(dtype: str):
    import torch

    def run(query, key, value, **options):
        with torch_port.tf32_disabled():
            output = torch_port.scaled_dot_product_attention(
                query, key, value, device="cpu", dtype=getattr(torch, dtype), **options
            )
        return output.to(torch.float64).numpy()

    return run


def _torch_sdpa(dtype: str):
    import torch

    def run(query, key, value, **options):
        dtype_ = getattr(torch, dtype)
        output = torch_port.torch_sdpa(query, key, value, device="cpu", dtype=dtype_, **options)
        return output.to(torch.float64).numpy()

    return run


PORTS = {
    "numpy": (_numpy, "float64"),
    "torch-float64": (_torch("float64"), "float64"),
    "torch-float32": (_torch("float32"), "float32"),
    "torch-sdpa-float64": (_torch_sdpa("float64"), "float64"),
}


@pytest.mark.parametrize("port", PORTS)
def test_a_prefill_and_decode_steps_give_the_rows_of_one_causal_pass(port):
    run, dtype = PORTS[port]
    truth = exact_pass()
    budget = truth.budgets[dtype].output  # [B, Hq, N, Ev]
    whole = run(QUERY, KEY, VALUE, is_causal=True, enable_gqa=True)
    assert np.all(np.abs(whole - truth.output) <= budget)
    for start, rows in BLOCKS:
        end = start + rows  # the block sees the keys up to its last row: the cache and itself
        block = run(
            QUERY[..., start:end, :], KEY[..., :end, :], VALUE[..., :end, :],
            is_causal=True, enable_gqa=True, query_offset=start,
        )  # fmt: skip
        assert block.shape == (B, HQ, rows, EV)
        error = np.abs(block - truth.output[..., start:end, :])
        used = float(np.max(error / budget[..., start:end, :]))
        assert used <= 1, f"{port}, rows {start}..{end - 1}: {used:.1%} of the budget"


def test_the_top_left_rule_gives_other_rows():
    start, rows = BLOCKS[3]
    end = start + rows
    args = (QUERY[..., start:end, :], KEY[..., :end, :], VALUE[..., :end, :])
    options = {"is_causal": True, "enable_gqa": True}
    offset = reference.scaled_dot_product_attention(*args, **options, query_offset=start)
    top_left = reference.scaled_dot_product_attention(*args, **options)
    assert not np.allclose(offset, top_left)
