"""The oracle checked against a second method: Python's decimal at 400 digits over exact fraction
dot products, written independently of the oracle's mpmath, at ordinary and extreme magnitudes."""

from __future__ import annotations

from decimal import Context, Decimal, localcontext
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from attention_port import reference
from attention_port.golden import oracle

# 400 digits and an exponent range far beyond float64's: nothing rounds or underflows that the
# final float64 rounding would keep.
_CONTEXT = Context(prec=400, Emax=10**9, Emin=-(10**9))


def _decimal(x: Fraction) -> Decimal:
    return Decimal(x.numerator) / Decimal(x.denominator)


def _tanh(x: Decimal) -> Decimal:
    # (e^(2x) - 1) / (e^(2x) + 1): at 400 digits the subtraction keeps 340 of them even for x = 1e-60.
    if x > 1000:
        return Decimal(1)
    if x < -1000:
        return Decimal(-1)
    e = (2 * x).exp()
    return (e - 1) / (e + 1)


def _to_float(x: Decimal) -> float:
    """Correctly rounded, subnormals included: through the exact fraction."""
    if x == 0:
        return 0.0
    return float(Fraction(x))


def _decimal_attention(q, k, v, scale, mask=None, causal=False, softcap=0.0, sink=None):
    """softmax(q kᵀ scale [softcap] [+ mask]) v for finite rank-2 inputs, a second way; `sink`, a
    finite sink logit, joins the max and the denominator without a value."""
    with localcontext(_CONTEXT):
        lq, lk = q.shape[0], k.shape[0]
        out = np.zeros((lq, v.shape[1]))
        weights = np.zeros((lq, lk))
        for i in range(lq):
            logits = []
            for j in range(lk):
                s = sum(
                    (Fraction(float(a)) * Fraction(float(b)) for a, b in zip(q[i], k[j], strict=True)),
                    Fraction(0),
                )
                x = _decimal(s) * scale
                if softcap > 0:
                    cap = Decimal(float(softcap))
                    x = cap * _tanh(x / cap)
                allowed = (not causal or j <= i) and (mask is None or mask[i, j])
                logits.append(x if allowed else None)
            kept = [x for x in logits if x is not None]
            if not kept:
                continue
            top = max(kept) if sink is None else max(*kept, Decimal(float(sink)))
            exps = [(x - top).exp() if x is not None else Decimal(0) for x in logits]
            total = sum(exps, Decimal(0)) + (0 if sink is None else (Decimal(float(sink)) - top).exp())
            for j in range(lk):
                weights[i, j] = _to_float(exps[j] / total)
            for t in range(v.shape[1]):
                exact = sum((exps[j] / total * Decimal(float(v[j, t])) for j in range(lk)), Decimal(0))
                out[i, t] = _to_float(exact)
    return weights, out


def _agree(result, weights, out):
    # Both are correctly rounded results of the same real numbers: equal, or one ulp apart where the
    # exact value sits right at a rounding boundary.
    np.testing.assert_array_max_ulp(result.weights, weights, maxulp=1)
    np.testing.assert_array_max_ulp(result.output, out, maxulp=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_agrees_with_the_second_method(seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.standard_normal((4, 6)), rng.standard_normal((5, 6)), rng.standard_normal((5, 3))
    mask = rng.random((4, 5)) < 0.7
    mask[2] = False
    for causal in (False, True):
        result = oracle.attention(q, k, v, mask, is_causal=causal)
        with localcontext(_CONTEXT):
            scale = 1 / Decimal(6).sqrt()  # the exact 1/sqrt(E), as the oracle uses
        _agree(result, *_decimal_attention(q, k, v, scale, mask, causal))


@pytest.mark.parametrize(
    ("window", "sink_tokens", "kv_seqlen", "query_offset", "causal", "sink"),
    [
        ((2, 0), 0, None, 0, True, None),
        ((1, 1), 0, None, 3, False, None),
        ((None, 0), 0, 5, 2, False, None),
        ((1, 0), 2, None, 1, True, 0.75),
        (None, 0, 4, 0, False, -2.0),
        ((0, 0), 3, 6, 4, True, 30.0),
    ],
)
def test_windows_sinks_and_key_counts_agree_with_the_second_method(
    window, sink_tokens, kv_seqlen, query_offset, causal, sink
):
    """The oracle's window, sinks and kv_seqlen against a mask written from the contract's
    inequalities, and its sink logit against the second method's denominator."""
    rng = np.random.default_rng(sink_tokens + (kv_seqlen or 0))
    q, k, v = rng.standard_normal((5, 4)), rng.standard_normal((7, 4)), rng.standard_normal((7, 3))
    left, right = window if window is not None else (None, None)
    seen = np.zeros((5, 7), dtype=bool)
    for i in range(5):
        p = i + query_offset
        for j in range(7):
            hidden = j >= (kv_seqlen or 7) or (causal and j > p) or (right is not None and j > p + right)
            seen[i, j] = not hidden and (j < sink_tokens or left is None or j >= p - left)
    result = oracle.attention(
        q, k, v, is_causal=causal, window=window, sink_tokens=sink_tokens, kv_seqlen=kv_seqlen,
        query_offset=query_offset, sink_logits=None if sink is None else [sink],
    )  # fmt: skip
    with localcontext(_CONTEXT):
        scale = 1 / Decimal(4).sqrt()
    _agree(result, *_decimal_attention(q, k, v, scale, seen, sink=sink))
    assert np.array_equal(result.logits == -np.inf, ~seen)
    if sink is not None:  # the sink takes a share: every row that sees a key sums to less than 1
        sums = result.weights[seen.any(axis=1)].sum(axis=1)
        assert np.all(sums < 1)


def test_a_sink_logit_follows_the_logits_rules():
    """NaN and +inf make a row NaN, -inf adds nothing; a row that sees no key is +0.0 whatever."""
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((3, 3, 4)), rng.standard_normal((3, 5, 4)), rng.standard_normal((3, 5, 2))
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False  # row 1 sees no key
    result = oracle.attention(q, k, v, mask, sink_logits=[np.nan, np.inf, -np.inf])
    plain = oracle.attention(q, k, v, mask)
    for head in (0, 1):
        assert np.isnan(result.output[head, [0, 2]]).all()
    assert np.array_equal(result.output[:, 1], np.zeros((3, 2))) and not np.signbit(result.output[:, 1]).any()
    assert np.array_equal(result.output[2], plain.output[2])  # -inf: the plain softmax


@pytest.mark.parametrize(
    ("label", "q_spread", "k_spread", "v_spread", "softcap"),
    [
        ("tiny softcap ratio", 1.0, 1.0, 1.0, 1e60),
        ("tiny softcap ratio, 1e-300", 1.0, 1.0, 1.0, 1e300),
        ("huge softcap ratio", 1e150, 1e150, 1.0, 2.0),
        ("huge softcap ratio, tiny softcap", 1.0, 1.0, 1.0, 1e-300),
        ("subnormal outputs", 1.0, 1.0, 1e-310, 0.0),
        ("tiny scores", 1e-160, 1e-160, 1.0, 0.0),
        ("values near the largest double", 1.0, 1.0, 1.5e307, 0.0),
        ("logit gaps past exp's underflow", 30.0, 30.0, 1e20, 0.0),
    ],
)
def test_oracle_agrees_with_the_second_method_at_the_extremes(label, q_spread, k_spread, v_spread, softcap):
    rng = np.random.default_rng(len(label))
    q = rng.standard_normal((3, 4)) * q_spread
    k = rng.standard_normal((5, 4)) * k_spread
    v = rng.standard_normal((5, 2)) * v_spread
    result = oracle.attention(q, k, v, scale=1.0, softcap=softcap)
    _agree(result, *_decimal_attention(q, k, v, Decimal(1), softcap=softcap))
    assert np.isfinite(result.output).all()


def test_tiny_softcap_ratio_keeps_the_logits():
    # softcap 1e60: tanh(x / 1e60) * 1e60 is x to 120 digits, so the weights are softmax of the
    # plain logits (0.675 for the larger of two logits 0 and 0.73), not uniform.
    q = np.array([[1.0]])
    k = np.array([[0.0], [0.73]])
    v = np.array([[0.0], [1.0]])
    capped = oracle.attention(q, k, v, scale=1.0, softcap=1e60)
    plain = oracle.attention(q, k, v, scale=1.0)
    np.testing.assert_array_equal(capped.logits, [[0.0, 0.73]])
    np.testing.assert_array_equal(capped.weights, plain.weights)
    assert capped.output[0, 0] == pytest.approx(1 / (1 + np.exp(-0.73)), rel=1e-15)


def test_special_values_follow_ieee_as_the_ports_do():
    # +inf logit: the row is NaN (inf - inf); an all -inf row is +0.0; inf * 0 in a dot product is
    # NaN; softcap maps an infinite logit to ±softcap; 0 * inf in the weighted sum is NaN.
    q = np.array([[np.inf, 0.5], [-np.inf, 0.25], [np.inf, 1.0], [0.5, 1.0]])
    k = np.array([[1.0, 0.5], [2.0, -1.0], [0.0, 1.0]])
    v = np.array([[1.0, np.inf], [2.0, 0.0], [3.0, 1.0]])
    mask = np.array([[True, True, True], [True, True, False], [True, True, False], [True, False, True]])
    result = oracle.attention(q, k, v, mask)
    steps = reference.attention_steps(q, k, v, mask)
    for name in ("scores", "logits", "weights", "output"):
        mine, numpy_port = getattr(result, name), getattr(steps, name)
        np.testing.assert_array_equal(np.isnan(mine), np.isnan(numpy_port), err_msg=name)
        np.testing.assert_array_equal(np.isinf(mine), np.isinf(numpy_port), err_msg=name)
    assert np.isnan(result.scores[0, 2])  # inf * 0
    assert np.isnan(result.output[0]).all()  # +inf logit
    assert np.array_equal(result.output[1], [0.0, 0.0]) and not np.signbit(result.output[1]).any()
    assert np.isnan(result.output[2]).all()  # +inf logits again, through the mask
    assert result.output[3, 1] == np.inf  # key 0 holds +inf and carries weight
    capped = oracle.attention(q[:1, :], k[:2, :], v[:2, :1], softcap=3.0)
    np.testing.assert_array_equal(capped.logits, [[3.0, 3.0]])
    assert np.isfinite(capped.output).all()


def test_oracle_never_raises_on_special_inputs():
    values = [0.0, -0.0, 1.0, -1e308, 1e308, 5e-324, np.nan, np.inf, -np.inf]
    rng = np.random.default_rng(7)
    for _ in range(30):
        q, k, v = (rng.choice(values, size=shape) for shape in ((2, 3), (3, 3), (3, 2)))
        mask = rng.choice([0.0, -np.inf, np.inf, np.nan, 1e308], size=(2, 3))
        oracle.attention(q, k, v, mask, softcap=float(rng.choice([0.0, 1e-300, 2.0, 1e300])))


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
    with localcontext(_CONTEXT):
        # softcap 5 on logits 3200 and 3197.5: both tanh to 1 within 1e-1380, so both logits are 5
        # to every float64 digit, and the weights are equal.
        np.testing.assert_array_equal(capped.logits, [[5.0, 5.0], [5.0, 5.0]])
    np.testing.assert_array_equal(capped.weights, [[0.5, 0.5], [0.5, 0.5]])
    np.testing.assert_array_equal(capped.output, [[2.0], [2.0]])


def test_oracle_error_scale_grows_with_the_scores_and_is_zero_on_masked_rows():
    q = np.array([[1.0, 2.0], [100.0, 200.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[1.0], [-1.0]])
    mask = np.array([[True, True], [False, False]])
    result = oracle.attention(q, k, v, mask)
    assert result.error_scale[1, 0] == 0.0 and result.output[1, 0] == 0.0
    assert not np.signbit(result.output[1, 0])
    spread = 2 / np.sqrt(2)  # scale * max_j |q_0| · |k_j|
    assert result.spread[0] == pytest.approx(spread, rel=1e-15)
    magnitude = abs(result.weights[0]) @ abs(v[:, 0])  # sum_j |w_0j| |v_j0|
    assert result.error_scale[0, 0] == pytest.approx((1 + spread) * magnitude, rel=1e-15)
    # The budget, per dtype: K u (1 + S) magnitude plus K (tiny / 2^-1074) error_floor, the floor
    # one smallest subnormal per key (1 + |v| each); 0 on the fully-masked row.
    floor = 2.0**-1074 * (2 + 2)
    for dtype, u, tiny in (("float64", 2.0**-53, 2.0**-1074), ("float32", 2.0**-24, 2.0**-149)):
        budget = result.budgets[dtype].output
        relative = 16 * u * (1 + spread) * magnitude
        assert budget[0, 0] == pytest.approx(relative + 16 * (tiny / 2.0**-1074) * floor, rel=1e-14)
        assert budget[1, 0] == 0.0 and result.budgets[dtype].fallback is None
    assert result.budgets["float64"].outside is None


def test_spread_leaves_out_cells_a_boolean_mask_excludes():
    q = np.array([[1.0, 1.0]])
    k = np.array([[1.0, 0.0], [1e200, 1e200]])
    v = np.array([[1.0], [2.0]])
    result = oracle.attention(q, k, v, np.array([True, False]), scale=1.0)
    assert result.spread[0] == 1.0 and result.score_bound == 1.0
    assert oracle.attention(q, k, v, scale=1.0).score_bound == 2e200
