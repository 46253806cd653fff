"""The layer's KV cache in the Python ports: a prefill and decode steps (1, 3, 7 and 4 tokens) with
the cache give the rows and the final cache of one causal pass, within the tolerance rule's budget
(numpy and torch multiply by BLAS, whose order of summation depends on the shapes, so bit for bit
is not asked of them; typescript/test/layer-cache.test.ts holds the TypeScript ports to it). The
budget comes from the oracle's exact values for the whole pass.

Also: the trap cases fail a layer that aligns causal top-left with a cache or drops the mask when
a cache exists, and the RoPE-offset case's oracle values are rows of the full pass's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_port import layer, reference, torch_layer
from attention_port.golden import oracle, reader
from attention_port.golden.cases import normal
from attention_port.harness import compare
from attention_port.harness.compare import TINY, UNIT_ROUNDOFF, K, PortAnswer
from attention_port.paths import FIXTURES

PREFILL = 5
STEPS = (1, 3, 7, 4)
N = PREFILL + sum(STEPS)  # 20 tokens
BLOCKS = [(sum((PREFILL, *STEPS)[:n]), rows) for n, rows in enumerate((PREFILL, *STEPS))]  # (start, rows)

_rng = np.random.default_rng(27)
X = normal((1, N, 6))(_rng)  # [B, N, D]
WEIGHTS = {
    "w_q": normal((16, 6))(_rng),  # Hq = 4, E = 4
    "w_k": normal((8, 6))(_rng),  # Hkv = 2
    "w_v": normal((6, 6))(_rng),  # Ev = 3
    "w_o": normal((7, 12))(_rng),
    "b_o": normal((7,))(_rng),
}
OPTIONS = {"num_heads": 4, "num_kv_heads": 2, "is_causal": True, "rope": {"theta": 100.0}}
TRUTH = oracle.layer({"x_q": X, **WEIGHTS}, **OPTIONS, return_cache=True)  # the whole pass, exact


def _budget(scale: np.ndarray, terms: int, dtype: str) -> np.ndarray:
    return K * UNIT_ROUNDOFF[dtype] * scale + K * TINY[dtype] * terms


def _numpy(x, **options):
    return layer.multi_head_attention(x, **WEIGHTS, **OPTIONS, **options, return_cache=True)


def _torch(dtype: str):
    def run(x, **options):
        result = torch_layer.multi_head_attention(
            x, **WEIGHTS, **OPTIONS, **options, return_cache=True, dtype=getattr(torch, dtype)
        )
        assert result.present_key.dtype == getattr(torch, dtype)  # no promotion
        return result

    return run


PORTS = {"numpy": (_numpy, "float64"), "torch-float64": (_torch("float64"), "float64"),
         "torch-float32": (_torch("float32"), "float32")}  # fmt: skip


def _as_float64(x) -> np.ndarray:
    return x.to(torch.float64).numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


@pytest.mark.parametrize("port", PORTS)
def test_a_prefill_and_decode_steps_give_the_rows_and_the_cache_of_one_causal_pass(port):
    run, dtype = PORTS[port]
    output_budget = TRUTH.budgets[dtype].output  # [B, N, Dout]: the rule's, as the oracle wrote it
    past_key = past_value = None
    for start, rows in BLOCKS:
        cache = {} if past_key is None else {"past_key": past_key, "past_value": past_value}
        result = run(X[..., start : start + rows, :], **cache)
        past_key, past_value = result.present_key, result.present_value  # the cache, as the port keeps it
        assert tuple(past_key.shape) == (1, 2, start + rows, 4)
        error = np.abs(_as_float64(result.output) - TRUTH.output[..., start : start + rows, :])
        used = float(np.max(error / output_budget[..., start : start + rows, :]))
        assert used <= 1, f"{port}, rows {start}..{start + rows - 1}: {used:.1%} of the budget"
    for name, cached in (("present_key", past_key), ("present_value", past_value)):
        budget = getattr(TRUTH.budgets[dtype], name)
        assert np.all(np.abs(_as_float64(cached) - getattr(TRUTH, name)) <= budget), name


def test_the_cache_is_copied_bit_for_bit_in_its_dtype():
    past_key = torch.tensor(normal((1, 2, 3, 4))(_rng), dtype=torch.float32)
    past_value = torch.tensor(normal((1, 2, 3, 3))(_rng), dtype=torch.float32)
    result = torch_layer.multi_head_attention(
        X[..., :2, :], **WEIGHTS, **OPTIONS, past_key=past_key, past_value=past_value,
        return_cache=True, dtype=torch.float32,
    )  # fmt: skip
    assert torch.equal(result.present_key[..., :3, :], past_key)
    assert torch.equal(result.present_value[..., :3, :], past_value)
    plain = layer.multi_head_attention(X[..., :2, :], **WEIGHTS, **OPTIONS, return_cache=True)
    empty = layer.multi_head_attention(
        X[..., :2, :], **WEIGHTS, **OPTIONS, return_cache=True,
        past_key=np.zeros((1, 2, 0, 4)), past_value=np.zeros((1, 2, 0, 3)),
    )  # fmt: skip
    assert np.array_equal(plain.output, empty.output) and np.array_equal(plain.present_key, empty.present_key)
    assert plain.weights is None and layer.multi_head_attention(X, **WEIGHTS, **OPTIONS).shape == (1, N, 7)


CACHE_CASES = [c for c in reader.load_fixtures(FIXTURES, kinds=("layer",)) if "cache" in c.tags]
BY_ID = {c.id: c for c in CACHE_CASES}
TRAPS = [c for c in CACHE_CASES if "cache_trap" in c.tags]


class _NumpyOver(layer.NumpyCore):
    """numpy's arrays with another attention core."""

    def __init__(self, attention_steps):
        self.attention_steps = attention_steps


def _answer(case, core) -> PortAnswer:
    """The numpy layer on the case with its attention core replaced by `core`."""
    arguments = {n: v for n, v in case.inputs.items() if n not in ("x_q", "x_kv")}
    result = layer.layer_with(_NumpyOver(core))(
        case.inputs["x_q"], case.inputs["x_kv"], **arguments, **case.params
    )
    parts = {"output": result} if isinstance(result, np.ndarray) else vars(result)
    return PortAnswer(steps={n: x for n, x in parts.items() if x is not None})


def _top_left(*args, **kwargs):
    return reference.attention_steps(*args, **{**kwargs, "query_offset": 0})


def _mask_dropped(query, key, value, attn_mask=None, **kwargs):
    return reference.attention_steps(query, key, value, None, **kwargs)


def test_the_fixtures_hold_the_cache_cases():
    assert len(TRAPS) >= 5 and {"layer_decode_rope_full", "layer_decode_empty_cache"} <= set(BY_ID)
    assert any(c.expects_error for c in CACHE_CASES)


@pytest.mark.parametrize("case", TRAPS, ids=lambda c: c.id)
def test_a_trap_case_fails_a_top_left_layer_or_one_that_drops_the_mask(case):
    assert compare.judge(case, "numpy", "float64", _answer(case, reference.attention_steps)).passed
    wrong = (
        _mask_dropped
        if case.inputs.get("attn_mask") is not None and not case.params["is_causal"]
        else _top_left
    )
    assert not compare.judge(case, "wrong", "float64", _answer(case, wrong)).passed
    if case.inputs.get("attn_mask") is not None:
        assert not compare.judge(case, "wrong", "float64", _answer(case, _mask_dropped)).passed


def test_rope_after_a_cache_gives_the_rows_of_the_full_pass():
    full, decode = BY_ID["layer_decode_rope_full"].expected, BY_ID["layer_decode_rope_offset"].expected
    budget = _budget(full.error_scale[..., 4:, :], 13, "float64")
    assert np.all(np.abs(decode.output - full.output[..., 4:, :]) <= budget)
    key_budget = _budget(full.present_key_scale, 7, "float64")
    assert np.all(np.abs(decode.present_key - full.present_key) <= key_budget)
    assert not np.allclose(decode.output, full.output[..., :3, :])  # positions 0-2 would be other rows


# A step with no new keys after a cache: each head's two cached keys are equal, so its weights are
# 1/2 and 1/2 whatever the query, and its output the mean of its two cached values, exactly.
# typescript/test/layer-cache.test.ts holds the TypeScript cores to the same values.
EMPTY_STEP_PAST = {
    "past_key": np.array([[[[1.0], [1.0]], [[-2.0], [-2.0]]], [[[0.5], [0.5]], [[3.0], [3.0]]]]),
    "past_value": np.array([[[[1.0], [3.0]], [[-4.0], [2.0]]], [[[5.0], [6.0]], [[0.0], [1.0]]]]),
}  # [B = 2, Hkv = 2, P = 2, 1] each
EMPTY_STEP_WEIGHTS = {
    "w_q": np.array([[1.0, 0.5], [-1.0, 2.0]]),
    "w_k": np.eye(2),
    "w_v": np.array([[2.0, 1.0], [0.0, -1.0]]),
    "w_o": np.eye(2),
}


@pytest.mark.parametrize("port", ["numpy", "torch"])
def test_a_step_with_no_new_keys_after_a_cache_attends_to_the_past_alone(port):
    run = layer.multi_head_attention if port == "numpy" else torch_layer.multi_head_attention
    cross = {"x_q": np.array([[[1.0, 1.0]], [[2.0, -1.0]]]), "x_kv": np.zeros((2, 0, 2))}
    empty = {"x_q": np.zeros((2, 0, 2)), "x_kv": None}
    for inputs, want in ((cross, [[[2.0, -1.0]], [[5.5, 0.5]]]), (empty, np.zeros((2, 0, 2)))):
        inputs = {**inputs, **EMPTY_STEP_WEIGHTS, **EMPTY_STEP_PAST}
        truth = oracle.layer(inputs, num_heads=2, return_cache=True)
        np.testing.assert_array_equal(truth.output, want)  # the oracle's exact answer
        result = run(**{n: x for n, x in inputs.items() if x is not None}, num_heads=2, return_cache=True)
        assert np.asarray(result.output).shape == np.shape(want)
        np.testing.assert_array_equal(np.asarray(result.output), want)
        np.testing.assert_array_equal(np.asarray(result.present_key), EMPTY_STEP_PAST["past_key"])
        np.testing.assert_array_equal(np.asarray(result.present_value), EMPTY_STEP_PAST["past_value"])
