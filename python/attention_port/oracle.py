"""The oracle: the five attention steps in 50-digit decimal arithmetic, rounded once to float64.

It writes the expected values into the fixtures and is never a port under test: numpy, torch and
TypeScript are all measured against it. Every float64 input converts to a Decimal exactly, every
product and sum is carried with 50 significant digits (a float64 product needs 32), exp and tanh
come from Decimal's correctly rounded exp, and the only float64 rounding is the last one.

Special values follow IEEE arithmetic as a plain float64 loop would: NaN in a cell that softmax
sees makes its row NaN; NaN in value spreads through the weighted sum (0 * NaN is NaN); a cell
masked by a boolean mask or by causality is -inf whatever its score. A row with every cell -inf
(or no key at all) has weights and output of exactly +0.0, by the contract.

It also computes each output element's `error_scale`, the tolerance rule's yardstick
(DESIGN.md section 5): (1 + S_i) * (|weights| · |value|) with
S_i = |scale| * max_j sum_t |q_it * k_jt| + max |m_ij| over the finite float-mask values m_ij of
row i whose cells keep a nonzero weight. The mask term is this project's addition to the design
formula: adding a float mask value m to a logit rounds at the size of m, so a large finite bias
(e.g. -1e4 on every key, which is not a mask but a number) widens the budget the way a large score
does; a bias so large that its weight is 0 (-1e30) cannot pass its rounding on.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from decimal import Context, Decimal, localcontext

import numpy as np

from .inputs import check_shapes

PRECISION = 50  # significant decimal digits carried through every step

_NEG_INF = Decimal("-Infinity")
_ZERO = Decimal(0)
_ONE = Decimal(1)


@dataclass(frozen=True)
class OracleResult:
    """Expected values, each rounded once to float64."""

    scores: np.ndarray  # [B..., Hq, Lq, Lk]  query · keyᵀ
    logits: np.ndarray  # [B..., Hq, Lq, Lk]  scaled, softcapped and masked: softmax's input
    weights: np.ndarray  # [B..., Hq, Lq, Lk]
    output: np.ndarray  # [B..., Hq, Lq, Ev]
    error_scale: np.ndarray  # [B..., Hq, Lq, Ev]  the tolerance rule's per-element yardstick


def _tanh(x: Decimal) -> Decimal:
    if x.is_nan():
        return x
    if x.is_infinite():
        return _ONE.copy_sign(x)
    # tanh(x) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)) * sign(x): no overflow for large |x|.
    e = (-2 * abs(x)).exp()
    return ((_ONE - e) / (_ONE + e)).copy_sign(x)


def _max(values: list[Decimal]) -> Decimal:
    """max() that returns NaN when any value is NaN (Decimal's ordering refuses NaN), 0 if empty."""
    if any(x.is_nan() for x in values):
        return Decimal("NaN")
    return max(values, default=_ZERO)


def _to_float(x: Decimal) -> float:
    # float(Decimal) rounds correctly to nearest float64 (it parses the exact decimal string).
    return float(x)


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
) -> OracleResult:
    """Expected scores, weights, output and error_scale for already-valid float64 inputs."""
    shapes = check_shapes(
        query.shape, key.shape, value.shape, None if attn_mask is None else attn_mask.shape, enable_gqa
    )
    scores_out = np.empty(shapes.scores_shape, dtype=np.float64)
    logits_out = np.empty(shapes.scores_shape, dtype=np.float64)
    weights_out = np.empty(shapes.scores_shape, dtype=np.float64)
    output_out = np.empty(shapes.output_shape, dtype=np.float64)
    scale_out = np.empty(shapes.output_shape, dtype=np.float64)
    mask = None if attn_mask is None else np.broadcast_to(attn_mask, shapes.scores_shape)
    lead_shape = shapes.scores_shape[:-2]  # [B..., Hq], or () for rank-2 inputs

    with localcontext(Context(prec=PRECISION)):
        scale_dec = _ONE / Decimal(shapes.features).sqrt() if scale is None else Decimal(float(scale))
        cap = Decimal(float(softcap))
        for lead in itertools.product(*(range(n) for n in lead_shape)):
            if shapes.has_heads:
                *batch, head = lead
                kv_lead = (*batch, head // shapes.group_size)
            else:
                kv_lead = lead
            q = [[Decimal(float(x)) for x in row] for row in query[lead]]  # [Lq, E]
            k = [[Decimal(float(x)) for x in row] for row in key[kv_lead]]  # [Lk, E]
            v = [[Decimal(float(x)) for x in row] for row in value[kv_lead]]  # [Lk, Ev]
            m = None if mask is None else mask[lead]  # [Lq, Lk]
            for i, q_row in enumerate(q):
                _row(
                    i, q_row, k, v, m, is_causal, scale_dec, cap, lead,
                    scores_out, logits_out, weights_out, output_out, scale_out,
                )  # fmt: skip
    return OracleResult(scores_out, logits_out, weights_out, output_out, scale_out)


def _row(i, q_row, k, v, m, is_causal, scale_dec, cap, lead, scores_out, logits_out, weights_out,
         output_out, scale_out) -> None:  # fmt: skip
    """One query row through the five steps, writing its slice of every result."""
    value_features = scale_out.shape[-1]
    # Step 1: scores, exact dot products (50 digits hold every float64 product and their sum).
    scores = [sum((a * b for a, b in zip(q_row, k_row, strict=True)), _ZERO) for k_row in k]  # [Lk]
    magnitude = _max([sum((abs(a * b) for a, b in zip(q_row, k_row, strict=True)), _ZERO) for k_row in k])
    # Step 2: scale and softcap.
    logits = [s * scale_dec for s in scores]  # [Lk]
    if cap > 0:
        logits = [cap * _tanh(x / cap) for x in logits]
    # Step 3: mask. Causal and boolean masks set -inf; a float mask is added.
    biases = [_ZERO] * len(logits)  # |finite float-mask value| per cell, for the error_scale
    for j in range(len(logits)):
        if is_causal and j > i:
            logits[j] = _NEG_INF
        if m is None:
            continue
        cell = m[i, j]
        if isinstance(cell, (bool, np.bool_)):
            if not cell:
                logits[j] = _NEG_INF
        else:
            bias = Decimal(float(cell))
            if bias.is_finite():
                biases[j] = abs(bias)
            if not (is_causal and j > i):
                logits[j] = logits[j] + bias
    # Step 4: weights, softmax with the max subtracted (exact here, but kept for the same reading).
    if any(x.is_nan() for x in logits):
        weights = [Decimal("NaN")] * len(logits)
    elif all(x == _NEG_INF for x in logits):  # fully masked, or Lk == 0
        weights = [_ZERO] * len(logits)
    else:
        top = max(logits)
        exps = [(x - top).exp() if x != _NEG_INF else _ZERO for x in logits]
        total = sum(exps, _ZERO)
        weights = [e / total for e in exps]
    fully_masked = all(x == _NEG_INF for x in logits)  # NaN == -inf is False, quietly
    # Step 5: output, and the error_scale of each element.
    # Adding a mask value m rounds at the size of m, but only cells that carry weight can pass
    # that error on: a -1e30 cell has weight exp(-1e30) = 0 whatever its rounding.
    mask_magnitude = max(
        (b for b, w in zip(biases, weights, strict=True) if not w.is_nan() and _to_float(w) != 0),
        default=_ZERO,
    )
    spread = _ONE + scale_dec.copy_abs() * magnitude + mask_magnitude
    for t in range(value_features):
        if fully_masked:
            output, weighted_magnitude = _ZERO, _ZERO
        else:
            output = sum((w * v_row[t] for w, v_row in zip(weights, v, strict=True)), _ZERO)
            weighted_magnitude = sum(
                (abs(w) * abs(v_row[t]) for w, v_row in zip(weights, v, strict=True)), _ZERO
            )
        output_out[(*lead, i, t)] = _to_float(output)
        scale_out[(*lead, i, t)] = _to_float(spread * weighted_magnitude)
    for j, (s, x, w) in enumerate(zip(scores, logits, weights, strict=True)):
        scores_out[(*lead, i, j)] = _to_float(s)
        logits_out[(*lead, i, j)] = _to_float(x)
        weights_out[(*lead, i, j)] = _to_float(w)
