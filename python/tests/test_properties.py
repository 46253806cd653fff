"""Properties every attention must have, on random shapes, masks and options (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_port import reference, torch_port


@st.composite
def attention_inputs(draw):
    """Random rank-2..4 inputs with optional GQA, causal, boolean or float mask, scale, softcap."""
    rank = draw(st.integers(2, 4))
    lq, lk = draw(st.integers(1, 6)), draw(st.integers(1, 7))
    e, ev = draw(st.integers(1, 5)), draw(st.integers(1, 4))
    kv_heads = draw(st.integers(1, 2))
    group = draw(st.integers(1, 3))
    enable_gqa = rank >= 3 and group > 1
    q_heads = kv_heads * group if enable_gqa else kv_heads
    batch = (draw(st.integers(1, 2)),) if rank == 4 else ()
    heads_q = (q_heads,) if rank >= 3 else ()
    heads_kv = (kv_heads,) if rank >= 3 else ()
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    query = rng.standard_normal((*batch, *heads_q, lq, e)) * draw(st.sampled_from([0.1, 1.0, 10.0]))
    key = rng.standard_normal((*batch, *heads_kv, lk, e))
    value = rng.standard_normal((*batch, *heads_kv, lk, ev))
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    mask = None
    if mask_kind != "none":
        mask_rank = draw(st.integers(1, 2))
        mask_shape = (lq, lk)[-mask_rank:]
        if mask_kind == "bool":
            mask = rng.random(mask_shape) < 0.6
        else:
            mask = np.where(rng.random(mask_shape) < 0.3, -np.inf, rng.standard_normal(mask_shape))
    options = {
        "is_causal": draw(st.booleans()),
        "scale": draw(st.one_of(st.none(), st.floats(0.05, 2.0))),
        "enable_gqa": enable_gqa,
        "softcap": draw(st.sampled_from([0.0, 0.0, 1.5, 20.0])),
    }
    return query, key, value, mask, options


def _steps(port, query, key, value, mask, options):
    if port == "numpy":
        return reference.attention_steps(query, key, value, mask, **options)
    steps = torch_port.attention_steps(query, key, value, mask, **options, dtype=torch.float64)
    return reference.AttentionSteps(
        *(getattr(steps, n).numpy() for n in ("scores", "logits", "weights", "output"))
    )


PORTS = ["numpy", "torch"]


@pytest.mark.parametrize("port", PORTS)
@settings(max_examples=60, deadline=None)
@given(inputs=attention_inputs())
def test_weight_rows_sum_to_one_or_are_zero(port, inputs):
    steps = _steps(port, *inputs)
    sums = steps.weights.sum(axis=-1)
    fully_masked = np.all(steps.logits == -np.inf, axis=-1)
    np.testing.assert_allclose(sums[~fully_masked], 1.0, rtol=1e-12)
    assert np.all(steps.weights[fully_masked] == 0) and not np.any(np.signbit(steps.weights[fully_masked]))
    assert np.all(steps.output[fully_masked] == 0) and not np.any(np.signbit(steps.output[fully_masked]))


@pytest.mark.parametrize("port", PORTS)
@settings(max_examples=60, deadline=None)
@given(inputs=attention_inputs(), data=st.data())
def test_permuting_keys_and_values_together_changes_nothing(port, inputs, data):
    query, key, value, mask, options = inputs
    lq, lk = query.shape[-2], key.shape[-2]
    perm = np.array(data.draw(st.permutations(range(lk))))
    # Causality depends on key positions, so spell it out as a mask and permute that too.
    allowed = np.ones((lq, lk), bool)
    if options["is_causal"]:
        allowed &= np.tri(lq, lk, dtype=bool)
    if mask is None or mask.dtype == bool:
        full = allowed if mask is None else allowed & np.broadcast_to(mask, (lq, lk))
        permuted_mask = full[:, perm]
    else:
        full = np.where(allowed, np.broadcast_to(mask, (lq, lk)), -np.inf)
        permuted_mask = full[:, perm]
    plain = {**options, "is_causal": False}
    before = _steps(port, query, key, value, full, plain).output
    after = _steps(port, query, key[..., perm, :], value[..., perm, :], permuted_mask, plain).output
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("port", PORTS)
@settings(max_examples=60, deadline=None)
@given(inputs=attention_inputs())
def test_each_output_lies_within_the_value_range(port, inputs):
    query, key, value, mask, options = inputs
    steps = _steps(port, query, key, value, mask, options)
    group = steps.output.shape[-3] // value.shape[-3] if value.ndim >= 3 else 1
    v = np.repeat(value, group, axis=-3) if value.ndim >= 3 else value
    low = v.min(axis=-2, keepdims=True)  # [..., 1, Ev]
    high = v.max(axis=-2, keepdims=True)
    fully_masked = np.all(steps.logits == -np.inf, axis=-1)[..., None]
    slack = 1e-12 * (1 + np.abs(v).max())
    inside = (steps.output >= low - slack) & (steps.output <= high + slack)
    assert np.all(inside | fully_masked)
