"""Properties every attention must have, on random shapes, masks and options (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import attention_inputs

from attention_port import reference, torch_port


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
@given(inputs=attention_inputs(min_length=1))
def test_weight_rows_sum_to_one_or_are_zero(port, inputs):
    steps = _steps(port, *inputs)
    sums = steps.weights.sum(axis=-1)
    fully_masked = np.all(steps.logits == -np.inf, axis=-1)
    np.testing.assert_allclose(sums[~fully_masked], 1.0, rtol=1e-12)
    assert np.all(steps.weights[fully_masked] == 0) and not np.any(np.signbit(steps.weights[fully_masked]))
    assert np.all(steps.output[fully_masked] == 0) and not np.any(np.signbit(steps.output[fully_masked]))


@pytest.mark.parametrize("port", PORTS)
@settings(max_examples=60, deadline=None)
@given(inputs=attention_inputs(min_length=1), data=st.data())
def test_permuting_keys_and_values_together_changes_nothing(port, inputs, data):
    query, key, value, mask, options = inputs
    lq, lk = query.shape[-2], key.shape[-2]
    scores_shape = (*query.shape[:-1], lk)  # [B..., Hq, Lq, Lk]
    perm = np.array(data.draw(st.permutations(range(lk))))
    # Causality depends on key positions, so spell it out as a full mask and permute that too.
    allowed = np.ones((lq, lk), bool)
    if options["is_causal"]:
        allowed &= np.tri(lq, lk, dtype=bool)
    allowed = np.broadcast_to(allowed, scores_shape)
    if mask is None or mask.dtype == bool:
        full = allowed if mask is None else allowed & np.broadcast_to(mask, scores_shape)
    else:
        full = np.where(allowed, np.broadcast_to(mask, scores_shape), -np.inf)
    permuted_mask = full[..., perm]
    plain = {**options, "is_causal": False}
    before = _steps(port, query, key, value, full, plain).output
    after = _steps(port, query, key[..., perm, :], value[..., perm, :], permuted_mask, plain).output
    np.testing.assert_allclose(after, before, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("port", PORTS)
@settings(max_examples=60, deadline=None)
@given(inputs=attention_inputs(min_length=1))
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
