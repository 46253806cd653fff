"""Random inputs for the Python tests: one hypothesis strategy for every property test, and one
seeded draw for the tests that pick their own shapes. (Fixture cases come from cases.py.)"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


def random_arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Standard normal float64 arrays of the given shapes, from one seeded generator."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


@st.composite
def attention_inputs(draw, min_length: int = 0):
    """(query, key, value, attn_mask, options): rank 2 to 5 (batch dims, then heads), GQA groups,
    lengths from `min_length` (0: empty tensors too), no mask or a boolean or float one (with
    -inf cells) of any shape that broadcasts to the scores, causal, scale, softcap."""
    rank = draw(st.integers(2, 5), label="rank")
    batch = tuple(draw(st.integers(1, 2)) for _ in range(max(rank - 3, 0)))
    kv_heads = draw(st.integers(1, 2))
    group = draw(st.integers(1, 3)) if rank >= 3 else 1
    heads_q = (kv_heads * group,) if rank >= 3 else ()
    heads_kv = (kv_heads,) if rank >= 3 else ()
    lq, lk = draw(st.integers(min_length, 6)), draw(st.integers(min_length, 7))
    e, ev = draw(st.integers(1, 5)), draw(st.integers(min_length, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    spread = draw(st.sampled_from([0.1, 1.0, 10.0]))
    query = rng.standard_normal((*batch, *heads_q, lq, e)) * spread  # [B..., Hq, Lq, E]
    key = rng.standard_normal((*batch, *heads_kv, lk, e))  # [B..., Hkv, Lk, E]
    value = rng.standard_normal((*batch, *heads_kv, lk, ev))  # [B..., Hkv, Lk, Ev]
    scores_shape = (*batch, *heads_q, lq, lk)
    mask = None
    mask_kind = draw(st.sampled_from(["none", "bool", "float"]))
    if mask_kind != "none":
        # A broadcastable mask shape: a suffix of the scores' shape with some dims set to 1.
        drop = draw(st.integers(0, len(scores_shape) - 1))
        shape = [n if draw(st.booleans()) else 1 for n in scores_shape[drop:]]
        if mask_kind == "bool":
            mask = rng.random(shape) < 0.6
        else:
            mask = np.where(rng.random(shape) < 0.3, -np.inf, rng.standard_normal(shape))
    options = {
        "is_causal": draw(st.booleans()),
        "scale": draw(st.one_of(st.none(), st.floats(0.05, 2.0))),
        "enable_gqa": group > 1 or draw(st.booleans()),
        "softcap": draw(st.sampled_from([0.0, 0.0, 1.5, 20.0])),
    }
    return query, key, value, mask, options
