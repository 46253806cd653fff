"""The checks of the multi-head attention layer and of rotary position embeddings, shared by the
numpy and torch layers (the attention core checks its own inputs: inputs.py).

Every fault raises AttentionInputError with a kind of ERROR_KINDS and a message naming the
argument and the shapes; typescript/src/layer-inputs.ts raises the same kinds with the same
messages (argument names in camelCase there: numHeads, wQ, xKv, rotaryDim).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from attention_port.contract import LAYER_OPTIONS, ROPE_OPTIONS
from attention_port.inputs import (
    AttentionInputError,
    check_option,
    describe_value,
    format_number,
    format_shape,
    option_error,
)


@dataclass(frozen=True)
class LayerShapes:
    """The sizes the layer's weights fix: heads, per-head features, and the output's width."""

    num_heads: int  # Hq
    num_kv_heads: int  # Hkv
    features: int  # E, per head, of queries and keys
    value_features: int  # Ev, per head, of values
    out_features: int  # Dout


def _is_int(x: object) -> bool:
    """A Python or numpy integer (np.int64(2) as 2), never a boolean."""
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def check_heads(num_heads: object, num_kv_heads: object) -> tuple[int, int]:
    """num_heads a positive integer; num_kv_heads (default num_heads) one that divides it. (An
    integer, Python's or numpy's: 2.0 is refused here, where query_offset takes it.) Returned as
    Python ints."""
    if not (_is_int(num_heads) and num_heads > 0):  # type: ignore[operator]
        raise option_error(LAYER_OPTIONS["num_heads"], num_heads)
    heads = int(num_heads)  # type: ignore[call-overload]
    if num_kv_heads is None:
        return heads, heads
    if not (_is_int(num_kv_heads) and num_kv_heads > 0):  # type: ignore[operator]
        raise option_error(LAYER_OPTIONS["num_kv_heads"], num_kv_heads)
    kv_heads = int(num_kv_heads)  # type: ignore[call-overload]
    if heads % kv_heads:
        raise AttentionInputError(
            "heads", f"num_heads ({heads}) must be a multiple of num_kv_heads ({kv_heads})"
        )
    return heads, kv_heads


def check_layer_shapes(
    x_q: tuple[int, ...],
    x_kv: tuple[int, ...],
    weights: dict[str, tuple[int, ...]],
    biases: dict[str, tuple[int, ...] | None],
    num_heads: int,
    num_kv_heads: int,
) -> LayerShapes:
    """x_q [B..., Lq, D], x_kv [B..., Lk, Dkv], w_q [Hq·E, D], w_k [Hkv·E, Dkv], w_v [Hkv·Ev, Dkv],
    w_o [Dout, Hq·Ev], each bias the length of its weight's rows."""
    for name, shape in (("x_q", x_q), ("x_kv", x_kv)):
        if len(shape) < 2:
            raise AttentionInputError(
                "rank", f"{name} must have at least 2 dimensions ([L, D]), got shape {format_shape(shape)}"
            )
    if x_kv[:-2] != x_q[:-2]:
        raise AttentionInputError(
            "shape",
            f"x_kv has batch dims {format_shape(x_kv[:-2])} but x_q has {format_shape(x_q[:-2])}"
            f" (x_q {format_shape(x_q)}, x_kv {format_shape(x_kv)})",
        )
    for name, shape in weights.items():
        if len(shape) != 2:
            raise AttentionInputError(
                "rank",
                f"{name} must be a matrix [out, in] as nn.Linear stores it, got shape {format_shape(shape)}",
            )
    w_q, w_k, w_v, w_o = weights["w_q"], weights["w_k"], weights["w_v"], weights["w_o"]
    for name, columns, source, x in (
        ("w_q", w_q[1], "x_q", x_q),
        ("w_k", w_k[1], "x_kv", x_kv),
        ("w_v", w_v[1], "x_kv", x_kv),
    ):
        if columns != x[-1]:
            raise AttentionInputError(
                "shape",
                f"{name} has {columns} columns but {source} has feature size {x[-1]}"
                f" ({source} {format_shape(x)}, {name} {format_shape(weights[name])})",
            )
    for name, rows, heads, heads_name in (
        ("w_q", w_q[0], num_heads, "num_heads"),
        ("w_k", w_k[0], num_kv_heads, "num_kv_heads"),
        ("w_v", w_v[0], num_kv_heads, "num_kv_heads"),
    ):
        if rows % heads:
            raise AttentionInputError(
                "heads",
                f"{name} has {rows} rows, not a multiple of {heads_name} ({heads})"
                f" ({name} {format_shape(weights[name])})",
            )
    features, value_features = w_q[0] // num_heads, w_v[0] // num_kv_heads
    if w_k[0] != num_kv_heads * features:
        raise AttentionInputError(
            "heads",
            f"w_k has {w_k[0]} rows but num_kv_heads ({num_kv_heads}) times the query heads' feature size"
            f" ({features}) is {num_kv_heads * features} (w_q {format_shape(w_q)}, w_k {format_shape(w_k)})",
        )
    if w_o[1] != num_heads * value_features:
        raise AttentionInputError(
            "shape",
            f"w_o has {w_o[1]} columns but num_heads ({num_heads}) times the value heads' feature size"
            f" ({value_features}) is {num_heads * value_features}"
            f" (w_v {format_shape(w_v)}, w_o {format_shape(w_o)})",
        )
    for name, shape in biases.items():
        rows = weights["w" + name[1:]][0]
        if shape is not None and tuple(shape) != (rows,):
            raise AttentionInputError(
                "shape",
                f"{name} must have shape [{rows}] (the rows of w{name[1:]}), got {format_shape(shape)}",
            )
    return LayerShapes(num_heads, num_kv_heads, features, value_features, w_o[0])


@dataclass(frozen=True)
class RopeOptions:
    theta: float
    rotary_dim: int  # the features that rotate, from the first
    interleaved: bool


def _listed(names: list[str]) -> str:
    """ "theta, rotary_dim and interleaved"."""
    return ", ".join(names[:-1]) + " and " + names[-1]


def check_rope(rope: object, features: int) -> RopeOptions:
    """rope = {"theta", "rotary_dim", "interleaved"} (each optional: RoPE's options of
    contract/options.json), checked against E."""
    if not isinstance(rope, dict):
        raise option_error(LAYER_OPTIONS["rope"], rope, options=_listed(list(ROPE_OPTIONS)))
    unknown = sorted(set(rope) - set(ROPE_OPTIONS))
    if unknown:
        raise AttentionInputError("value", f"rope has an unknown option {unknown[0]!r}")
    given = {name: rope.get(name, option.default) for name, option in ROPE_OPTIONS.items()}
    return check_rotary_options(**given, features=features)


def check_rotary_options(
    theta: object, rotary_dim: object, interleaved: object, features: int
) -> RopeOptions:
    """RoPE's options against their declarations: theta, interleaved, then rotary_dim, whose range
    is the heads' feature size E (an even integer, Python's or numpy's, from 2 to E; None: E)."""
    check_option(ROPE_OPTIONS["theta"], theta)
    check_option(ROPE_OPTIONS["interleaved"], interleaved)
    dim = features if rotary_dim is None else rotary_dim
    if not (_is_int(dim) and 0 < dim <= features and dim % 2 == 0):  # type: ignore[operator]
        raise option_error(ROPE_OPTIONS["rotary_dim"], dim, features=features)
    return RopeOptions(float(theta), int(dim), bool(interleaved))  # type: ignore[arg-type, call-overload]


def check_positions(x: tuple[int, ...], positions: tuple[int, ...], values: list[float]) -> None:
    """positions [L] or [B..., L] (x [B..., H, L, E]): whole numbers >= 0."""
    length = x[-2]
    if (
        len(positions) == 0
        or positions[-1] != length
        or (len(positions) > 1 and tuple(positions[:-1]) != tuple(x[:-3]))
    ):
        raise AttentionInputError(
            "shape",
            f"positions must have shape [L] or [B..., L] with L = {length} (x {format_shape(x)},"
            f" positions {format_shape(positions)})",
        )
    for p in values:
        if not (math.isfinite(p) and p >= 0 and float(p).is_integer()):
            raise AttentionInputError(
                "value", f"positions must be whole numbers >= 0, got {describe_value(p)}"
            )


def check_memory_limit(memory_limit: object) -> None:
    """memory_limit as the core declares it (a number of bytes > 0), checked before any tensor is
    read: the layer reads its inputs and computes within it."""
    check_option(LAYER_OPTIONS["memory_limit"], memory_limit)


def check_need_weights(need_weights: object) -> None:
    """need_weights is True or False: whether the layer also returns each head's weights."""
    check_option(LAYER_OPTIONS["need_weights"], need_weights)


def check_return_cache(return_cache: object) -> None:
    """return_cache is True or False: whether the layer also returns the grown cache."""
    check_option(LAYER_OPTIONS["return_cache"], return_cache)


def check_layer_size(
    x_q: tuple[int, ...], x_kv: tuple[int, ...], shapes: LayerShapes, cached: int, memory_limit: float
) -> None:
    """Refuse, before the projections, a call whose own tensors need more than memory_limit bytes:
    the queries, the keys and values with the cache, the merged heads and the output, one float64
    copy of each (the core holds its steps to the same limit). Counted in float64 arithmetic, in
    the same order as the TypeScript twin, so the messages match."""
    batch, length, key_length = x_q[:-2], x_q[-2], cached + x_kv[-2]  # B..., Lq, P+Lk
    tensors = (
        (*batch, shapes.num_heads, length, shapes.features),  # queries
        (*batch, shapes.num_kv_heads, key_length, shapes.features),  # keys
        (*batch, shapes.num_kv_heads, key_length, shapes.value_features),  # values
        (*batch, length, shapes.num_heads * shapes.value_features),  # merged heads
        (*batch, length, shapes.out_features),  # output
    )
    needed = 8 * sum(math.prod(shape, start=1.0) for shape in tensors)
    if needed > memory_limit:
        q, k, v, merged, output = (format_shape(shape) for shape in tensors)
        raise AttentionInputError(
            "size",
            f"the layer needs {format_number(needed)} bytes as float64 for queries {q}, keys {k},"
            f" values {v}, merged heads {merged} and output {output}, more than memory_limit ="
            f" {format_number(memory_limit)}; pass a larger memory_limit to compute them",
        )


def check_past(
    past_key: tuple[int, ...] | None,
    past_value: tuple[int, ...] | None,
    x_q: tuple[int, ...],
    shapes: LayerShapes,
) -> int:
    """past_key [B..., Hkv, P, E] and past_value [B..., Hkv, P, Ev], both or neither: the cache of
    earlier keys (after RoPE) and values, with the key/value heads (never expanded to Hq). Returns
    P, the number of cached positions (0 without a cache)."""
    if past_key is None and past_value is None:
        return 0
    for name, shape in (("past_key", past_key), ("past_value", past_value)):
        if shape is None:
            raise AttentionInputError(
                "value", f"{name} is missing: past_key and past_value come together, give both or neither"
            )
    assert past_key is not None and past_value is not None
    for name, shape, width, letter in (
        ("past_key", past_key, shapes.features, "E"),
        ("past_value", past_value, shapes.value_features, "Ev"),
    ):
        if len(shape) < 3:
            raise AttentionInputError(
                "rank",
                f"{name} must have at least 3 dimensions ([Hkv, P, {letter}]),"
                f" got shape {format_shape(shape)}",
            )
        if shape[:-3] != x_q[:-2]:
            raise AttentionInputError(
                "shape",
                f"{name} has batch dims {format_shape(shape[:-3])} but x_q has {format_shape(x_q[:-2])}"
                f" (x_q {format_shape(x_q)}, {name} {format_shape(shape)})",
            )
        if shape[-3] != shapes.num_kv_heads:
            raise AttentionInputError(
                "heads",
                f"{name} has {shape[-3]} heads but the layer has num_kv_heads = {shapes.num_kv_heads}"
                f" ({name} {format_shape(shape)}): the cache keeps the key/value heads, never expanded",
            )
        if shape[-1] != width:
            raise AttentionInputError(
                "shape",
                f"{name} has feature size {shape[-1]} but the layer's heads have {letter} = {width}"
                f" ({name} {format_shape(shape)})",
            )
    if past_key[-2] != past_value[-2]:
        raise AttentionInputError(
            "shape",
            f"past_key holds {past_key[-2]} positions but past_value holds {past_value[-2]}"
            f" (past_key {format_shape(past_key)}, past_value {format_shape(past_value)})",
        )
    return past_key[-2]
