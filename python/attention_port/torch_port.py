"""The PyTorch port of scaled dot-product attention: the same five steps as reference.py, on a GPU
when there is one.

    output = softmax(query · keyᵀ · scale [+ mask]) · value

Grown from the tutorial's PyTorch version (docs/design.md, section 1: the chapter writes attention
again in PyTorch and compares it with its numpy version). Each step is explicit tensor maths on the
device, with the same labels, order and names as reference.py (the numpy float64 port), so the two
files read side by side. torch's own kernel is not used by the port: `torch_sdpa` below calls
torch.nn.functional.scaled_dot_product_attention only to cross-check the production kernel.

Dimension letters (docs/design.md):
    B...  leading batch dims (any number, equal across query, key and value)
    Hq    query heads             Hkv  key/value heads (Hq == Hkv unless enable_gqa)
    Lq    query length (rows)     Lk   key/value length (the axis softmax runs over)
    E     query/key features      Ev   value features
Shapes: query [B..., Hq, Lq, E], key [B..., Hkv, Lk, E], value [B..., Hkv, Lk, Ev]
        -> output [B..., Hq, Lq, Ev]. Rank-2 inputs [L, E] are the tutorial's form: no batch, no heads.

Inputs may be torch tensors, numpy arrays or nested lists. They are checked by inputs.py in the same
order as reference.py, so a bad input raises the same AttentionInputError kind and message here.

Device (`device=`): given, it wins. Otherwise the device of the first torch tensor among query, key
and value, and for numpy arrays or lists `default_device()`: cuda, then mps, then cpu.

Dtype (`dtype=`, the dtype every step computes in): given, it wins. Otherwise float64 (the
reference's precision) unless query, key and value are all floating torch tensors, which keep their
own dtype (promoted if they differ: float32 with float16 gives float32). Numpy arrays, lists and
integer tensors count as float64, as they do in reference.py. On mps, which has no float64, the
default is float32. A float attn_mask is cast to the compute dtype (so in float16 a mask value of
-1e30 rounds to -inf and masks); a boolean attn_mask stays boolean.

Checked dtypes (`supported_dtypes(device)`, the grid `verify` runs by default): float64 and
float32 on cpu and cuda, float32 alone on mps (Metal has no float64, the one dtype the port
refuses), plus float16 and bfloat16 on cuda. Half precision on the CPU is left out of that list by
choice, not refused: the port computes it when asked (torch 2.13's CPU build passes every fixture
in float16 and bfloat16 with at most 6.4% and 7.0% of the error budget used), but CPU half
arithmetic is mostly float32 arithmetic rounded per operation, so it says little about the GPU half
kernels that half precision is used on, and it is slow at real sizes.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from attention_port.contract import CORE_CHECK_ORDER
from attention_port.extras import missing_extra
from attention_port.inputs import (
    DEFAULT_MEMORY_LIMIT,
    AttentionInputError,
    AttentionShapes,
    check_option_shapes,
    check_options,
    check_shapes,
    check_size,
    check_tensor,
    resolve_scale,
    to_array,
    to_mask_array,
)
from attention_port.key_range import KeyRange, key_range, sees_every_key, visible_keys

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError as error:
    raise missing_extra(error, "torch_port", "torch") from error

__all__ = [
    "AttentionInputError",
    "AttentionSteps",
    "attention_steps",
    "default_device",
    "scaled_dot_product_attention",
    "sdpa_shares_semantics",
    "softmax",
    "supported_dtypes",
    "tf32_disabled",
    "torch_sdpa",
]

# torch integer dtypes count as real numbers, as numpy's "iu" kinds do in inputs.to_array.
_INTEGER_DTYPES = frozenset(
    getattr(torch, name)
    for name in ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if hasattr(torch, name)
)


@dataclass(frozen=True)
class AttentionSteps:
    """Every intermediate tensor, for teaching and for finding the step where two ports part."""

    scores: torch.Tensor  # [B..., Hq, Lq, Lk]  Step 1: query · keyᵀ
    logits: torch.Tensor  # [B..., Hq, Lq, Lk]  Steps 2-3: scaled, softcapped, masked (softmax's input)
    weights: torch.Tensor  # [B..., Hq, Lq, Lk]  Step 4: softmax over keys; each row sums to 1 or is 0
    output: torch.Tensor  # [B..., Hq, Lq, Ev]  Step 5: weights · value


# ---------------------------------------------------------------------------------------------
# Devices and dtypes


def default_device() -> torch.device:
    """Where the port runs when nothing says otherwise: cuda, then mps (Apple GPUs), then cpu."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def supported_dtypes(device: torch.device | str | None = None) -> list[torch.dtype]:
    """The dtypes the port is checked in on `device` (default: default_device()), widest first. The
    port also computes float16 and bfloat16 on the CPU when asked (the module docstring says why they
    are not checked there)."""
    device_type = torch.device(device).type if device is not None else default_device().type
    if device_type == "mps":
        return [torch.float32]  # Metal has no float64
    if device_type == "cuda":
        return [torch.float64, torch.float32, torch.float16, torch.bfloat16]
    return [torch.float64, torch.float32]


@contextlib.contextmanager
def tf32_disabled() -> Iterator[None]:
    """Turn TensorFloat-32 off for CUDA matmuls and cuDNN inside the block, then restore it.

    With TF32 on (the cuDNN default), an Ampere-or-later GPU rounds float32 matmul inputs to a
    10-bit mantissa: about float16's precision, far outside float32's tolerance. Compare float32
    results only inside this block. Harmless on a machine without CUDA (the flags are just saved,
    set and restored).
    """
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    try:
        flags = [(matmul, "allow_tf32", False), (cudnn, "allow_tf32", False)]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in flags]
    except RuntimeError:
        # torch >= 2.9 refuses to read the legacy flags once its newer fp32_precision API has been
        # used; then switch through that API instead.
        flags = [(owner, "fp32_precision", "ieee") for owner in (matmul, cudnn.conv, cudnn.rnn)]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in flags]
    for owner, name, value in flags:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


# ---------------------------------------------------------------------------------------------
# Input checks and conversion (inputs.py, in reference.py's order)


def _checked(name: str, data: object, memory_limit: float) -> torch.Tensor | np.ndarray:
    """query, key or value: a torch tensor of real numbers as it is, anything else via to_array (a
    float64 numpy array). attn_mask: booleans are allowed too, and to_mask_array reads the rest."""
    is_mask = name == "attn_mask"
    if not isinstance(data, torch.Tensor):
        return to_mask_array(data, memory_limit) if is_mask else to_array(name, data, memory_limit)
    check_tensor(name, data)  # as reference.py reads one: a rank it supports, values to read
    real = data.dtype.is_floating_point or data.dtype in _INTEGER_DTYPES
    if not (real or (is_mask and data.dtype == torch.bool)):
        dtype = str(data.dtype).removeprefix("torch.")  # numpy's spelling, as reference.py's messages
        expected = "booleans or real numbers" if is_mask else "real numbers"
        raise AttentionInputError("type", f"{name} has dtype {dtype}, expected {expected}")
    return data


def _check_device_and_dtype(device: object, dtype: object) -> None:
    """The torch port's own options, checked with the others (kind "value"), before any tensor."""
    if device is not None:
        try:
            torch.device(device)  # type: ignore[arg-type]
        except (RuntimeError, TypeError, ValueError):
            raise AttentionInputError(
                "value", f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}"
            ) from None
    if dtype is not None and not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
        raise AttentionInputError("value", f"dtype must be a floating-point torch.dtype, got {dtype!r}")


def _resolve_device(device: torch.device | str | None, tensors: list[object]) -> torch.device:
    if device is not None:
        return torch.device(device)
    for tensor in tensors:
        if isinstance(tensor, torch.Tensor):
            return tensor.device
    return default_device()


def resolve_dtype(dtype: torch.dtype | None, device: torch.device, tensors: list[object]) -> torch.dtype:
    """The dtype the port computes in: `dtype` if given, else the promotion of the inputs' dtypes
    (anything but a floating-point tensor counts as float64), float32 on mps (no float64 there)."""
    if dtype is not None:
        _check_device_and_dtype(None, dtype)
    else:
        natural = [
            t.dtype if isinstance(t, torch.Tensor) and t.dtype.is_floating_point else torch.float64
            for t in tensors
        ]
        dtype = functools.reduce(torch.promote_types, natural)
        if device.type == "mps" and dtype == torch.float64:
            dtype = torch.float32
    if device.type == "mps" and dtype == torch.float64:
        raise AttentionInputError(
            "value", "dtype float64 is not available on mps (Metal has no float64); use float32"
        )
    return dtype


def _on_device(data: torch.Tensor | np.ndarray, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Cast first, then move: mps cannot hold the float64 a numpy array arrives in."""
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(np.array(data))  # a copy: the caller's array is never shared
    return data.to(dtype=dtype).to(device=device)


@dataclass(frozen=True)
class _Prepared:
    query: torch.Tensor  # [B..., Hq, Lq, E]
    key: torch.Tensor  # [B..., Hkv, Lk, E]
    value: torch.Tensor  # [B..., Hkv, Lk, Ev]
    mask: torch.Tensor | None  # bool, or float in the compute dtype; broadcasts to the scores
    shapes: AttentionShapes
    scale: float  # resolved: 1/sqrt(E) where none was given
    options: dict[str, object]  # the core's scalar options, checked (check_options's), the scale as given


def _core_options(arguments: dict[str, object]) -> dict[str, object]:
    """The core's scalar options among a public function's arguments (its locals() as it starts),
    by their names in contract/options.json. Each public function spells them in its signature,
    for its readers and callers; what it hands on reads them from here, so that none of the
    plumbing below a signature names an option the port only passes through."""
    return {
        option.python: arguments[option.python] for option in CORE_CHECK_ORDER if option.python in arguments
    }


def _prepare(query, key, value, attn_mask, device, dtype, options: dict[str, object]) -> _Prepared:
    """Check every input exactly as reference.py does, then put them on one device in one dtype.
    `options`: the core's scalar options by name (an option left out has its default)."""
    options = check_options(**options)
    enable_gqa, scale, memory_limit = options["enable_gqa"], options["scale"], options["memory_limit"]
    _check_device_and_dtype(device, dtype)  # the torch port's own options
    query = _checked("query", query, memory_limit)  # [B..., Hq, Lq, E]
    key = _checked("key", key, memory_limit)  # [B..., Hkv, Lk, E]
    value = _checked("value", value, memory_limit)  # [B..., Hkv, Lk, Ev]
    mask = (
        None if attn_mask is None else _checked("attn_mask", attn_mask, memory_limit)
    )  # broadcasts to the scores
    shapes = check_shapes(
        query.shape, key.shape, value.shape, None if mask is None else mask.shape, enable_gqa
    )
    check_option_shapes(options, shapes, query.shape, key.shape)  # sink_logits [Hq], kv_seqlen [B...]
    check_size(shapes, memory_limit)  # before the [B..., Hq, Lq, Lk] steps are allocated
    scale = resolve_scale(scale, shapes.features)

    device = _resolve_device(device, [query, key, value])
    dtype = resolve_dtype(dtype, device, [query, key, value])
    try:
        if mask is not None:
            is_bool = mask.dtype == torch.bool if isinstance(mask, torch.Tensor) else mask.dtype == bool
            mask = _on_device(mask, device, torch.bool if is_bool else dtype)
        query, key, value = (_on_device(x, device, dtype) for x in (query, key, value))
    except (RuntimeError, AssertionError) as error:  # torch says "not compiled with CUDA" by assert
        raise AttentionInputError("value", f"device {str(device)!r} cannot be used here ({error})") from None
    return _Prepared(
        query=query, key=key, value=value, mask=mask, shapes=shapes, scale=scale, options=options
    )


# ---------------------------------------------------------------------------------------------
# The port


def softmax(logits: torch.Tensor, sinks: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the last axis, stable, with fully-masked rows giving +0.0; `sinks` [..., 1, 1]
    (one per head, or None) joins each row's max and denominator without a value.

    Why subtract the row max: exp(1000) overflows float64 to inf and inf/inf is NaN, but softmax
    is unchanged by shifting a row by a constant, so exp(x - max) (every exponent <= 0, the largest
    exactly 0) gives the same weights without overflow.

    Why a fully-masked row needs care: its max is -inf, and -inf - (-inf) is NaN, so the tutorial's
    softmax returns a row of NaN there. Such a row has no key to attend to; torch and ONNX define
    its weights (and its output) as zero, and so do we (whatever its sink): by construction here,
    not by relying on what torch.softmax happens to do with such a row.

    A sink logit s is one more logit with no value: the max is max(s, the row's), the denominator
    gains exp(s - max), so the row's weights sum to less than 1. It follows the logits' rules: NaN
    or +inf makes the row NaN (inf - inf), -inf adds exp(-inf) = 0, nothing.
    """
    if logits.shape[-1] > 0:
        row_max = logits.amax(dim=-1, keepdim=True)  # [..., Lq, 1]  NaN if the row holds NaN
    else:  # Lk == 0: amax refuses an empty axis; numpy's initial=-inf gives -inf
        row_max = logits.new_full((*logits.shape[:-1], 1), -math.inf)  # [..., Lq, 1]
    fully_masked = row_max == -math.inf  # [..., Lq, 1]  (also true when Lk == 0)
    top = row_max if sinks is None else torch.maximum(row_max, sinks)  # [..., Lq, 1]  NaN meets NaN
    shifted = logits - torch.where(fully_masked, 0.0, top)  # [..., Lq, Lk]  every cell <= 0
    exps = torch.exp(shifted)  # [..., Lq, Lk]  masked cells: exp(-inf) = 0
    sums = exps.sum(dim=-1, keepdim=True)  # [..., Lq, 1]  >= 1 in every row that has a key and no sink
    if sinks is not None:
        sums = sums + torch.exp(sinks - torch.where(fully_masked, 0.0, top))  # [..., Lq, 1]  the sink's share
    weights = torch.where(fully_masked, 0.0, exps / sums)  # [..., Lq, Lk]  0/0 replaced by +0.0
    return weights


def attention_steps(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    memory_limit: float = DEFAULT_MEMORY_LIMIT,
) -> AttentionSteps:
    """Scaled dot-product attention, returning every step. Arguments as in torch, plus the
    device and dtype to compute in (see the module docstring for the defaults) and memory_limit,
    the most bytes the steps may need (kind "size" above it; see inputs.py). query_offset, window,
    sink_tokens, sink_logits and kv_seqlen are reference.py's."""
    inputs = _prepare(query, key, value, attn_mask, device, dtype, _core_options(locals()))
    query, key, value, mask = inputs.query, inputs.key, inputs.value, inputs.mask
    shapes, scale, options = inputs.shapes, inputs.scale, inputs.options

    if shapes.group_size != 1:
        # Grouped-query attention: each key/value head serves group_size consecutive query heads,
        # so query head h reads key/value head h // group_size (torch's repeat_interleave).
        key = key.repeat_interleave(shapes.group_size, dim=-3)  # [B..., Hq, Lk, E]
        value = value.repeat_interleave(shapes.group_size, dim=-3)  # [B..., Hq, Lk, Ev]

    # Step 1: scores. How well each query matches each key: a dot product per (query, key) pair.
    scores = query @ key.transpose(-1, -2)  # [B..., Hq, Lq, Lk]

    # Step 2: scale. A dot product of E terms of unit variance has variance E, so raw scores grow
    # like sqrt(E) and push softmax into saturation (one weight near 1, tiny gradients elsewhere).
    # Multiplying by 1/sqrt(E) brings the spread back to about 1 whatever E is.
    logits = scores * scale  # [B..., Hq, Lq, Lk]
    if softcap > 0:
        # Softcap squashes the logits smoothly into (-softcap, softcap) before softmax.
        logits = softcap * torch.tanh(logits / softcap)  # [B..., Hq, Lq, Lk]

    # Step 3: mask. A disallowed cell becomes -inf, so exp() makes its weight exactly 0.
    allowed = torch.ones(logits.shape, dtype=torch.bool, device=logits.device)  # [B..., Hq, Lq, Lk]
    # key_range.py decides which keys each row sees. With is_causal, query i sits at position
    # i + query_offset and may look at keys j <= i + query_offset only (offset 0 is torch's
    # top-left rule; a decode step after P cached keys has offset P). A window (left, right) shows
    # it keys p - left .. p + right of its position p, the sink tokens besides; kv_seqlen hides
    # every key from kv_seqlen[b] on.
    keys = _key_range(shapes, options)
    allowed &= _visible_keys(keys, logits.device)  # [B..., 1, Lq, Lk]
    if mask is not None and mask.dtype == torch.bool:
        allowed &= mask  # True = may attend; broadcasts numpy-style
    elif mask is not None:
        logits = logits + mask  # a float mask is added; -inf in it masks, a finite value is a bias
    logits = torch.where(allowed, logits, -math.inf)  # [B..., Hq, Lq, Lk]

    # Step 4: weights. Softmax over the keys turns each row of logits into a distribution; a sink
    # logit per head takes a share of it and gives no value back.
    sinks = options["sink_logits"]
    if sinks is not None:
        heads = (shapes.query_heads,) if shapes.has_heads else ()
        sinks = torch.tensor(sinks, dtype=torch.float64).to(logits.dtype).to(logits.device)
        sinks = sinks.reshape(*heads, 1, 1)  # [Hq, 1, 1] ([1, 1] for rank 2)
    weights = softmax(logits, sinks)  # [B..., Hq, Lq, Lk]

    # Step 5: output. Each query's output is the weights-average of the value rows.
    output = weights @ value  # [B..., Hq, Lq, Ev]
    # A fully-masked row's output is +0.0 by construction, even where value holds NaN or inf
    # (0 * NaN would be NaN): the row attends to nothing, so there is nothing to average.
    fully_masked = (logits == -math.inf).all(dim=-1, keepdim=True)  # [B..., Hq, Lq, 1]
    output = torch.where(fully_masked, 0.0, output)  # [B..., Hq, Lq, Ev]

    return AttentionSteps(scores=scores, logits=logits, weights=weights, output=output)


def _key_range(shapes: AttentionShapes, options: dict[str, object]) -> KeyRange:
    """key_range.py's key range from the checked options (those it reads)."""
    names = ("is_causal", "query_offset", "window", "sink_tokens", "kv_seqlen")
    return key_range(shapes, **{name: options[name] for name in names})  # type: ignore[arg-type]


def _visible_keys(keys: KeyRange, device: torch.device) -> torch.Tensor:
    """key_range.py's visible_keys on the device: [B..., 1, Lq, Lk] booleans, True where query row i
    sees key j."""
    return torch.from_numpy(visible_keys(keys)).to(device)  # [B..., 1, Lq, Lk]


def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
    memory_limit: float = DEFAULT_MEMORY_LIMIT,
) -> torch.Tensor:
    """softmax(query · keyᵀ · scale [+ mask]) · value, as
    torch.nn.functional.scaled_dot_product_attention (without dropout), written out step by step."""
    return attention_steps(
        query, key, value, attn_mask, device=device, dtype=dtype, **_core_options(locals())
    ).output


# ---------------------------------------------------------------------------------------------
# torch's own kernel, for cross-checking


def _torch_version() -> tuple[int, int]:
    """(major, minor) of the installed torch: "2.13.0+cpu" -> (2, 13)."""
    major, minor = torch.__version__.split(".")[:2]
    return int(major), int(minor)


# torch.nn.functional.scaled_dot_product_attention gained enable_gqa in torch 2.5.
_TORCH_HAS_ENABLE_GQA = _torch_version() >= (2, 5)


def torch_sdpa(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """torch.nn.functional.scaled_dot_product_attention on the same checked inputs as the port.

    A thin call of the production kernel (whichever one torch dispatches to), for cross-checks.
    It agrees with the port only where `sdpa_shares_semantics` says so. Two adjustments, neither
    a change of meaning: torch refuses attn_mask together with is_causal, and its is_causal has no
    query offset, so the causal rule is folded into a mask here when either is given (the port's
    contract combines the two); and a 1-D mask is given a
    leading 1, because torch 2.13's fused CPU kernel raises IndexError for a 1-D mask.
    The window, the sink tokens, kv_seqlen and a per-batch query_offset are folded into the mask
    the same way (the key range's visible keys). `softcap` and `sink_logits` are accepted so that
    the port's keyword arguments can be passed unchanged, but torch has neither: a softcap other
    than 0, or sink logits, raise ValueError.
    """
    # No size limit: the kernel does not hold the [..., Lq, Lk] steps (its fused kernels never
    # make them), and it is torch's to refuse what does not fit.
    inputs = _prepare(
        query, key, value, attn_mask, device, dtype, {**_core_options(locals()), "memory_limit": math.inf}
    )
    if softcap > 0:
        raise ValueError("torch's scaled_dot_product_attention has no softcap; use softcap=0")
    if inputs.options["sink_logits"] is not None:
        raise ValueError("torch's scaled_dot_product_attention has no sink logits; use sink_logits=None")
    query, key, value, mask = inputs.query, inputs.key, inputs.value, inputs.mask
    shapes, options = inputs.shapes, inputs.options
    narrowed = any(
        options[name] not in (None, 0) for name in ("window", "sink_tokens", "kv_seqlen", "query_offset")
    )
    if not (is_causal and mask is None and not narrowed):  # else torch's own is_causal says it all
        keys = _key_range(shapes, options)
        if not sees_every_key(keys, shapes.query_length):
            # Fold the key range into the mask: a cell is allowed only if both allow it.
            seen = _visible_keys(keys, query.device)  # [B..., 1, Lq, Lk]
            if mask is None:
                mask = seen
            else:
                blocked = False if mask.dtype == torch.bool else -math.inf
                mask = torch.where(seen, mask, blocked)  # [..., Lq, Lk]
        is_causal = False
    if mask is not None and mask.dim() < 2:
        mask = mask.reshape(1, *mask.shape)  # [1, Lk]
    gqa = {}
    if shapes.group_size > 1 and _TORCH_HAS_ENABLE_GQA:
        gqa = {"enable_gqa": True}
    elif shapes.group_size != 1:  # torch < 2.5, or Hq == 0 (torch's GQA refuses no query heads)
        key = key.repeat_interleave(shapes.group_size, dim=-3)  # [B..., Hq, Lk, E]
        value = value.repeat_interleave(shapes.group_size, dim=-3)  # [B..., Hq, Lk, Ev]
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, is_causal=is_causal, scale=inputs.scale, **gqa
    )


def sdpa_shares_semantics(
    query,
    key,
    value,
    attn_mask=None,
    *,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    softcap: float = 0.0,
    query_offset: int | list = 0,
    window: tuple[int | None, int | None] | None = None,
    sink_tokens: int = 0,
    sink_logits=None,
    kv_seqlen: int | list | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype | None = None,
) -> bool:
    """Whether `torch_sdpa` should match the port (to rounding) for these inputs.

    The rules, from what torch 2.13's CPU kernels (math and fused flash) were measured to do:
      1. softcap > 0 or sink logits: never; torch's kernel has neither.
      2. A non-finite value in query, key or value, or NaN or +inf in a float attn_mask: no.
         torch lets NaN through where the port masks it: a masked key holding NaN still makes
         every row NaN (the NaN score survives the mask), NaN in value turns a fully-masked row's
         output into NaN where the port gives +0.0, and a fully-masked query row holding NaN
         comes out NaN. With inf scores, torch's math and flash kernels disagree with each other.
      3. Fully-masked rows or Lk == 0: a row with no key to see has no scores to decide from (none
         at all with Lk == 0, where rule 5's bound holds vacuously), so it is decided by the
         contract's rule for such rows: yes where torch's kernel gives +0.0 in every one of them,
         no otherwise. Measured on the CPU with torch 2.13, both kernels give +0.0 as the port
         does, in float64, float32, float16 and bfloat16, but -0.0 with one key (Lk = 1) and a
         negative value (0 * v with no sum to turn it into +0.0; rank-2 inputs, Lq >= 2), and
         NaN with Lk == 0 and a query near float64's largest number (|q| = 1e308); CUDA's flash,
         memory-efficient and cuDNN kernels and older torch were not measured, and NaN is a
         known answer there.
      4. attn_mask with is_causal: yes; torch refuses the pair, torch_sdpa combines them itself.
      5. A score that overflows (|q| · |k| or its scaled value beyond the dtype's largest number):
         no. Outside the contract anyway, and torch gives NaN even where such a cell is masked.
    Bad inputs raise AttentionInputError, as in the port.
    """
    inputs = _prepare(query, key, value, attn_mask, device, dtype, _core_options(locals()))
    if softcap > 0 or inputs.options["sink_logits"] is not None:
        return False
    for tensor in (inputs.query, inputs.key, inputs.value):
        if not bool(torch.isfinite(tensor).all()):
            return False
    mask = inputs.mask
    if mask is not None and mask.dtype != torch.bool and bool((mask.isnan() | (mask == math.inf)).any()):
        return False
    group = inputs.shapes.group_size
    keys = inputs.key.repeat_interleave(group, dim=-3) if group != 1 else inputs.key  # [B..., Hq, Lk, E]
    bound = (inputs.query.abs() @ keys.abs().transpose(-1, -2)) * max(1.0, abs(inputs.scale))
    if not bool(torch.isfinite(bound).all()):  # [B..., Hq, Lq, Lk]  a score may overflow
        return False
    # The port's steps, and the kernel's answer where a row sees no key, on the checked inputs with
    # every checked option (softcap is 0 here; the kernel takes no memory_limit).
    options = {**inputs.options, "scale": inputs.scale}
    steps = attention_steps(inputs.query, inputs.key, inputs.value, mask, **options)
    empty_rows = (steps.logits == -math.inf).all(dim=-1)  # [B..., Hq, Lq]  no key seen (or Lk == 0)
    if bool(empty_rows.any()):  # rule 3: the contract's +0.0, asked of the kernel's answer there
        del options["memory_limit"]
        kernel = torch_sdpa(inputs.query, inputs.key, inputs.value, mask, **options)
        rows = kernel[empty_rows]  # [rows, Ev]
        return bool(((rows == 0) & ~torch.signbit(rows)).all())
    return True
