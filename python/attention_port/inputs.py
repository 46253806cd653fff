"""Input checking shared by the Python ports: one error type, one order of checks, one wording.

Both Python ports (numpy and torch) call these functions, and the TypeScript twin
(`typescript/src/inputs.ts`) repeats them line for line, so that a bad input raises the same
`kind` with the same message in every language. The invalid-input fixtures hold the expected
kind and message; both test suites check them.

Checks run in this order, and the first failure is raised:
  1. options: each scalar option of the core as contract/options.json declares it, in its
     order of checks (checkOrder)                                       kind: value
  2. query, key, value: each a rectangular array of numbers, copied once: its shape from the first
     elements (at most 64 dimensions), the memory its float64 copy needs (within memory_limit,
     decided from the lengths alone), then every element             kinds: rank, size, ragged, type
  3. attn_mask, if given: a rectangular array of booleans or numbers, read the same way
                                                                  kinds: rank, size, ragged, type
  4. shapes: ranks, batch dims, heads, feature sizes, key/value length  kinds: rank, shape, heads
  5. attn_mask shape: broadcasts to the scores [..., Hq, Lq, Lk]        kind: mask
  6. the options the shapes size: sink_logits [Hq], kv_seqlen and a per-batch query_offset [B...]
     (or one integer), kv_seqlen's integers at most Lk                 kinds: shape, value
  7. size: the memory the computation needs, within memory_limit       kind: size

A few inputs exist in one language only and are checked where they arise: Python numbers too
large for a float64 (10**400), numpy object arrays and torch tensors (read exactly, on the CPU, in
float64); TypeScript's options object itself (`null`) and its shaped form `{shape, data}`.

These checks catch a caller's mistakes, not attacks (docs/design.md, "Whom the checks serve"): a
list subclass whose own methods raise or change what they return is the caller's business.

Messages name the argument with its Python spelling (`attn_mask`, `enable_gqa`); the TypeScript
port uses the same words with its own spelling (`attnMask`, `enableGqa`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from attention_port.contract import CORE_CHECK_ORDER, CORE_OPTIONS, Option

# Every `kind` an AttentionInputError can carry, shared with the TypeScript port.
ERROR_KINDS = ("ragged", "type", "rank", "shape", "heads", "mask", "value", "size")

# The most memory, in bytes, a port may need for one call before it refuses the input (kind
# "size") instead of allocating it; a caller raises it with `memory_limit`. 2 GiB: the readable
# ports hold three float64 tensors of the scores' shape, so about 9,400 x 9,400 scores per call.
DEFAULT_MEMORY_LIMIT: float = CORE_OPTIONS["memory_limit"].default  # type: ignore[assignment]


class AttentionInputError(ValueError):
    """Bad input to an attention port. `kind` is one of ERROR_KINDS; the message names the
    argument and the shapes involved."""

    def __init__(self, kind: str, message: str):
        if kind not in ERROR_KINDS:
            raise AssertionError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind


def format_shape(shape: Sequence[int]) -> str:
    """`[2, 4, 8]`: the way both languages write a shape in a message."""
    return "[" + ", ".join(str(int(n)) for n in shape) + "]"


def format_number(x: float) -> str:
    """A number as JavaScript's String(x) writes it, so messages read the same in both ports."""
    x = float(x)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    # Shortest round-trip digits (both languages agree on them), laid out by JavaScript's rules:
    # plain decimals for 1e-7 < |x| < 1e21, exponent form otherwise.
    digit_tuple = Decimal(repr(abs(x))).normalize().as_tuple()
    significant = "".join(str(d) for d in digit_tuple.digits)
    point = len(significant) + int(digit_tuple.exponent) - 1  # exponent of the first digit
    sign = "-" if x < 0 else ""
    if -7 < point < 21:
        if point >= 0:
            whole = significant[: point + 1].ljust(point + 1, "0")
            fraction = significant[point + 1 :]
            return sign + whole + ("." + fraction if fraction else "")
        return sign + "0." + "0" * (-point - 1) + significant
    fraction = "." + significant[1:] if len(significant) > 1 else ""
    return f"{sign}{significant[0]}{fraction}e{'+' if point > 0 else '-'}{abs(point)}"


def _fits_float64(x: object) -> bool:
    """A real number float64 can hold (a Python int or Fraction may be too large: 10**400, and
    np.longdouble('1e400') casts to inf without a word)."""
    try:
        with np.errstate(over="ignore"):
            as_float = float(x)  # type: ignore[arg-type]
    except OverflowError:
        return False
    return not math.isinf(as_float) or x == as_float


def describe_value(x: object) -> str:
    """What a non-number is, in words both languages share."""
    if isinstance(x, numbers.Real) and not _fits_float64(x):
        return "a number beyond the float64 range"  # Python only: JavaScript has no such number
    if x is None:
        return "null"
    if isinstance(x, (bool, np.bool_)):
        return "a boolean"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, dict):
        return "an object"
    if isinstance(x, (list, tuple)):
        return "an array"
    if isinstance(x, numbers.Real):
        return format_number(x)
    return f"a {type(x).__name__}"


def is_number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)) and _fits_float64(x)


def _is_boolean(x: object) -> bool:
    return isinstance(x, (bool, np.bool_))


def _is_array(x: object) -> bool:
    return isinstance(x, (list, tuple))


# The most dimensions a tensor may have: numpy's limit, kept in both languages so that a deeper
# input is refused in the same words everywhere (and a cycle, a = [a], is refused, not walked).
MAX_RANK = 64


def _too_many_dimensions(what: str) -> AttentionInputError:
    return AttentionInputError("rank", f"{what}; at most {MAX_RANK} dimensions are supported")


def nested_shape(data: object, name: str = "data") -> list[int]:
    """The shape nested lists (or tuples) give by their first element at each depth, at most
    MAX_RANK deep."""
    shape: list[int] = []
    while _is_array(data):
        if len(shape) == MAX_RANK:
            raise _too_many_dimensions(f"{name} is nested more than {MAX_RANK} arrays deep")
        shape.append(len(data))
        if len(data) == 0:
            break
        data = data[0]
    return shape


def _check_rectangular(name: str, data: object, shape: Sequence[int]) -> None:
    """Every list has the length `shape` says at its depth, checked before its elements are read:
    a ragged array raises kind "ragged" naming the first element (depth first) that disagrees."""

    def ragged(where: str, problem: str) -> AttentionInputError:
        return AttentionInputError(
            "ragged",
            f"{name} is ragged: {where} {problem} (shape from the first elements: {format_shape(shape)})",
        )

    def walk(node: object, depth: int, where: str) -> None:
        if depth == len(shape):
            if _is_array(node):
                raise ragged(where, "is an array, expected a scalar")
            return
        if not _is_array(node):
            raise ragged(where, f"is not an array, expected length {shape[depth]}")
        if len(node) != shape[depth]:
            raise ragged(where, f"has length {len(node)}, expected {shape[depth]}")
        for i, child in enumerate(node):
            walk(child, depth + 1, f"{where}[{i}]")

    walk(data, 0, name)


def infer_shape(name: str, data: object) -> tuple[int, ...]:
    """Shape of nested lists, read from the first element at each depth, then checked everywhere."""
    shape = nested_shape(data, name)
    _check_rectangular(name, data, shape)
    return tuple(shape)


def leaves(data: object, depth: int, path: str = ""):
    """Every scalar of a rectangular nested list with its index path ("[1][0]"), in row-major order."""
    if depth == 0:
        yield path, data
        return
    for i, child in enumerate(data):  # type: ignore[arg-type]
        yield from leaves(child, depth - 1, f"{path}[{i}]")


def _check_read_size(name: str, shape: Sequence[int], memory_limit: float) -> None:
    """A tensor's values are copied into a float64 array of its shape: refused (kind "size") when
    that copy would need more than memory_limit, decided from the lengths alone, before any value
    is read or widened. (TypeScript's sparse arrays claim lengths they hold no values for.)"""
    needed = 8 * math.prod(shape, start=1.0)
    if needed > memory_limit:
        raise AttentionInputError(
            "size",
            f"{name} of shape {format_shape(shape)} needs {format_number(needed)} bytes as float64,"
            f" more than memory_limit = {format_number(memory_limit)}; pass a larger memory_limit to read it",
        )


def _read_nested(
    name: str, data: object, memory_limit: float, choose: Callable[[object], Callable[[object], bool]]
) -> tuple[tuple[int, ...], list[object], tuple[str, object] | None]:
    """Nested lists: their shape, the memory their copy needs, their rectangularity, then their
    leaves, with the first one `accept` refuses (`choose` picks `accept` from the first leaf)."""
    shape = nested_shape(data, name)
    _check_read_size(name, shape, memory_limit)
    _check_rectangular(name, data, shape)
    first = data
    for length in shape:
        if length == 0:
            break
        first = first[0]  # type: ignore[index]
    accept = choose(first)
    values: list[object] = []
    _extend_leaves(values, data, len(shape))
    refused = next((i for i, leaf in enumerate(values) if not accept(leaf)), None)
    if refused is None:
        return tuple(shape), values, None
    where = name + "".join(f"[{i}]" for i in np.unravel_index(refused, tuple(shape))) if shape else name
    return tuple(shape), values, (where, values[refused])


def _extend_leaves(out: list[object], data: object, depth: int) -> None:
    """The leaves of rectangular nested lists `depth` deep appended to `out`, in row-major order."""
    if depth == 0:
        out.append(data)
    elif depth == 1:
        out.extend(data)  # type: ignore[arg-type]
    else:
        for child in data:  # type: ignore[attr-defined]
            _extend_leaves(out, child, depth - 1)


def check_tensor(name: str, tensor: object) -> None:
    """A torch tensor both Python ports can read: at most MAX_RANK dimensions, and values to read
    (a tensor on the meta device has a shape but no values)."""
    if tensor.dim() > MAX_RANK:  # type: ignore[attr-defined]
        raise _too_many_dimensions(f"{name} has {tensor.dim()} dimensions")  # type: ignore[attr-defined]
    if tensor.device.type == "meta":  # type: ignore[attr-defined]
        raise AttentionInputError(
            "type",
            f"{name} is a Tensor that cannot be read as an array"
            " (it is on the meta device, which holds no values)",
        )


def _plain(name: str, data: object, memory_limit: float) -> object:
    """numpy object arrays as nested lists (their elements are checked one by one); torch tensors
    as float64 numpy arrays on the CPU (exact: every torch float widens to float64 without
    rounding), whatever their device, dtype or requires_grad; anything else as it is. An array is
    held to memory_limit before it is widened."""
    if isinstance(data, np.ndarray) and data.dtype == object:
        return data.tolist()
    try:
        if type(data).__module__.split(".")[0] == "torch" and hasattr(data, "detach"):
            check_tensor(name, data)
            if data.is_floating_point():  # type: ignore[attr-defined]
                _check_read_size(name, tuple(data.shape), memory_limit)  # type: ignore[attr-defined]
            tensor = data.detach().cpu()  # type: ignore[attr-defined]
            if tensor.is_floating_point():
                tensor = tensor.double()  # bfloat16 has no numpy dtype; float64 holds it exactly
            return tensor.numpy()
        if hasattr(data, "__array__") and not _is_array(data) and not isinstance(data, np.ndarray):
            return np.asarray(data)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as error:
        if isinstance(error, AttentionInputError):
            raise
        raise AttentionInputError(
            "type", f"{name} is {describe_value(data)} that cannot be read as an array ({error})"
        ) from None
    return data


def _widened(name: str, data: np.ndarray, memory_limit: float) -> np.ndarray:
    """A real-valued array as float64, held to memory_limit before a copy is made. A float wider
    than float64 (np.longdouble) may hold a number beyond its range, which the cast would silently
    make inf: refused as 10**400 is."""
    if data.dtype != np.float64:
        _check_read_size(name, data.shape, memory_limit)
    with np.errstate(over="ignore"):
        widened = data.astype(np.float64, copy=False)
    if data.dtype.kind == "f" and data.dtype.itemsize > 8:
        beyond = np.isinf(widened) & ~np.isinf(data)
        if beyond.any():
            where = "".join(f"[{i}]" for i in np.argwhere(beyond)[0])
            raise AttentionInputError(
                "type", f"{name}{where} is a number beyond the float64 range, expected a number"
            )
    return widened


def to_array(name: str, data: object, memory_limit: float = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """query, key or value as a float64 array: nested lists or any real-valued array."""
    data = _plain(name, data, memory_limit)
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "iuf":
            raise AttentionInputError("type", f"{name} has dtype {data.dtype}, expected real numbers")
        return _widened(name, data, memory_limit)
    shape, values, refused = _read_nested(name, data, memory_limit, lambda first: is_number)
    if refused is not None:
        where, leaf = refused
        raise AttentionInputError("type", f"{where} is {describe_value(leaf)}, expected a number")
    return np.array(values, dtype=np.float64).reshape(shape)


def to_mask_array(data: object, memory_limit: float = DEFAULT_MEMORY_LIMIT) -> np.ndarray:
    """attn_mask as a bool array (True = may attend) or a float64 array (added to the scores).
    Every leaf must be of the first leaf's kind."""
    name = "attn_mask"
    data = _plain(name, data, memory_limit)
    if isinstance(data, np.ndarray):
        if data.dtype.kind == "b":
            return data
        if data.dtype.kind not in "iuf":
            raise AttentionInputError(
                "type", f"{name} has dtype {data.dtype}, expected booleans or real numbers"
            )
        return _widened(name, data, memory_limit)
    bools = False

    def choose(first: object) -> Callable[[object], bool]:
        nonlocal bools
        bools = _is_boolean(first)
        return _is_boolean if bools else is_number

    shape, values, refused = _read_nested(name, data, memory_limit, choose)
    if refused is not None:
        where, leaf = refused
        kind = "a boolean" if _is_boolean(leaf) else "a number" if is_number(leaf) else None
        if kind is None:
            raise AttentionInputError(
                "type", f"{where} is {describe_value(leaf)}, expected a boolean or a number"
            )
        first = name + "[0]" * len(shape)
        raise AttentionInputError(
            "type",
            f"{name} mixes booleans and numbers: {first} is"
            f" {'a boolean' if bools else 'a number'} but {where} is {kind}",
        )
    return np.array(values, dtype=bool if bools else np.float64).reshape(shape)


def _accepts(option: Option, x: object, type: str | None = None) -> bool:
    """Whether `x` is a value of `option`: its type, then its range (contract/options.json). `type`:
    the type of one of its numbers ("integer" for a side of a window or one of integers)."""
    type = type or option.type
    if option.nullable and x is None:
        return True
    if type == "boolean":
        return _is_boolean(x)
    if type == "object":
        return isinstance(x, dict)
    if type not in ("number", "integer") or not is_number(x):
        return False
    number = float(x)  # type: ignore[arg-type]
    return (
        (not (option.finite or type == "integer") or math.isfinite(number))
        and (type != "integer" or number.is_integer())
        and (option.minimum is None or x >= option.minimum)  # type: ignore[operator]
        and (option.exclusive_minimum is None or x > option.exclusive_minimum)  # type: ignore[operator]
        and (option.maximum is None or x <= option.maximum)  # type: ignore[operator]
    )


def check_options(**given: object) -> dict[str, object]:
    """The core's scalar options, by their Python names, checked before any tensor is touched: each
    against its declaration in contract/options.json, in the contract's order of checks, and the
    first failure is raised. An option left out has its default. Returns the checked values, an
    integer option (query_offset: 2.0 is one, 2.5, NaN and True are not) as a Python int."""
    unknown = sorted(set(given) - {option.python for option in CORE_CHECK_ORDER})
    if unknown:
        raise TypeError(f"check_options() got an unexpected option {unknown[0]!r}")
    return {
        option.python: check_option(option, given.get(option.python, option.default))
        for option in CORE_CHECK_ORDER
    }


def option_error(option: Option, x: object, **words: object) -> AttentionInputError:
    """The error `option` declares for the wrong value `x`: its kind, and its message with {name},
    {value} (what `x` is, in words) and any other of its blanks (`words`) filled in."""
    message = option.error_message.format(name=option.python, value=describe_value(x), **words)  # type: ignore[union-attr]
    return AttentionInputError(option.error_kind, message)  # type: ignore[arg-type]


def check_option(option: Option, x: object) -> object:
    """`x` as a value of `option` (contract/options.json), or the option's error; an integer
    comes back as a Python int, integers as ints or nested lists of them, a window as a tuple
    (left, right), numbers as a tuple of floats."""
    if option.type in _SEVERAL and not (option.nullable and x is None):
        return _SEVERAL[option.type](option, _as_list(x))
    if not _accepts(option, x):
        raise option_error(option, x)
    return int(x) if option.type == "integer" and x is not None else x  # type: ignore[call-overload]


def _as_list(x: object) -> object:
    """A numpy array or a torch tensor as nested lists (a 0-d one as its number), anything else as
    it is: an option of several numbers is read from its lists."""
    if isinstance(x, np.ndarray) or (type(x).__module__.split(".")[0] == "torch" and hasattr(x, "tolist")):
        return x.tolist()  # type: ignore[union-attr]
    return x


def _element(option: Option, error: tuple[str, str], name: str, x: object, type: str) -> object:
    """One number of an option of several: `x` of `type` in the option's range, or `error` naming
    it (`name`: its path, window[0] or kv_seqlen[1][0])."""
    if not _accepts(option, x, type) or x is None:
        kind, message = error
        raise AttentionInputError(kind, message.format(name=name, value=describe_value(x)))
    return int(x) if type == "integer" else float(x)  # type: ignore[arg-type]


def _check_integers(option: Option, x: object) -> object:
    """An integer, or nested arrays of them (one per batch index; their shape is checked against
    key's batch dims with the shapes): rectangular first, then each integer in the option's range."""
    error = (option.error_kind, option.error_message)
    if not _is_array(x):
        return _element(option, error, option.python, x, "integer")  # type: ignore[arg-type]
    infer_shape(option.python, x)

    def walk(node: object, where: str) -> object:
        if _is_array(node):
            return [walk(child, f"{where}[{i}]") for i, child in enumerate(node)]  # type: ignore[arg-type]
        return _element(option, error, where, node, "integer")  # type: ignore[arg-type]

    return walk(x, option.python)


def _check_window(option: Option, x: object) -> tuple[int | None, int | None]:
    """A pair [left, right], each side an integer in the option's range or None (unbounded)."""
    if not (_is_array(x) and len(x) == 2):  # type: ignore[arg-type]
        what = f"an array of length {len(x)}" if _is_array(x) else describe_value(x)  # type: ignore[arg-type]
        raise AttentionInputError(
            option.error_kind, option.error_message.format(name=option.python, value=what)
        )  # type: ignore[arg-type, union-attr]
    return tuple(  # type: ignore[return-value]
        None
        if side is None
        else _element(option, option.element_error, f"{option.python}[{i}]", side, "integer")  # type: ignore[arg-type]
        for i, side in enumerate(x)  # type: ignore[arg-type]
    )


def _check_numbers(option: Option, x: object) -> tuple[float, ...]:
    """An array of numbers (NaN and the infinities among them); its length is checked against the
    query's heads with the shapes."""
    if not _is_array(x):
        raise option_error(option, x)
    return tuple(
        _element(option, option.element_error, f"{option.python}[{i}]", v, "number")  # type: ignore[arg-type, misc]
        for i, v in enumerate(x)  # type: ignore[arg-type]
    )


# The options of several numbers, by type: their checks name the number that is wrong.
_SEVERAL: dict[str, Callable[[Option, object], object]] = {
    "integers": _check_integers,
    "window": _check_window,
    "numbers": _check_numbers,
}


def check_option_shapes(
    options: dict[str, object],
    shapes: AttentionShapes,
    query_shape: Sequence[int],
    key_shape: Sequence[int],
) -> None:
    """The options whose shape the tensors decide, checked once their shapes are (check_options
    has read them): numbers one per query head [Hq], integers an integer or one per batch index
    [B...], and an integer of kv_seqlen at most key's length Lk (a count of valid keys)."""
    for option in CORE_CHECK_ORDER:
        x = options.get(option.python)
        if option.shape_error is None or x is None:
            continue
        given = (len(x),) if option.type == "numbers" else tuple(nested_shape(x))  # type: ignore[arg-type]
        expected = (shapes.query_heads,) if option.type == "numbers" else shapes.batch
        words = {
            "shape": format_shape(given),
            "batch": format_shape(shapes.batch),
            "heads": shapes.query_heads,
            "query": format_shape(query_shape),
            "key": format_shape(key_shape),
            "length": shapes.key_length,
        }
        if given not in (expected, ()):
            kind, message = option.shape_error
            raise AttentionInputError(kind, message.format(name=option.python, **words))
        for where, n in leaves(x, len(given)) if option.limit_error else ():
            if n > shapes.key_length:
                kind, message = option.limit_error
                raise AttentionInputError(kind, message.format(name=option.python + where, value=n, **words))


# The largest query_offset: JavaScript's largest exact integer, so that both languages accept the
# same offsets (and numpy's int64 index arithmetic never overflows with it).
MAX_QUERY_OFFSET = int(CORE_OPTIONS["query_offset"].maximum)  # type: ignore[arg-type]


def check_size(shapes: AttentionShapes, memory_limit: float) -> None:
    """Refuse, before anything is allocated, a call whose steps need more than memory_limit bytes:
    the readable ports hold scores, logits and weights, three float64 tensors of the scores' shape.
    Counted in float64 arithmetic, in the same order as the TypeScript twin, so the messages match."""
    needed = 3 * 8 * math.prod(shapes.scores_shape, start=1.0)
    if needed > memory_limit:
        raise AttentionInputError(
            "size",
            f"the scores {format_shape(shapes.scores_shape)} need {format_number(needed)} bytes for"
            f" scores, logits and weights, more than memory_limit = {format_number(memory_limit)};"
            " pass a larger memory_limit to compute them",
        )


@dataclass(frozen=True)
class AttentionShapes:
    """The sizes every port loops over, named with the dimension letters of docs/design.md (section 2)."""

    batch: tuple[int, ...]  # leading batch dims, equal across query, key and value
    query_heads: int  # Hq (1 for rank-2 inputs)
    key_value_heads: int  # Hkv (1 for rank-2 inputs)
    query_length: int  # Lq
    key_length: int  # Lk
    features: int  # E
    value_features: int  # Ev
    has_heads: bool  # rank >= 3: the dim before [L, E] is the head dim

    @property
    def group_size(self) -> int:
        """Query heads that share one key/value head (1 without GQA)."""
        return self.query_heads // self.key_value_heads if self.key_value_heads else 1

    @property
    def scores_shape(self) -> tuple[int, ...]:
        heads = (self.query_heads,) if self.has_heads else ()
        return (*self.batch, *heads, self.query_length, self.key_length)

    @property
    def output_shape(self) -> tuple[int, ...]:
        heads = (self.query_heads,) if self.has_heads else ()
        return (*self.batch, *heads, self.query_length, self.value_features)


def check_shapes(
    query_shape: Sequence[int],
    key_shape: Sequence[int],
    value_shape: Sequence[int],
    mask_shape: Sequence[int] | None,
    enable_gqa: bool,
) -> AttentionShapes:
    """Rank, batch, head, feature and length checks, then the mask's broadcast."""
    q, k, v = tuple(query_shape), tuple(key_shape), tuple(value_shape)
    qs, ks, vs = format_shape(q), format_shape(k), format_shape(v)
    for name, shape in {"query": q, "key": k, "value": v}.items():
        if len(shape) < 2:
            raise AttentionInputError(
                "rank", f"{name} must have at least 2 dimensions ([L, E]), got shape {format_shape(shape)}"
            )
    if not len(q) == len(k) == len(v):
        raise AttentionInputError(
            "rank", f"query, key and value must have the same rank, got query {qs}, key {ks}, value {vs}"
        )
    has_heads = len(q) >= 3
    batch_rank = max(len(q) - 3, 0)
    for name, shape in {"key": k, "value": v}.items():
        if shape[:batch_rank] != q[:batch_rank]:
            raise AttentionInputError(
                "shape",
                f"{name} has batch dims {format_shape(shape[:batch_rank])} but query has"
                f" {format_shape(q[:batch_rank])} (query {qs}, {name} {format_shape(shape)})",
            )
    query_heads = q[-3] if has_heads else 1
    key_value_heads = k[-3] if has_heads else 1
    if has_heads and v[-3] != k[-3]:
        raise AttentionInputError(
            "heads", f"value has head count {v[-3]} but key has {k[-3]} (key {ks}, value {vs})"
        )
    if not enable_gqa and query_heads != key_value_heads:
        raise AttentionInputError(
            "heads",
            f"query has head count {query_heads} but key and value have {key_value_heads};"
            f" set enable_gqa to share key/value heads across query heads (query {qs}, key {ks})",
        )
    if enable_gqa and (key_value_heads == 0 or query_heads % key_value_heads != 0):
        raise AttentionInputError(
            "heads",
            f"with enable_gqa, query heads ({query_heads}) must be a multiple of key/value heads"
            f" ({key_value_heads}) (query {qs}, key {ks})",
        )
    if k[-1] != q[-1]:
        raise AttentionInputError(
            "shape", f"key has feature size {k[-1]} but query has {q[-1]} (query {qs}, key {ks})"
        )
    if q[-1] == 0:
        raise AttentionInputError(
            "shape", f"query has feature size 0; attention needs at least one feature (query {qs})"
        )
    if v[-2] != k[-2]:
        raise AttentionInputError(
            "shape", f"value has length {v[-2]} but key has {k[-2]} (key {ks}, value {vs})"
        )
    shapes = AttentionShapes(
        batch=q[:batch_rank],
        query_heads=query_heads,
        key_value_heads=key_value_heads,
        query_length=q[-2],
        key_length=k[-2],
        features=q[-1],
        value_features=v[-1],
        has_heads=has_heads,
    )
    if mask_shape is not None:
        check_mask_shape(tuple(mask_shape), shapes.scores_shape)
    return shapes


def check_mask_shape(mask_shape: tuple[int, ...], scores_shape: tuple[int, ...]) -> None:
    """numpy broadcasting, aligned on the right: each mask dim is 1 or the scores' dim."""
    ms, ss = format_shape(mask_shape), format_shape(scores_shape)
    if len(mask_shape) == 0:
        raise AttentionInputError("mask", f"attn_mask must have at least 1 dimension, got shape {ms}")
    if len(mask_shape) > len(scores_shape):
        raise AttentionInputError(
            "mask",
            f"attn_mask has rank {len(mask_shape)} but the scores {ss} have rank {len(scores_shape)}"
            f" (attn_mask {ms})",
        )
    offset = len(scores_shape) - len(mask_shape)
    for i, size in enumerate(mask_shape):
        target = scores_shape[offset + i]
        if size not in (1, target):
            raise AttentionInputError(
                "mask",
                f"attn_mask {ms} does not broadcast to the scores {ss}:"
                f" mask dimension {i} is {size}, expected 1 or {target}",
            )


def resolve_scale(scale: float | None, features: int) -> float:
    """The default 1/sqrt(E) keeps the scores' spread near 1 whatever E is (see reference.py)."""
    return 1.0 / math.sqrt(features) if scale is None else float(scale)
