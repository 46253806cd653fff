"""The oracle's values for one valid case: what oracle.py computes and generate.py writes into a
fixture, and what fixtures.py reads back for compare.py's rule. A type of its own, below all three,
so that the oracle does not import the fixture reader."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ExpectedValues:
    """The oracle's values for a valid case (oracle.attention computes them, a fixture holds them),
    each rounded once to float64."""

    scores: np.ndarray  # [B..., Hq, Lq, Lk]  query · keyᵀ
    logits: np.ndarray  # [B..., Hq, Lq, Lk]  scaled, softcapped and masked: softmax's input
    weights: np.ndarray  # [B..., Hq, Lq, Lk]
    output: np.ndarray  # [B..., Hq, Lq, Ev]
    error_scale: np.ndarray  # [B..., Hq, Lq, Ev]  (1 + spread) * magnitude
    spread: np.ndarray  # [B..., Hq, Lq]  S_i of the tolerance rule
    magnitude: np.ndarray  # [B..., Hq, Lq, Ev]  sum_j |w_ij| |v_jt|
    error_floor: np.ndarray  # [B..., Hq, Lq, Ev]  2^-1074 * sum_j (1 + |v_jt|)
    score_bound: float  # the largest exact |score| or |logit| bound of a kept cell (inf: beyond float64)
