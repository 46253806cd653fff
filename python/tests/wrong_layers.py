"""Wrong layers: an independent numpy layer and RoPE (written here from the contract, sharing no code
with the ports) in which one step can be changed, to show which fixtures catch each common layer
mistake in each dtype the fixtures hold. test_wrong_layers.py holds them; `python
python/tests/wrong_layers.py [FIXTURE_FOLDER]` prints the table of which fixtures catch which.

A dtype's budget is met by a port computing in it, or wider: the layer here computes in float64
for float64's budget and in float32 for the narrower ones (float32, float16, bfloat16, its answer
rounded to them), with the angles in float64 as the contract asks (only `float32_angles` forms
them in float32).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from attention_port.golden import reader
from attention_port.golden.rule import DTYPES, rounded
from attention_port.harness import compare
from attention_port.harness.compare import PortAnswer
from attention_port.paths import FIXTURES

# Each mistake: one step of the layer (or of RoPE) done another way.
MISTAKES = {
    "swapped_convention": "RoPE pairs (2i, 2i+1) where the contract says (i, i + d/2), and the reverse",
    "heads_merged_in_reverse": "the merge puts head Hq-1's features first and head 0's last",
    "kv_head_modulo": "query head h reads key/value head h % Hkv instead of h // (Hq / Hkv)",
    "only_b_o": "the layer returns b_o (0 without a bias) for every row",
    "causal_to_last_key": "with a cache, row i sees keys j <= i + P + Lk - Lq (aligned to the last key)",
    "shifted_position": "the layer turns its new rows at positions P+1.. instead of P..",
    "float32_angles": "the angle position · theta^(-2i/d) formed and taken cos/sin of in float32",
}


def _compute_dtype(dtype: str):
    return np.float64 if dtype == "float64" else np.float32


def _angles(positions: np.ndarray, theta: float, rotary_dim: int, mistake: str | None) -> np.ndarray:
    """[..., L, rotary_dim/2]: the angle of each pair at each position, float64 unless the mistake."""
    exponent = -2.0 * np.arange(rotary_dim // 2) / rotary_dim  # [d/2]
    if mistake == "float32_angles":
        inverse = np.float32(theta) ** exponent.astype(np.float32)  # [d/2] float32
        return positions.astype(np.float32)[..., None] * inverse  # float32 throughout
    return positions.astype(np.float64)[..., None] * theta**exponent  # [..., L, d/2]


def rotate(x, positions, theta, rotary_dim, interleaved, mistake=None):
    """RoPE of x [..., L, E] (x's dtype) at positions broadcastable to [..., L]."""
    rotary_dim = x.shape[-1] if rotary_dim is None else rotary_dim
    if mistake == "swapped_convention":
        interleaved = not interleaved
    half = rotary_dim // 2
    angle = _angles(np.asarray(positions), theta, rotary_dim, mistake)  # [..., L, d/2]
    cos, sin = np.cos(angle).astype(x.dtype), np.sin(angle).astype(x.dtype)
    first = np.arange(0, rotary_dim, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    a, b = x[..., first], x[..., second]  # [..., L, d/2]
    out = x.copy()
    out[..., first] = a * cos - b * sin
    out[..., second] = a * sin + b * cos
    return out


def _softmax_rows(logits: np.ndarray, sinks: np.ndarray | None = None) -> np.ndarray:
    """Softmax over the last axis with -inf excluded; a row with no key left gives +0.0. sinks
    [Hq]: each head's sink logit, one more logit without a value (logits [..., Hq, Lq, Lk])."""
    top = np.max(logits, axis=-1, keepdims=True, initial=-np.inf)
    seen = np.isfinite(top)  # [..., Hq, Lq, 1]: rows with a key to see
    sink = None if sinks is None else np.asarray(sinks, dtype=logits.dtype)[:, None, None]  # [Hq, 1, 1]
    if sink is not None:
        top = np.maximum(top, sink)
    top = np.where(np.isfinite(top), top, 0)
    e = np.exp(logits - top)
    total = e.sum(axis=-1, keepdims=True) + (0 if sink is None else np.exp(sink - top))
    return np.where(seen & (total > 0), e / np.where(total > 0, total, 1), 0).astype(logits.dtype)


def _visible(params: dict, batch: tuple, lq: int, lk: int, offset: int) -> np.ndarray:
    """[B..., 1, Lq, Lk]: which keys each query row sees, from the contract's rule written out here
    (row i at position p = i + offset; causality, the window's sides, the sink tokens and each
    sequence's kv_seqlen), independent of the ports' key range."""
    p = np.arange(lq)[:, None] + offset  # [Lq, 1]
    j = np.arange(lk)  # [Lk]
    seen = np.ones((lq, lk), dtype=bool)
    if params.get("is_causal"):
        seen &= j <= p
    left, right = params.get("window") or (None, None)
    if right is not None:
        seen &= j <= p + right
    if left is not None:
        seen &= (j >= p - left) | (j < (params.get("sink_tokens") or 0))  # sinks escape the left side
    lengths = params.get("kv_seqlen")
    if lengths is None:
        return seen
    counts = np.asarray(lengths).reshape(*batch, 1, 1, 1)  # [B..., 1, 1, 1]
    return seen & (j < counts)


def wrong_layer(inputs: dict, params: dict, mistake: str | None, dtype: str) -> dict[str, np.ndarray]:
    """The layer with `mistake` (None: the contract's), computing in dtype's compute dtype."""
    real = _compute_dtype(dtype)

    def arr(name):
        x = inputs.get(name)
        return None if x is None else np.asarray(x, dtype=real)

    x_q = arr("x_q")
    x_kv = x_q if inputs.get("x_kv") is None else arr("x_kv")
    hq = params["num_heads"]
    hkv = hq if params.get("num_kv_heads") is None else params["num_kv_heads"]

    def project(x, w, b):  # [..., L, in] -> [..., L, out]
        y = x @ arr(w).T
        return y if inputs.get(b) is None else y + arr(b)

    q, k, v = project(x_q, "w_q", "b_q"), project(x_kv, "w_k", "b_k"), project(x_kv, "w_v", "b_v")
    e, ev = q.shape[-1] // hq, v.shape[-1] // hkv

    def split(a, heads, width):  # [..., L, H·w] -> [..., H, L, w]
        return np.swapaxes(a.reshape(*a.shape[:-1], heads, width), -2, -3)

    q, k, v = split(q, hq, e), split(k, hkv, e), split(v, hkv, ev)
    past_key, past_value = arr("past_key"), arr("past_value")
    cached = 0 if past_key is None else past_key.shape[-2]  # P
    rope = params.get("rope")
    if rope is not None:
        start = cached + (1 if mistake == "shifted_position" else 0)
        positions = np.arange(start, start + q.shape[-2], dtype=np.float64)  # [Lq]
        options = (
            float(rope.get("theta", 10000.0)),
            rope.get("rotary_dim"),
            bool(rope.get("interleaved", False)),
        )
        q, k = rotate(q, positions, *options, mistake), rotate(k, positions, *options, mistake)
    new_keys = k.shape[-2]
    if past_key is not None:
        k, v = np.concatenate([past_key, k], axis=-2), np.concatenate([past_value, v], axis=-2)
    present_key, present_value = k, v  # [..., Hkv, P+Lk, E | Ev]: the cache keeps the key/value heads
    lq, lk = q.shape[-2], k.shape[-2]
    group = hq // hkv
    heads = np.arange(hq) % hkv if mistake == "kv_head_modulo" else np.arange(hq) // group
    k, v = k[..., heads, :, :], v[..., heads, :, :]  # [..., Hq, Lk, E | Ev]
    scale = params.get("scale")
    scale = 1 / np.sqrt(e) if scale is None else scale
    logits = (q @ np.swapaxes(k, -1, -2)) * real(scale)  # [..., Hq, Lq, Lk]
    softcap = params.get("softcap") or 0.0
    if softcap > 0:
        logits = real(softcap) * np.tanh(logits / real(softcap))
    offset = cached + (new_keys - lq if mistake == "causal_to_last_key" and params.get("is_causal") else 0)
    logits = np.where(_visible(params, logits.shape[:-3], lq, lk, offset), logits, -np.inf)
    mask = inputs.get("attn_mask")
    if mask is not None:
        logits = np.where(mask, logits, -np.inf) if mask.dtype == bool else logits + mask.astype(real)
    weights = _softmax_rows(logits.astype(real), params.get("sink_logits"))
    heads_out = weights @ v  # [..., Hq, Lq, Ev]
    if mistake == "heads_merged_in_reverse":
        heads_out = heads_out[..., ::-1, :, :]
    merged = np.swapaxes(heads_out, -2, -3).reshape(*heads_out.shape[:-3], lq, hq * ev)
    output = merged @ arr("w_o").T + (0 if inputs.get("b_o") is None else arr("b_o"))
    if mistake == "only_b_o":
        output = np.zeros_like(output) + (0 if inputs.get("b_o") is None else arr("b_o"))
    steps = {"output": output}
    if params.get("need_weights"):
        steps["weights"] = weights
    if params.get("return_cache"):
        steps["present_key"], steps["present_value"] = present_key, present_value
    return {name: np.asarray(x, dtype=np.float64) for name, x in steps.items()}


def wrong_rotary(inputs: dict, params: dict, mistake: str | None, dtype: str) -> dict[str, np.ndarray]:
    """apply_rotary with `mistake` (the layer's mistakes that are not RoPE's change nothing here)."""
    x = np.asarray(inputs["x"], dtype=_compute_dtype(dtype))  # [B..., H, L, E]
    positions = np.asarray(inputs["positions"], dtype=np.float64)
    if positions.ndim > 1:
        positions = positions[..., None, :]  # [B..., 1, L]: every head alike
    out = rotate(x, positions, params["theta"], params["rotary_dim"], params["interleaved"], mistake)
    return {"output": out.astype(np.float64)}


def valid_cases(folder: Path | str = FIXTURES) -> list:
    cases = reader.load_fixtures(folder, kinds=("layer", "rope"), schema=False)
    return [c for c in cases if not c.expects_error]


def verdict(case, mistake: str | None, dtype: str):
    """compare.py's verdict on the wrong layer (or RoPE) computing for `dtype`'s budget."""
    run = wrong_rotary if case.kind == "rope" else wrong_layer
    with np.errstate(all="ignore"):
        steps = run(case.inputs, case.params, mistake, dtype)
    # Narrower than float32: what a port computing in float32 returns in its dtype.
    steps = {name: rounded(x, dtype) for name, x in steps.items()}
    return compare.judge(case, mistake or "contract", dtype, PortAnswer(steps=steps))


def catchers(cases: list, mistake: str | None) -> dict[str, list[str]]:
    """{dtype: the ids of the fixtures the layer with `mistake` fails}."""
    return {dtype: [c.id for c in cases if not verdict(c, mistake, dtype).passed] for dtype in DTYPES}


def main(folder: str) -> None:
    cases = valid_cases(folder)
    print(f"{len(cases)} valid layer and RoPE fixtures in {folder}")
    for mistake in (None, *MISTAKES):
        caught = catchers(cases, mistake)
        print(f"\n{mistake or 'the contract (must fail none)'}:")
        for dtype, ids in caught.items():
            print(f"  {dtype:9} {len(ids):3}  {' '.join(ids)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(FIXTURES))
