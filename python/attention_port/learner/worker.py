"""Run a learner's Python attention file on the cases check sends, one case at a time.

The Python twin of typescript/learner/worker.ts, speaking the protocol of protocol.py, started by
runner.py as `python -m attention_port.learner.worker --module PATH --answers-fd N` in an empty
working folder of its own, within runner.py's limits. The learner's code runs in this process, never
in the harness; what it prints goes to this process's stdout and stderr, which check shows, since
the answers travel on the answer descriptor alone.

The file defines `scaled_dot_product_attention(query, key, value, ...)` and may define
`attention_steps` (called instead when present: it returns an object or a dict with scores, logits,
weights and output). Tensors are given as nested lists, except a tensor with a zero-size dimension,
which is given as a numpy array: nested lists cannot say [2, 0, 8] (it would be written [[], []]).
"""

from __future__ import annotations

import argparse
import copy
import dis
import importlib
import importlib.util
import inspect
import json
import os
import sys
import sysconfig
from pathlib import Path

import numpy as np

from attention_port.golden.reader import encode_numbers
from attention_port.inputs import (
    AttentionInputError,
    describe_value,
    format_shape,
    infer_shape,
    is_number,
    leaves,
)
from attention_port.learner.protocol import (
    HELLO_FIELDS,
    LAYER_STEPS,
    OPTION_NAMES,
    STEP_NAMES,
    answer_line,
    read_input,
    threw_answer,
)

POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
MAX_RANK = 64  # deeper nesting than any tensor has: an array that holds itself, say
WORKER = Path(__file__).resolve()
# Where Python's own modules and installed packages live: a `raise` there is a library's, not the learner's.
LIBRARY_FOLDERS = tuple(
    {
        str(Path(p))
        for p in (sysconfig.get_path(n) for n in ("stdlib", "platstdlib", "purelib", "platlib"))
        if p
    }
)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def load_module(path: Path):
    """Import the learner's file. A file inside a package (a folder with __init__.py) is imported
    as part of it, so its relative imports work; any other file sees the files beside it."""
    path = path.resolve()
    package_root = path.parent
    while (package_root / "__init__.py").is_file():
        package_root = package_root.parent
    if package_root != path.parent:
        sys.path.insert(0, str(package_root))
        dotted = ".".join(path.relative_to(package_root).with_suffix("").parts)
        return importlib.import_module(dotted)
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("learner_attention", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def describe_load_error(path: Path, error: BaseException) -> str:
    if isinstance(error, SyntaxError) and Path(error.filename or "").resolve() == path.resolve():
        return f"syntax error in {path} (line {error.lineno}): {error.msg}"
    return f"{path} threw while loading: {type(error).__name__}: {_one_line(error)}"


class Learner:
    """The learner's function and what its signature says it accepts."""

    def __init__(self, module, path: Path):
        steps = callable(getattr(module, "attention_steps", None))
        name = "attention_steps" if steps else "scaled_dot_product_attention"
        function = getattr(module, name, None)
        # The layer and RoPE, each checked on levels of its own when the file has it.
        self.layer = getattr(module, "multi_head_attention", None)
        self.rotary = getattr(module, "apply_rotary", None)
        self.layer, self.rotary = (f if callable(f) else None for f in (self.layer, self.rotary))
        if not callable(function) and self.layer is None and self.rotary is None:
            defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
            has = f"it defines {', '.join(defined)}" if defined else "it defines no function"
            raise LookupError(f"{path} defines no function named scaled_dot_product_attention ({has})")
        self.function, self.name = (function, name) if callable(function) else (None, None)
        self.layer_past = self.layer is not None and _takes_past(self.layer)
        self.layer_option_names = None if self.layer is None else _named_parameters(self.layer)
        if self.function is None:
            self.option_names, self.mask_positional, self.takes_options = set(), False, False
            return
        try:
            parameters = list(inspect.signature(function).parameters.values())
        except (TypeError, ValueError):  # a builtin without a signature: assume the whole API
            parameters = None
        if parameters is None:
            self.option_names, self.mask_positional = set(OPTION_NAMES), True
        else:
            # A 4th positional parameter (or *args) is given the mask; else attn_mask goes by name.
            positional = [p for p in parameters if p.kind in POSITIONAL]
            self.mask_positional = len(positional) >= 4 or any(p.kind == p.VAR_POSITIONAL for p in parameters)
            named = {p.name for p in parameters if p.kind != p.POSITIONAL_ONLY} & set(OPTION_NAMES)
            if any(p.kind == p.VAR_KEYWORD for p in parameters):
                named = set(OPTION_NAMES)  # **kwargs takes every option by name
            self.option_names = named | ({"attn_mask"} if self.mask_positional else set())
        self.takes_options = bool(self.option_names)

    def hello(self) -> dict:
        values = {
            "function": self.name,
            "takesOptions": self.takes_options,
            "optionNames": sorted(self.option_names),
            "layer": None if self.layer is None else "multi_head_attention",
            "rotary": None if self.rotary is None else "apply_rotary",
            "layerPast": self.layer_past,
            "layerOptionNames": None if self.layer_option_names is None else sorted(self.layer_option_names),
        }
        return {field: values[field] for field in HELLO_FIELDS}

    def call_layer(self, request: dict):
        """A layer or RoPE case (protocol step 4): x_q and x_kv (or x and positions) by position,
        the weights, biases, mask and options by their names, as the contract fixes them."""
        valid = request["valid"]

        def given(entry):
            if entry is None:
                return None
            x = read_input(entry, valid)
            return x if not valid or 0 in x.shape else x.tolist()

        inputs = {name: given(entry) for name, entry in request["inputs"].items()}
        options = {name: read_input(value, valid=False) for name, value in request["options"].items()}
        if request["kind"] == "rope":
            return self.rotary(inputs["x"], inputs["positions"], **options)
        named = {name: x for name, x in inputs.items() if name not in ("x_q", "x_kv") and x is not None}
        return self.layer(inputs["x_q"], inputs["x_kv"], **named, **options)

    def call(self, request: dict):
        if "kind" in request:
            return self.call_layer(request)
        valid = request["valid"]

        def given(entry):
            x = read_input(entry, valid)
            if not valid:
                return x  # an invalid case's inputs, as written
            if 0 in x.shape:
                return x  # nested lists would lose the dims after the zero: [2, 0, 8] is [[], []]
            return x.tolist()

        inputs = request["inputs"]
        args = [given(inputs["query"]), given(inputs["key"]), given(inputs["value"])]
        if request.get("same_query_key"):
            args[1] = args[0]  # one array as both, as scaled_dot_product_attention(Q, Q, V) gives it
        self.given = dict(zip(("query", "key", "value"), args, strict=True))
        kwargs = {}
        for name, value in request["options"].items():
            if name == "attn_mask" and self.mask_positional:
                args.append(given(value))
                self.given[name] = args[-1]
            elif name == "attn_mask":
                kwargs[name] = self.given[name] = given(value)
            else:
                kwargs[name] = read_input(value, valid=False)
        self.before = {name: _snapshot(x) for name, x in self.given.items()} if valid else {}
        return self.function(*args, **kwargs)

    def changed(self) -> list[str]:
        """The arguments the last call changed in place: each compared with its copy from before."""
        return [name for name, before in self.before.items() if not _same(before, self.given[name])]


def _named_parameters(function) -> frozenset[str] | None:
    """The names a function takes by keyword; None when it takes any (**kwargs, or a builtin
    without a signature: assume the whole API)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        return None
    return frozenset(p.name for p in parameters if p.kind != p.POSITIONAL_ONLY)


def _takes_past(layer) -> bool:
    """Whether the layer takes a KV cache: past_key and past_value among its parameters (or
    **kwargs, which takes every name)."""
    named = _named_parameters(layer)
    return named is None or {"past_key", "past_value"} <= named


def _snapshot(x):
    return x.copy() if isinstance(x, np.ndarray) else copy.deepcopy(x)


def _same(before, after) -> bool:
    """Whether an argument is as it was: the same shape and values (NaN equal to NaN, -0.0 to -0.0)."""
    try:
        if isinstance(before, np.ndarray):
            return (
                isinstance(after, np.ndarray)
                and before.shape == after.shape
                and bool(np.array_equal(before, after, equal_nan=before.dtype.kind == "f"))
            )
        return repr(before) == repr(after)
    except Exception:  # an argument replaced by something whose repr raises: it changed
        return False


def _depth(value) -> int:
    """How deep nested lists go along their first items, up to MAX_RANK + 1 (a list that holds
    itself never ends)."""
    depth = 0
    while isinstance(value, (list, tuple)) and depth <= MAX_RANK:
        depth += 1
        value = value[0] if len(value) > 0 else None
    return depth


def returned_tensor(name: str, value) -> dict | str:
    """{"shape", "data"} for nested numbers (or an array), else a one-line reason."""
    try:
        if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":  # its shape, zero-size dims too
            flat = value.astype(np.float64).reshape(-1).tolist()
            return {"shape": list(value.shape), "data": encode_numbers(flat)}
        if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # a torch array, say
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            return f"{name} is {_what(value)}, expected nested lists of numbers"
        if _depth(value) > MAX_RANK:
            return f"{name} is nested more than {MAX_RANK} deep (a list that holds itself?)"
        try:
            shape = infer_shape(name, value)
        except AttentionInputError as error:
            return _one_line(error)
        for path, leaf in leaves(value, len(shape)):
            if not is_number(leaf):
                return f"{name}{path} is {_what(leaf)}, expected a number"
        flat = np.array(value, dtype=np.float64).reshape(-1).tolist()
    except Exception as error:  # a __len__, __getitem__ or tolist of the learner's own that raised
        return f"reading the {name} your function returned raised {_thrown(error)}"
    return {"shape": list(shape), "data": encode_numbers(flat)}


def _thrown(error: BaseException) -> str:
    """An exception in one line, even one whose str() raises."""
    try:
        return f"{type(error).__name__}: {_one_line(error)}"
    except Exception:
        return type(error).__name__


def _output_and_weights(learner: Learner, request: dict, returned) -> str | None:
    """Many tutorials' attention returns (output, weights); the pair itself would read as a ragged or
    wrongly shaped output, so it is named: two items, the first of the output's shape, the whole not."""
    want = request["output_shape"]
    if want is None or not isinstance(returned, (tuple, list)) or len(returned) != 2:
        return None
    first, whole = returned_tensor("output", returned[0]), returned_tensor("output", returned)
    if (
        not isinstance(first, dict)
        or first["shape"] != want
        or (isinstance(whole, dict) and whole["shape"] == want)
    ):
        return None
    return (
        f"{learner.name} returned a pair whose first item has the output's shape {format_shape(want)}:"
        " return the output alone, not (output, weights)"
    )


def _what(x) -> str:
    return "None" if x is None else describe_value(x)


def raised_on_purpose(error: BaseException, kind: object = None) -> tuple[bool, str | None]:
    """Whether an error was raised on purpose, and the line of the learner's code it came from.

    On purpose: a `raise` or `assert` statement raised it, in code that is not the standard library's
    or an installed package's (the learner's own, or the project's port it imports), or it carries a
    `kind` (read by the caller, since reading it runs the learner's code), as the project's errors do.
    Anything else is a crash in the learner's math (an index out of range, None where a list was
    meant, numpy refusing operands that do not fit)."""
    tb, innermost, where = error.__traceback__, None, None
    while tb is not None:
        file = Path(tb.tb_frame.f_code.co_filename).resolve()
        if file != WORKER and not str(file).startswith(LIBRARY_FOLDERS):
            where = f"line {tb.tb_lineno} of {file.name}"  # the innermost frame of the learner's code
        innermost, tb = tb, tb.tb_next
    if isinstance(kind, str):
        return True, where
    if innermost is None:
        return False, where
    code = innermost.tb_frame.f_code
    raising = any(
        i.offset == innermost.tb_lasti and i.opname == "RAISE_VARARGS" for i in dis.get_instructions(code)
    )
    file = Path(code.co_filename).resolve()
    return raising and file != WORKER and not str(file).startswith(LIBRARY_FOLDERS), where


def answer(learner: Learner, request: dict) -> dict:
    """One case's answer, with the arguments the call changed in place, if any."""
    learner.before = {}
    message = _answer(learner, request)
    changed = learner.changed()
    return {**message, "changed": changed} if changed and "bad" not in message else message


def _answer(learner: Learner, request: dict) -> dict:
    case_id = request["id"]
    try:
        returned = learner.call(request)
    except Exception as error:
        try:
            kind = getattr(error, "kind", None)
        except Exception:
            kind = None
        deliberate, where = raised_on_purpose(error, kind)
        return threw_answer(
            case_id,
            name=type(error).__name__,
            message=_thrown(error).split(": ", 1)[-1],
            kind=kind if isinstance(kind, str) else None,  # an AttentionInputError's, or a learner's own
            deliberate=deliberate,
            where=where,
        )
    try:
        if "kind" in request:
            steps = _layer_steps(request, returned)
            if isinstance(steps, str):
                return {"id": case_id, "bad": steps}
        elif learner.name == "attention_steps":
            if isinstance(returned, dict):
                steps = {k: returned[k] for k in STEP_NAMES if k in returned}
            else:
                steps = {k: getattr(returned, k) for k in STEP_NAMES if hasattr(returned, k)}
            if "output" not in steps:
                return {"id": case_id, "bad": f"attention_steps returned {_what(returned)} without an output"}
        else:
            if pair := _output_and_weights(learner, request, returned):
                return {"id": case_id, "bad": pair}
            steps = {"output": returned}
    except Exception as error:  # a property or __eq__ of the learner's own that raised
        return {"id": case_id, "bad": f"reading what {learner.name} returned raised {_thrown(error)}"}
    written = {}
    for name, value in steps.items():
        tensor = returned_tensor(name, value)
        if isinstance(tensor, str):
            return {"id": case_id, "bad": tensor}
        written[name] = tensor
    return {"id": case_id, "steps": written}


def _layer_steps(request: dict, returned) -> dict | str:
    """What a layer or RoPE function returned, as steps: the output, and with need_weights the
    weights too (an object with output and weights, a dict of them, or the pair), and with
    return_cache present_key and present_value (an object or a dict with them)."""
    function = "apply_rotary" if request["kind"] == "rope" else "multi_head_attention"
    options = request["options"]
    wanted = [
        name
        for name, asked in zip(
            LAYER_STEPS,
            (True, options.get("need_weights"), options.get("return_cache"), options.get("return_cache")),
            strict=True,
        )
        if asked
    ]
    if wanted == ["output"]:
        return {"output": returned}
    if isinstance(returned, dict):
        found = {k: returned[k] for k in wanted if k in returned}
    elif isinstance(returned, tuple) and wanted == ["output", "weights"] and len(returned) == 2:
        found = dict(zip(wanted, returned, strict=True))
    else:
        found = {k: getattr(returned, k) for k in wanted if hasattr(returned, k)}
    if len(found) < len(wanted):
        asked = " and ".join(f"{name}=True" for name in ("need_weights", "return_cache") if options.get(name))
        expected = f"{', '.join(wanted[:-1])} and {wanted[-1]}"
        return f"{function} with {asked} returned {_what(returned)}, expected {expected}"
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention_port.learner.worker")
    parser.add_argument("--module", required=True)
    parser.add_argument("--answers-fd", type=int, required=True)
    args = parser.parse_args(argv)
    answers_fd = args.answers_fd

    def send(message: dict) -> None:
        os.write(answers_fd, answer_line(message))

    path = Path(args.module)
    try:
        module = load_module(path)
        learner = Learner(module, path)
    except LookupError as error:
        send({"fatal": str(error)})
        return 0
    except BaseException as error:  # a syntax error, or anything its top level raised
        send({"fatal": describe_load_error(path, error)})
        return 0
    send({"hello": learner.hello()})
    for line in sys.stdin:
        if line.strip():
            send(answer(learner, json.loads(line)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
