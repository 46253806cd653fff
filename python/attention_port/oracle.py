"""The oracle: the five attention steps in 256-bit arithmetic (mpmath), rounded once to float64.

It writes the expected values into the fixtures and is never a port under test: numpy, torch and
TypeScript are all measured against it. Dot products are exact (every float64 is an integer
multiple of 2^-1074, so a product is an integer multiple of 2^-2148 and a sum of them is a Python
integer); everything after that is carried with 256 bits and an exponent range without limits, so
tanh(1e-60) is 1e-60, exp(-1e300) is a tiny positive number and nothing overflows or underflows
before the one rounding to float64 at the end. That rounding goes through an exact integer ratio,
so subnormal results are rounded once, correctly.

Special values follow IEEE float64 arithmetic, as a plain loop over the steps would, and as the
the contract in docs/design.md (section 3) says:
  - a score is the IEEE sum of its products: NaN if a product is NaN (NaN, or inf * 0) or if +inf
    and -inf products meet, else the infinite product's sign, else the exact sum;
  - logits: score * scale (inf * 0 is NaN), softcap maps ±inf to ±softcap, a float mask is added
    (inf + -inf is NaN); a cell masked by a boolean mask or by causality is -inf whatever its score;
  - softmax subtracts the row max: a +inf logit makes its whole row NaN (inf - inf), a NaN logit
    too; a row whose cells are all -inf (or that has no key) has weights and output of exactly +0.0;
  - output: a NaN or infinite value meets the weight as float64 does: 0 * inf and 0 * NaN are NaN,
    so a value of inf reaches every row that is not fully masked (±inf where the row's float64
    weight on that key is positive, NaN where it is 0), and +inf meeting -inf is NaN.

Beside the values it writes what the tolerance rule in compare.py needs, so that no one re-derives
it:
  - `spread` S_i per query row: |scale| * max_j sum_t |q_it * k_jt| over the finite products of the
    cells j a boolean mask or causality does not exclude, plus max |m_ij| over the finite float-mask
    values of cells that keep a nonzero float64 weight, plus softcap when a cell's scaled score is
    infinite before the softcap (its logit is then ±softcap). The scores' rounding error, carried
    through the scale, is at most about u * S_i in every logit of the row.
  - `magnitude` per output element: sum_j |w_ij| * |v_jt| over the finite terms.
  - `error_scale` = (1 + S_i) * magnitude, the rule's yardstick (may overflow to inf; the rule then
    uses the two factors).
  - `error_floor` per output element: 2^-1074 * sum_j (1 + |v_jt|) over the keys not excluded: one
    step of the smallest subnormal per term, for results whose rounding happens below the normal
    range (a subnormal weight times a large value keeps an absolute error of |v| * 2^-1074).
  - `score_bound`, one number per case: the largest max(A_ij, |scale| * A_ij + |m_ij|) over cells
    not excluded, with A_ij = sum_t |q_it * k_jt| over the finite products. Where it exceeds the
    largest finite number of a dtype, a port's dot products or logits may overflow in whatever
    order it sums them: the contract does not define that case ("score overflow").
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from .extras import missing_extra
from .fixtures import ExpectedValues
from .inputs import check_shapes

try:
    import mpmath
except ModuleNotFoundError as error:
    raise missing_extra(error, "the oracle (attention_port.oracle)", "harness") from error

PRECISION_BITS = 256  # carried through every step after the exact dot products
_SHIFT = 1074  # every float64 is an integer multiple of 2^-1074
_LARGEST = mpmath.mpf(np.finfo(np.float64).max)
_NAN = mpmath.mpf("nan")
_INF = mpmath.mpf("inf")
_TINY = 2.0**-1074


@dataclass(frozen=True)
class _Head:
    """One (batch, head) slice's keys and values as the rows read them, and the options."""

    keys: list  # [Lk, E] floats
    key_ints: list  # [Lk, E] the same as integer multiples of 2^-1074 (None for NaN and inf)
    values: list  # [Lk, Ev] floats
    value_features: int  # Ev (values cannot say it when Lk = 0)
    is_causal: bool
    scale: object  # mpf
    softcap: float


@dataclass(frozen=True)
class _Row:
    """One query row through the five steps, exact (mpf) until to_float."""

    scores: list
    logits: list
    weights: list
    output: list
    magnitude: list
    error_floor: list
    spread: object
    score_bound: object


def to_float(x) -> float:
    """An mpf (or int) rounded once, to nearest, to float64, subnormals and overflow included."""
    x = mpmath.mpf(x)
    if mpmath.isnan(x):
        return math.nan
    if mpmath.isinf(x):
        return math.inf if x > 0 else -math.inf
    sign, man, exp, bits = x._mpf_
    if man == 0:
        return 0.0
    negative = sign == 1
    if exp + bits > 1025:  # at least 2^1024: beyond the largest double even after rounding
        return -math.inf if negative else math.inf
    if exp + bits < -1076:  # below half the smallest subnormal: rounds to a signed zero
        return -0.0 if negative else 0.0
    try:
        value = float(man << exp) if exp >= 0 else man / (1 << -exp)  # correctly rounded in CPython
    except OverflowError:
        value = math.inf
    return -value if negative else value


def _exact_int(x: float) -> int | None:
    """x as an integer multiple of 2^-1074, or None for NaN and infinities."""
    if not math.isfinite(x):
        return None
    numerator, denominator = x.as_integer_ratio()  # denominator is a power of two <= 2^1074
    return numerator * ((1 << _SHIFT) // denominator)


def _from_scaled(n: int, shift: int):
    """n * 2^-shift as an mpf (rounded to the working precision once)."""
    return mpmath.ldexp(mpmath.mpf(n), -shift)


def _dot(q_row: list[float], q_ints: list, k_row: list[float], k_ints: list):
    """The IEEE meaning of sum_t q_t k_t, and sum_t |q_t k_t| over the finite products."""
    exact = 0
    magnitude = 0
    special = None  # the IEEE sum of the non-finite products, if any
    for a, b, ia, ib in zip(q_row, k_row, q_ints, k_ints, strict=True):
        if ia is not None and ib is not None:
            product = ia * ib
            exact += product
            magnitude += abs(product)
            continue
        term = a * b  # float64: inf * 0 is NaN, inf * x is ±inf, NaN stays NaN
        special = term if special is None else special + term  # inf + -inf is NaN
    magnitude_mp = _from_scaled(magnitude, 2 * _SHIFT)
    if special is not None:
        return mpmath.mpf(special), magnitude_mp
    return _from_scaled(exact, 2 * _SHIFT), magnitude_mp


def _ieee_mul(x, y):
    """x * y for mpf values, where an infinite or NaN operand behaves as in IEEE."""
    if mpmath.isnan(x) or mpmath.isnan(y):
        return _NAN
    if mpmath.isinf(x) or mpmath.isinf(y):
        if x == 0 or y == 0:
            return _NAN
        return _INF if (x > 0) == (y > 0) else -_INF
    return x * y


def _ieee_add(x, y):
    if mpmath.isnan(x) or mpmath.isnan(y):
        return _NAN
    if mpmath.isinf(x) and mpmath.isinf(y) and x != y:
        return _NAN
    return x + y


def attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    attn_mask: np.ndarray | None = None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
) -> ExpectedValues:
    """Expected steps and the tolerance rule's inputs, for already-valid float64 inputs."""
    shapes = check_shapes(
        query.shape, key.shape, value.shape, None if attn_mask is None else attn_mask.shape, enable_gqa
    )
    scores_shape, output_shape = shapes.scores_shape, shapes.output_shape
    results = {
        "scores": np.empty(scores_shape),  # [B..., Hq, Lq, Lk]
        "logits": np.empty(scores_shape),  # [B..., Hq, Lq, Lk]
        "weights": np.empty(scores_shape),  # [B..., Hq, Lq, Lk]
        "output": np.empty(output_shape),  # [B..., Hq, Lq, Ev]
        "magnitude": np.empty(output_shape),  # [B..., Hq, Lq, Ev]
        "error_floor": np.empty(output_shape),  # [B..., Hq, Lq, Ev]
    }
    spread = np.empty(scores_shape[:-1])  # [B..., Hq, Lq]
    error_scale = np.empty(output_shape)  # [B..., Hq, Lq, Ev]
    score_bound = mpmath.mpf(0)
    mask = None if attn_mask is None else np.broadcast_to(attn_mask, scores_shape)
    lead_shape = scores_shape[:-2]  # [B..., Hq], or () for rank-2 inputs

    with mpmath.workprec(PRECISION_BITS):
        scale_mp = 1 / mpmath.sqrt(shapes.features) if scale is None else mpmath.mpf(float(scale))
        for lead in itertools.product(*(range(n) for n in lead_shape)):
            if shapes.has_heads:
                *batch, head = lead
                kv_lead = (*batch, head // shapes.group_size)
            else:
                kv_lead = lead
            keys = [[float(x) for x in row] for row in key[kv_lead]]  # [Lk, E]
            head = _Head(
                keys=keys,
                key_ints=[[_exact_int(x) for x in row] for row in keys],
                values=[[float(x) for x in row] for row in value[kv_lead]],
                value_features=shapes.value_features,
                is_causal=is_causal,
                scale=scale_mp,
                softcap=float(softcap),
            )
            for i, q_row in enumerate(query[lead]):
                row = _row(i, [float(x) for x in q_row], None if mask is None else mask[lead][i], head)
                for name, array in results.items():
                    array[(*lead, i)] = [to_float(x) for x in getattr(row, name)]
                spread[(*lead, i)] = to_float(row.spread)
                error_scale[(*lead, i)] = [to_float((1 + row.spread) * m) for m in row.magnitude]
                score_bound = max(score_bound, row.score_bound)
    bound = math.inf if score_bound > _LARGEST else to_float(score_bound)
    return ExpectedValues(**results, error_scale=error_scale, spread=spread, score_bound=bound)


def _row(i: int, q_row: list[float], mask_row, head: _Head) -> _Row:
    """Query row i through the five steps. mask_row is the row's [Lk] mask (bool or float) or None."""
    keys, key_ints, values, value_features = head.keys, head.key_ints, head.values, head.value_features
    is_causal, scale, softcap = head.is_causal, head.scale, head.softcap
    q_ints = [_exact_int(x) for x in q_row]
    key_length = len(keys)
    cap = mpmath.mpf(softcap)
    bool_mask = mask_row is not None and mask_row.dtype == bool
    # Which cells a boolean mask or causality excludes: their logit is -inf whatever the score.
    excluded = [(is_causal and j > i) or (bool_mask and not mask_row[j]) for j in range(key_length)]
    biases = [None if mask_row is None or bool_mask else float(mask_row[j]) for j in range(key_length)]
    # |m_ij| of each finite float-mask value (0 where there is none), for the spread and the bound.
    bias_sizes = [mpmath.mpf(0) if b is None or not math.isfinite(b) else abs(mpmath.mpf(b)) for b in biases]

    # Step 1: scores, exact dot products.
    dots = [_dot(q_row, q_ints, k_row, k_ints) for k_row, k_ints in zip(keys, key_ints, strict=True)]
    scores = [s for s, _ in dots]  # [Lk]
    magnitudes = [m for _, m in dots]  # [Lk]  sum_t |q_it k_jt| over the finite products
    # Step 2: scale and softcap.
    logits = [_ieee_mul(s, scale) for s in scores]  # [Lk]
    capped_infinity = False  # a softcapped cell whose scaled score was ±inf
    if softcap > 0:
        capped = []
        for x in logits:
            if mpmath.isnan(x):
                capped.append(_NAN)
            elif mpmath.isinf(x):
                capped_infinity = True
                capped.append(cap if x > 0 else -cap)
            else:
                capped.append(cap * mpmath.tanh(x / cap))
        logits = capped
    # Step 3: mask. Excluded cells become -inf; a float mask is added.
    for j in range(key_length):
        if excluded[j]:
            logits[j] = -_INF
        elif biases[j] is not None:
            logits[j] = _ieee_add(logits[j], mpmath.mpf(biases[j]))
    # Step 4: weights, softmax with the row max subtracted (as every port does, so that a +inf
    # logit gives inf - inf = NaN here too).
    fully_masked = all(x == -_INF for x in logits)  # or Lk == 0
    if any(mpmath.isnan(x) for x in logits):
        weights = [_NAN] * key_length
    elif fully_masked:
        weights = [mpmath.mpf(0)] * key_length
    else:
        top = max(logits)
        if mpmath.isinf(top):  # +inf: inf - inf is NaN
            weights = [_NAN] * key_length
        else:
            exps = [mpmath.exp(x - top) if x != -_INF else mpmath.mpf(0) for x in logits]
            total = mpmath.fsum(exps)
            weights = [e / total for e in exps]
    weights_f = [to_float(w) for w in weights]  # the float64 weights, for IEEE products below

    # Step 5: output, with the rule's magnitude and floor.
    output, magnitude, floor = [], [], []
    for t in range(value_features):
        column = [v_row[t] for v_row in values]
        if fully_masked:
            output.append(mpmath.mpf(0))
            magnitude.append(mpmath.mpf(0))
            floor.append(mpmath.mpf(0))
            continue
        finite_terms = []
        special = None  # the IEEE sum of the products with a NaN or infinite factor
        for w, wf, v in zip(weights, weights_f, column, strict=True):
            if mpmath.isnan(w) or not math.isfinite(v):
                term = wf * v  # float64: 0 * inf is NaN
                special = term if special is None else special + term
            else:
                finite_terms.append((w, v))
        exact = mpmath.fsum(w * v for w, v in finite_terms)
        output.append(exact if special is None else mpmath.mpf(special))
        magnitude.append(mpmath.fsum(abs(w) * abs(v) for w, v in finite_terms))
        floor.append(
            _TINY
            * mpmath.fsum(1 + abs(mpmath.mpf(v)) for v, ex in zip(column, excluded, strict=True)
                          if not ex and math.isfinite(v))
        )  # fmt: skip

    # The spread S_i and the score bound, over the cells that are not excluded.
    kept = [j for j in range(key_length) if not excluded[j]]
    largest_dot = max((magnitudes[j] for j in kept), default=mpmath.mpf(0))
    mask_magnitude = max(
        (bias_sizes[j] for j in kept if weights_f[j] != 0.0 and not math.isnan(weights_f[j])),
        default=mpmath.mpf(0),
    )
    spread = abs(scale) * largest_dot + mask_magnitude + (cap if capped_infinity else 0)
    score_bound = max(
        (max(magnitudes[j], abs(scale) * magnitudes[j] + bias_sizes[j]) for j in kept), default=mpmath.mpf(0)
    )
    return _Row(scores, logits, weights, output, magnitude, floor, spread, score_bound)
