"""The layer's rule and fixtures against wrong layers (wrong_layers.py: an independent numpy layer
with one step changed): each common mistake fails at least one fixture in every dtype the fixtures
hold, while the same layer without the mistake passes them all; and the rule has no blind regime:
where the logits saturate it falls back as the core does, and at long-context positions RoPE's
phase term is what a float32 port computing its angles in float64 needs, so float32 angles fail.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import wrong_layers

from attention_port import layer, torch_layer
from attention_port.golden import oracle
from attention_port.golden.cases import normal
from attention_port.golden.rule import DTYPES, UNIT_ROUNDOFF, K

CASES = wrong_layers.valid_cases()
BY_ID = {case.id: case for case in CASES}


def test_the_contracts_layer_passes_every_layer_and_rope_fixture_in_every_dtype():
    # Without a mistake the independent layer passes: a wrong layer fails by its mistake alone.
    assert len(CASES) >= 28
    assert wrong_layers.catchers(CASES, None) == {dtype: [] for dtype in DTYPES}


@pytest.mark.parametrize("mistake", wrong_layers.MISTAKES)
def test_each_wrong_layer_fails_a_fixture_in_every_dtype(mistake):
    caught = wrong_layers.catchers(CASES, mistake)
    assert all(caught[dtype] for dtype in DTYPES), f"{mistake} passes every fixture in {caught}"


@pytest.mark.parametrize(
    ("mistake", "case_id"),
    [
        ("causal_to_last_key", "layer_decode_cross_causal"),
        ("kv_head_modulo", "layer_decode_cross_causal"),
        ("float32_angles", "rope_long_context"),
        ("float32_angles", "layer_rope_large_angles"),
        ("shifted_position", "layer_rope_large_angles"),
        ("swapped_convention", "rope_long_context"),
    ],
)
def test_the_cases_that_close_the_gap_catch_their_mistakes(mistake, case_id):
    dtypes = DTYPES if case_id != "layer_rope_large_angles" or mistake != "float32_angles" else DTYPES[:2]
    for dtype in dtypes:
        assert not wrong_layers.verdict(BY_ID[case_id], mistake, dtype).passed, (mistake, case_id, dtype)


def _ratio(case, dtype: str) -> float:
    """The largest output budget over the largest |output|: how much the rule lets through."""
    return float(np.max(case.expected.budgets[dtype].output) / np.max(np.abs(case.expected.output)))


# Logits near 1e15 (w_q and w_k of size 1e7): K·u·(1 + S) >= 1 in every dtype. Not a fixture:
# float16 cannot hold its inputs, and a layer case has no "outside the contract" to say so.
_saturated_rng = np.random.default_rng(9903)
SATURATED = {
    "x_q": normal((4, 6))(_saturated_rng),
    "w_q": normal((8, 6), 1e7)(_saturated_rng),
    "w_k": normal((8, 6), 1e7)(_saturated_rng),
    "w_v": normal((6, 6))(_saturated_rng),
    "w_o": normal((7, 6))(_saturated_rng),
    "b_o": normal((7,))(_saturated_rng),
}
SATURATED_OPTIONS = {"num_heads": 2, "need_weights": True}


def test_where_the_logits_saturate_the_layer_falls_back_and_stays_tight():
    # The first-order bound allowed 17 times the answer in float64 (1e10 in float32); the
    # fallback keeps every dtype's budget near the answer's size, and in float64 (whose logits
    # are off by a few units, against gaps of 1e14) it determines the weights: the numpy and torch
    # layers pass, a layer merging its heads in reverse or returning b_o fails.
    truth = oracle.layer(SATURATED, **SATURATED_OPTIONS)
    size = np.max(np.abs(truth.output))
    assert np.max(truth.budgets["float64"].output) < 1e-6 * size
    assert all(np.max(truth.budgets[dtype].output) < 4 * size for dtype in DTYPES)
    assert np.all(truth.budgets["float64"].weights <= 1 + 1e-300)
    got = layer.multi_head_attention(**SATURATED, **SATURATED_OPTIONS)
    assert _used(got.output, truth, "float64") <= 1
    for dtype in ("float64", "float32"):
        got = torch_layer.multi_head_attention(**SATURATED, **SATURATED_OPTIONS, dtype=getattr(torch, dtype))
        assert _used(got.output.to(torch.float64).numpy(), truth, dtype) <= 1, dtype
    params = {"num_kv_heads": None, "is_causal": False, "scale": None, "softcap": 0.0, **SATURATED_OPTIONS}
    for mistake in ("heads_merged_in_reverse", "only_b_o"):
        wrong = wrong_layers.wrong_layer(SATURATED, params, mistake, "float64")["output"]
        assert _used(wrong, truth, "float64") > 1, mistake


def test_no_layer_fixture_lets_a_port_off_by_more_than_a_few_times_its_answer():
    # In float64 and float32 the budget is a small share of the answer; in float16 and bfloat16
    # the fallback keeps it within a few times (first order, it reached 1e6 times).
    ratios = {(c.id, d): _ratio(c, d) for c in CASES if c.kind == "layer" for d in DTYPES}
    assert max(v for (_, d), v in ratios.items() if d in ("float64", "float32")) < 1e-3
    assert max(ratios.values()) < 20, max(ratios.items(), key=lambda item: item[1])


def test_rope_phase_term_scales_with_float64s_unit_roundoff_in_every_dtype():
    # At 10,000,000 the float32 budget is float32's rounding of the pair, not the angle's size
    # times float32's u (which would be 100 % of x): a port forms its angles in float64.
    case = BY_ID["rope_long_context"]
    x = np.abs(case.inputs["x"])
    pair = x + np.concatenate([x[..., 16:], x[..., :16]], axis=-1)  # |x_a| + |x_b|, half-split
    budget = case.expected.budgets["float32"].output
    assert np.all(budget <= K * UNIT_ROUNDOFF["float32"] * pair * 1.03 + 1e-30)
    assert np.max(budget[..., 3, :]) > 0  # position 10,000,000 is held, not exact


# A decode step after a cache of 16,000 positions: the oracle, the Python ports and wrong layers,
# live (a fixture cannot hold 16,000 cached rows). Hq = Hkv = 1, E = 4, Ev = 2.
P = 16_000
_rng = np.random.default_rng(33)
LONG = {
    "x_q": normal((1, 5))(_rng),
    "w_q": normal((4, 5))(_rng),
    "w_k": normal((4, 5))(_rng),
    "w_v": normal((2, 5))(_rng),
    "w_o": normal((3, 2))(_rng),
    "past_key": normal((1, P, 4), 0.5)(_rng),
    "past_value": normal((1, P, 2))(_rng),
}
LONG_OPTIONS = {"num_heads": 1, "is_causal": True, "rope": {"theta": 2.0}}  # pair 1: 0.707 a position


@pytest.fixture(scope="module")
def long_truth():
    return oracle.layer(LONG, **LONG_OPTIONS)


def _used(answer, truth, dtype: str) -> float:
    return float(
        np.max(np.abs(np.asarray(answer, dtype=np.float64) - truth.output) / truth.budgets[dtype].output)
    )


def test_after_16000_cached_positions_the_python_ports_pass_and_wrong_layers_fail(long_truth):
    assert _used(layer.multi_head_attention(**LONG, **LONG_OPTIONS), long_truth, "float64") <= 1
    for dtype in ("float64", "float32"):
        got = torch_layer.multi_head_attention(**LONG, **LONG_OPTIONS, dtype=getattr(torch, dtype))
        assert _used(got.to(torch.float64).numpy(), long_truth, dtype) <= 1, dtype
    params = {"num_kv_heads": None, "scale": None, "softcap": 0.0, **LONG_OPTIONS}
    # float32 angles are off by about 1e-3 here, within float32's budget over 16,000 keys (the
    # RoPE fixtures catch them in float32); the first-order rule's float32 phase term let swapped
    # conventions through after such a cache.
    both = ("float64", "float32")
    for mistake, dtypes in (
        ("swapped_convention", both),
        ("shifted_position", both),
        ("float32_angles", both[:1]),
    ):
        for dtype in dtypes:
            wrong = wrong_layers.wrong_layer(LONG, params, mistake, dtype)["output"]
            assert _used(wrong, long_truth, dtype) > 1, (mistake, dtype)
