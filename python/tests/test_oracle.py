"""The oracle checked against a second method: mpmath at 80 digits, written independently."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from attention_port import oracle


def _mpmath_attention(q, k, v, scale, mask=None, causal=False):
    """Textbook softmax(q kᵀ scale + mask) v at 80 digits, without max subtraction (no need)."""
    with mpmath.workdps(80):
        lq, lk = q.shape[0], k.shape[0]
        out = np.zeros((lq, v.shape[1]))
        weights = np.zeros((lq, lk))
        for i in range(lq):
            logits = []
            for j in range(lk):
                s = mpmath.fsum(
                    mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(q[i], k[j], strict=True)
                )
                allowed = (not causal or j <= i) and (mask is None or mask[i, j])
                logits.append(s * scale if allowed else None)
            exps = [mpmath.exp(x) if x is not None else mpmath.mpf(0) for x in logits]
            total = mpmath.fsum(exps)
            for j in range(lk):
                weights[i, j] = float(exps[j] / total) if total else 0.0
            for t in range(v.shape[1]):
                out[i, t] = (
                    float(mpmath.fsum(exps[j] / total * mpmath.mpf(float(v[j, t])) for j in range(lk)))
                    if total
                    else 0.0
                )
    return weights, out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_agrees_with_mpmath(seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((4, 6)), rng.standard_normal((5, 6)), rng.standard_normal((5, 3))
    mask = rng.random((4, 5)) < 0.7
    mask[2] = False
    for causal in (False, True):
        result = oracle.attention(q, k, v, mask, is_causal=causal)
        with mpmath.workdps(80):
            scale = 1 / mpmath.sqrt(6)  # the exact 1/sqrt(E), as the oracle uses
        weights, out = _mpmath_attention(q, k, v, scale, mask, causal)
        # Both are correctly rounded results of the same real numbers: equal, or one ulp apart
        # where the 80-digit value sits right at a rounding boundary.
        np.testing.assert_array_max_ulp(result.weights, weights, maxulp=1)
        np.testing.assert_array_max_ulp(result.output, out, maxulp=1)


def test_oracle_on_the_tutorial_example_by_hand():
    # Scores of the tutorial's first example are small integers; softmax of [2, 0, 1] / 2 by hand.
    q = np.array([[1.0, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]])
    v = np.array([[1.0, 2], [3, 4], [5, 6]])
    result = oracle.attention(q, q, v)
    np.testing.assert_array_equal(result.scores, [[2, 0, 1], [0, 2, 1], [1, 1, 2]])
    e = np.exp([1.0, 0.0, 0.5])
    np.testing.assert_allclose(result.weights[0], e / e.sum(), rtol=1e-15)


def test_oracle_large_logits_and_softcap_without_overflow():
    q = np.full((2, 4), 40.0)
    k = np.array([[40.0, 40, 40, 40], [39.875, 40, 40, 40]])  # exact in binary
    v = np.array([[1.0], [3.0]])
    result = oracle.attention(q, k, v)  # scaled scores 3200 and 3197.5: exp(3200) has no float64
    with mpmath.workdps(60):
        w0 = 1 / (1 + mpmath.exp(mpmath.mpf(-2.5)))
    assert result.weights[0, 0] == float(w0)
    capped = oracle.attention(q, k, v, softcap=5.0)
    assert np.all(np.isfinite(capped.output))


def test_oracle_error_scale_grows_with_the_scores_and_is_zero_on_masked_rows():
    q = np.array([[1.0, 2.0], [100.0, 200.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0], [-1.0]])
    mask = np.array([[True, True], [False, False]])
    result = oracle.attention(q, k, v, mask)
    assert result.error_scale[1, 0] == 0.0 and result.output[1, 0] == 0.0
    assert not np.signbit(result.output[1, 0])
    spread = 1 + 2 / np.sqrt(2)  # 1 + scale * max_j |q_0| · |k_j|
    assert result.error_scale[0, 0] == pytest.approx(spread * (abs(result.weights[0]) @ abs(v[:, 0])))
