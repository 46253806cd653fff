"""Random inputs for the Python tests: one hypothesis strategy for every property test, and one
seeded draw for the tests that pick their own shapes. (Fixture cases come from cases.py.)"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


def random_arrays(seed: int, *shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Standard normal float64 arrays of the given shapes, from one seeded generator."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for shape in shapes]


# Sizes across float64's whole range for `extreme` draws: subnormal, tiny, ordinary, huge.
MAGNITUDES = (1e-310, 1e-300, 1e-160, 1e-20, 1.0, 1.0, 1e20, 1e150, 1e300, 1e307)
SPECIALS = (np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -1.7e308)


@st.composite
def attention_inputs(draw, min_length: int = 0, extreme: bool = False):
    """(query, key, value, attn_mask, options): rank 2 to 5 (batch dims, then heads), GQA groups,
    lengths from `min_length` (0: empty tensors too), no mask or a boolean or float one (with
    -inf cells) of any shape that broadcasts to the scores, causal, scale, softcap.

    With `extreme`, each tensor is scaled by a size drawn from MAGNITUDES (1e-310 to 1e307),
    special values (NaN, ±inf, signed zeros, the smallest subnormal, -1.7e308) are written into
    some cells, and scale and softcap range from 1e-300 to 1e300."""
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
    if extreme:
        tensors = [query, key, value] + ([mask] if mask is not None and mask.dtype != bool else [])
        for tensor in tensors:
            with np.errstate(over="ignore"):  # 1e307 times a draw past 1.8 is inf: a special too
                tensor *= draw(st.sampled_from(MAGNITUDES), label="magnitude")
            for _ in range(draw(st.integers(0, 2), label="specials") if tensor.size else 0):
                tensor.flat[rng.integers(tensor.size)] = draw(st.sampled_from(SPECIALS), label="special")
        options["scale"] = draw(st.sampled_from([None, 1.0, -0.5, 0.0, 1e-300, 1e-30, 1e30, 1e300]))
        options["softcap"] = draw(st.sampled_from([0.0, 0.0, 1e-300, 2.0, 1e60, 1e300]))
    return query, key, value, mask, options
