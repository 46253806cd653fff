"""Run a learner's Python attention file on fixture cases, one case at a time.

The Python twin of typescript/src/check.ts, with the same protocol (described there), started by
learner.py as `python -m attention_port.learner_worker --module PATH --answers-fd N --fixtures DIR`.
The learner's code runs in this process, never in the harness.

The file defines `scaled_dot_product_attention(query, key, value, ...)` and may define
`attention_steps` (called instead when present: it returns an object or a dict with scores, logits,
weights and output). Tensors are given as nested lists, except a tensor with a zero-size dimension,
which is given as a numpy array: nested lists cannot say [2, 0, 8] (it would be written [[], []]).
"""

from __future__ import annotations

import argparse
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

from .fixtures import FixtureCase, encode_numbers, load_fixtures
from .inputs import AttentionInputError, describe_value, format_shape, infer_shape, is_number, leaves

STEP_NAMES = ("scores", "logits", "weights", "output")
OPTION_NAMES = ("attn_mask", "is_causal", "scale", "enable_gqa", "softcap")
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
WORKER = Path(__file__).resolve()
# Where Python's own modules and installed packages live: a `raise` there is a library's, not the learner's.
LIBRARY_FOLDERS = tuple(
    {
        str(Path(p))
        for p in (sysconfig.get_path(n) for n in ("stdlib", "platstdlib", "purelib", "platlib"))
        if p
    }
)


def options_set(case: FixtureCase) -> dict[str, object]:
    """The options a case sets (those not at their default), by their Python names. A learner is
    given only these, so its own defaults apply to the rest (check.ts does the same)."""
    chosen = {"attn_mask": case.inputs["attn_mask"], **case.params}
    softcap = chosen["softcap"]
    at_default = {
        "attn_mask": chosen["attn_mask"] is None,
        "is_causal": chosen["is_causal"] is False,
        "scale": chosen["scale"] is None,
        "enable_gqa": chosen["enable_gqa"] is False,
        "softcap": isinstance(softcap, (int, float)) and not isinstance(softcap, bool) and softcap == 0,
    }
    return {name: value for name, value in chosen.items() if not at_default[name]}


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
        if not callable(function):
            defined = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
            has = f"it defines {', '.join(defined)}" if defined else "it defines no function"
            raise LookupError(f"{path} defines no function named scaled_dot_product_attention ({has})")
        self.function, self.name = function, name
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
        return {
            "function": self.name,
            "takesOptions": self.takes_options,
            "optionNames": sorted(self.option_names),
        }

    def call(self, case: FixtureCase, with_options: bool):
        def given(x):
            if case.expected is None or x is None:
                return x  # an invalid case's inputs, as written
            if 0 in x.shape:
                return x.copy()  # nested lists would lose the dims after the zero: [2, 0, 8] is [[], []]
            return x.tolist()

        inputs = case.inputs
        args = [given(inputs["query"]), given(inputs["key"]), given(inputs["value"])]
        kwargs = {}
        if with_options:
            for name, value in options_set(case).items():
                if name == "attn_mask" and self.mask_positional:
                    args.append(given(value))
                else:
                    kwargs[name] = given(value) if name == "attn_mask" else value
        return self.function(*args, **kwargs)


def returned_tensor(name: str, value) -> dict | str:
    """{"shape", "data"} for nested numbers (or an array), else a one-line reason."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":  # its shape, zero-size dims too
        flat = value.astype(np.float64).reshape(-1).tolist()
        return {"shape": list(value.shape), "data": encode_numbers(flat)}
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):  # a torch array, say
        value = value.tolist()
    if not isinstance(value, (list, tuple)):
        return f"{name} is {_what(value)}, expected nested lists of numbers"
    try:
        shape = infer_shape(name, value)
    except AttentionInputError as error:
        return _one_line(error)
    for path, leaf in leaves(value, len(shape)):
        if not is_number(leaf):
            return f"{name}{path} is {_what(leaf)}, expected a number"
    flat = np.array(value, dtype=np.float64).reshape(-1).tolist()
    return {"shape": list(shape), "data": encode_numbers(flat)}


def _output_and_weights(learner: Learner, case: FixtureCase, returned) -> str | None:
    """Many tutorials' attention returns (output, weights); the pair itself would read as a ragged or
    wrongly shaped output, so it is named: two items, the first of the output's shape, the whole not."""
    if case.expected is None or not isinstance(returned, (tuple, list)) or len(returned) != 2:
        return None
    want = list(case.expected.output.shape)
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


def raised_on_purpose(error: BaseException) -> tuple[bool, str | None]:
    """Whether an error was raised on purpose, and the line of the learner's code it came from.

    On purpose: a `raise` or `assert` statement raised it, in code that is not the standard library's
    or an installed package's (the learner's own, or the project's port it imports), or it carries a
    `kind`, as the project's errors do. Anything else is a crash in the learner's math: an index out of
    range, None where a list was meant, numpy refusing operands that do not fit."""
    tb, innermost, where = error.__traceback__, None, None
    while tb is not None:
        file = Path(tb.tb_frame.f_code.co_filename).resolve()
        if file != WORKER and not str(file).startswith(LIBRARY_FOLDERS):
            where = f"line {tb.tb_lineno} of {file.name}"  # the innermost frame of the learner's code
        innermost, tb = tb, tb.tb_next
    if isinstance(getattr(error, "kind", None), str):
        return True, where
    if innermost is None:
        return False, where
    code = innermost.tb_frame.f_code
    raising = any(
        i.offset == innermost.tb_lasti and i.opname == "RAISE_VARARGS" for i in dis.get_instructions(code)
    )
    in_library = str(Path(code.co_filename).resolve()).startswith(LIBRARY_FOLDERS)
    return raising and not in_library, where


def answer(learner: Learner, case: FixtureCase, with_options: bool) -> dict:
    try:
        returned = learner.call(case, with_options)
    except Exception as error:
        kind = getattr(error, "kind", None)
        deliberate, where = raised_on_purpose(error)
        threw = {
            "name": type(error).__name__,
            "message": _one_line(error),
            "kind": kind if isinstance(kind, str) else None,  # an AttentionInputError's, or a learner's own
            "deliberate": deliberate,
            "where": where,
        }
        return {"id": case.id, "threw": threw}
    if learner.name == "attention_steps":
        if isinstance(returned, dict):
            steps = {k: returned[k] for k in STEP_NAMES if k in returned}
        else:
            steps = {k: getattr(returned, k) for k in STEP_NAMES if hasattr(returned, k)}
        if "output" not in steps:
            return {"id": case.id, "bad": f"attention_steps returned {_what(returned)} without an output"}
    else:
        if pair := _output_and_weights(learner, case, returned):
            return {"id": case.id, "bad": pair}
        steps = {"output": returned}
    written = {}
    for name, value in steps.items():
        tensor = returned_tensor(name, value)
        if isinstance(tensor, str):
            return {"id": case.id, "bad": tensor}
        written[name] = tensor
    return {"id": case.id, "steps": written}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention_port.learner_worker")
    parser.add_argument("--module", required=True)
    parser.add_argument("--answers-fd", type=int, required=True)
    parser.add_argument("--fixtures", required=True)
    args = parser.parse_args(argv)

    def send(message: dict) -> None:
        os.write(args.answers_fd, (json.dumps(message, allow_nan=False) + "\n").encode())

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
    by_id: dict[str, FixtureCase] = {}  # every case, read once at the first request
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        by_id = by_id or {case.id: case for case in load_fixtures(args.fixtures)}
        send(answer(learner, by_id[request["id"]], request["options"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
