"""Read, write and validate fixture folders: the only Python code that knows the file format.

The format is described for people in FIXTURES_README below, which the generator writes to
fixtures/README.md. Its TypeScript twin is typescript/src/fixtures.ts.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import oracle
from .cases import CASES, Case
from .inputs import ERROR_KINDS

MANIFEST_FORMAT = "attention-port-fixtures"
CASE_FORMAT = "attention-port-fixture"
FORMAT_VERSION = 2  # 2: `expected.logits`, the softmax input, stored beside scores
GENERATOR_COMMAND = "attention-port generate"
REGENERATE_HINT = "regenerate with `attention-port generate` (or scripts/generate)"
INPUT_NAMES = ("query", "key", "value", "attn_mask")
EXPECTED_NAMES = ("scores", "logits", "weights", "output", "error_scale")
PARAM_NAMES = ("is_causal", "scale", "enable_gqa", "softcap")

# JSON has no NaN or Infinity: these strings stand for them wherever a number may appear.
NUMBER_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


class FixtureError(Exception):
    """A fixture folder that cannot be used: one line naming the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = str(path)
        self.problem = problem


@dataclass(frozen=True)
class ExpectedValues:
    """The oracle's values for a valid case, float64."""

    scores: np.ndarray  # [B..., Hq, Lq, Lk]
    logits: np.ndarray  # [B..., Hq, Lq, Lk]  scaled, softcapped and masked: softmax's input
    weights: np.ndarray  # [B..., Hq, Lq, Lk]
    output: np.ndarray  # [B..., Hq, Lq, Ev]
    error_scale: np.ndarray  # [B..., Hq, Lq, Ev]


@dataclass(frozen=True)
class FixtureCase:
    """One case as read from disk.

    For a valid case `inputs` holds arrays (query/key/value float64; attn_mask bool or float64,
    or None). For an invalid case it holds the inputs exactly as written (nested lists, maybe
    ragged, maybe holding strings), to be handed to a port as they are.
    """

    id: str
    description: str
    tags: tuple[str, ...]
    path: Path
    inputs: dict[str, object]
    params: dict[str, object]
    expected: ExpectedValues | None
    expected_error: tuple[str, str] | None  # (kind, message)

    @property
    def expects_error(self) -> bool:
        return self.expected_error is not None


# ---------------------------------------------------------------------------------------------
# Writing


def encode_numbers(value: object) -> object:
    """Nested lists with NaN/±Infinity replaced by their strings (numpy values become Python's)."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return [encode_numbers(x) for x in value]
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _scalar_json(x: object) -> str:
    if isinstance(x, float):
        return json.dumps(x, allow_nan=False)  # shortest round-trip repr, exact for float64
    return json.dumps(x, ensure_ascii=False, allow_nan=False)


def dump_json(value: object, indent: int = 0) -> str:
    """Deterministic JSON: objects one key a line, each innermost array on a single line."""
    pad, inner = " " * indent, " " * (indent + 2)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {dump_json(v, indent + 2)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list):
        if all(not isinstance(x, (list, dict)) for x in value):
            return "[" + ", ".join(_scalar_json(x) for x in value) + "]"
        return "[\n" + ",\n".join(inner + dump_json(x, indent + 2) for x in value) + "\n" + pad + "]"
    return _scalar_json(value)


def _tensor_json(array: np.ndarray) -> dict:
    dtype = "bool" if array.dtype == bool else "float64"
    return {"dtype": dtype, "shape": list(array.shape), "data": encode_numbers(array)}


def _as_input_array(name: str, data: object) -> np.ndarray:
    array = np.asarray(data)
    if name == "attn_mask" and array.dtype == bool:
        return array
    return array.astype(np.float64)


def case_document(case: Case) -> dict:
    """The JSON document of one case: inputs, options and either expected values or the error."""
    drawn = case.draw_inputs()
    document: dict[str, object] = {
        "format": CASE_FORMAT,
        "version": FORMAT_VERSION,
        "id": case.id,
        "description": case.description,
        "tags": list(case.tags),
        "seed": case.seed,
    }
    if case.expects_error:
        # Invalid inputs are written as they are (maybe ragged, maybe not numbers): no shape.
        document["inputs"] = {
            name: None
            if drawn[name] is None
            else {"dtype": None, "shape": None, "data": encode_numbers(drawn[name])}
            for name in INPUT_NAMES
        }
        document["params"] = {k: encode_numbers(v) for k, v in case.params.items()}
        kind, message = case.error
        document["expected_error"] = {"kind": kind, "message": message}
        return document
    arrays = {
        name: None if drawn[name] is None else _as_input_array(name, drawn[name]) for name in INPUT_NAMES
    }
    document["inputs"] = {name: None if a is None else _tensor_json(a) for name, a in arrays.items()}
    document["params"] = {k: encode_numbers(v) for k, v in case.params.items()}
    truth = oracle.attention(
        arrays["query"], arrays["key"], arrays["value"], arrays["attn_mask"], **case.params
    )
    document["expected"] = {
        name: {"shape": list(getattr(truth, name).shape), "data": encode_numbers(getattr(truth, name))}
        for name in EXPECTED_NAMES
    }
    return document


def render_case(case: Case) -> str:
    return dump_json(case_document(case)) + "\n"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_fixtures(folder: Path | str, cases: Iterable[Case] = CASES) -> int:
    """Generate every case into a temporary folder beside `folder`, check it reads back, then swap
    it in. An interrupted or failed run leaves the old folder as it was. Returns the case count."""
    folder = Path(folder).resolve()
    if folder.exists() and any(folder.iterdir()) and not (folder / "manifest.json").exists():
        raise FixtureError(folder, "exists, is not empty and holds no manifest.json; refusing to replace it")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent))
    try:
        (staging / "cases").mkdir()
        entries = []
        for case in cases:
            data = render_case(case).encode("utf-8")
            relative = f"cases/{case.id}.json"
            (staging / relative).write_bytes(data)
            entries.append(
                {
                    "id": case.id,
                    "file": relative,
                    "tags": list(case.tags),
                    "expect": "error" if case.expects_error else "output",
                    "sha256": _sha256(data),
                }
            )
        manifest = {
            "format": MANIFEST_FORMAT,
            "version": FORMAT_VERSION,
            "generator": GENERATOR_COMMAND,
            "oracle": f"python decimal, {oracle.PRECISION} significant digits, rounded once to float64",
            "tolerance": "|actual - expected| <= 16 * unit_roundoff(dtype) * error_scale, element-wise",
            "error_kinds": list(ERROR_KINDS),
            "cases": entries,
        }
        (staging / "manifest.json").write_text(dump_json(manifest) + "\n", encoding="utf-8")
        (staging / "README.md").write_text(FIXTURES_README, encoding="utf-8")
        load_fixtures(staging)  # never swap in a folder that does not read back
        _swap_in(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return len(entries)


def _swap_in(staging: Path, folder: Path) -> None:
    """Replace `folder` by `staging` with two renames; on failure put the old folder back."""
    if not folder.exists():
        os.rename(staging, folder)
        return
    retired = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
    retired.rmdir()
    os.rename(folder, retired)
    try:
        os.rename(staging, folder)
    except BaseException:
        os.rename(retired, folder)
        raise
    shutil.rmtree(retired, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Reading


def decode_numbers(value: object) -> object:
    """The inverse of encode_numbers: "NaN", "Infinity", "-Infinity" become floats."""
    if isinstance(value, list):
        return [decode_numbers(x) for x in value]
    if isinstance(value, str) and value in NUMBER_STRINGS:
        return NUMBER_STRINGS[value]
    return value


def _read_json(path: Path, display: str) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FixtureError(display, f"missing; {REGENERATE_HINT}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise FixtureError(display, f"cannot be read ({error})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise FixtureError(display, f"is not valid JSON ({error})") from None


def _field(document: dict, name: str, types, display: str, where: str = ""):
    if not isinstance(document, dict) or name not in document:
        raise FixtureError(display, f"missing field {where}{name!r}")
    value = document[name]
    if not isinstance(value, types):
        raise FixtureError(display, f"field {where}{name!r} has the wrong type ({type(value).__name__})")
    return value


def _check_format(document: dict, expected_format: str, display: str) -> None:
    found = _field(document, "format", str, display)
    if found != expected_format:
        raise FixtureError(display, f"format is {found!r}, expected {expected_format!r}")
    version = _field(document, "version", int, display)
    if version != FORMAT_VERSION:
        raise FixtureError(
            display,
            f"format version {version} is not supported (this code reads version {FORMAT_VERSION});"
            f" {REGENERATE_HINT}",
        )


def _nested_shape(data: object) -> list[int]:
    shape = []
    while isinstance(data, list):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return shape


def _read_tensor(entry: object, display: str, where: str, allow_bool: bool) -> np.ndarray:
    shape = _field(entry, "shape", list, display, f"{where}.")
    data = _field(entry, "data", (list, int, float, bool, str), display, f"{where}.")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise FixtureError(display, f"{where}.shape {shape} is not a list of sizes")
    dtype = entry.get("dtype", "float64")
    if dtype not in (("float64", "bool") if allow_bool else ("float64",)):
        raise FixtureError(display, f"{where}.dtype {dtype!r} is not supported")
    # A zero dim ends the nesting ([2, 0, 8] is written [[], []]), so compare up to it.
    cut = shape.index(0) + 1 if 0 in shape else len(shape)
    nested = _nested_shape(data)
    if nested != shape[:cut]:
        raise FixtureError(display, f"{where}.data has shape {nested}, expected {shape[:cut]}")
    try:
        values = np.array(decode_numbers(data), dtype=object)
    except ValueError:
        values = None
    if values is None or list(values.shape) != shape[:cut]:
        raise FixtureError(display, f"{where}.data is ragged (expected shape {shape})")
    leaves = values.ravel().tolist()
    if dtype == "bool":
        if not all(isinstance(x, bool) for x in leaves):
            raise FixtureError(display, f"{where}.data holds a non-boolean in a bool tensor")
        return np.array(leaves, dtype=bool).reshape(shape)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in leaves):
        raise FixtureError(display, f"{where}.data holds something that is not a number")
    return np.array(leaves, dtype=np.float64).reshape(shape)


def _read_case(folder: Path, entry: dict, display: str) -> FixtureCase:
    path = folder / entry["file"]
    document = _read_json(path, display)
    if not isinstance(document, dict):
        raise FixtureError(display, "is not a JSON object")
    _check_format(document, CASE_FORMAT, display)
    case_id = _field(document, "id", str, display)
    if case_id != entry["id"]:
        raise FixtureError(display, f"id {case_id!r} does not match the manifest's {entry['id']!r}")
    description = _field(document, "description", str, display)
    tags = tuple(_field(document, "tags", list, display))
    inputs_doc = _field(document, "inputs", dict, display)
    params_doc = _field(document, "params", dict, display)
    params = {}
    for name in PARAM_NAMES:
        if name not in params_doc:
            raise FixtureError(display, f"missing field 'params.{name}'")
        params[name] = decode_numbers(params_doc[name])
    for name in INPUT_NAMES:
        if name not in inputs_doc:
            raise FixtureError(display, f"missing field 'inputs.{name}'")
    has_expected, has_error = "expected" in document, "expected_error" in document
    if has_expected == has_error:
        raise FixtureError(display, "needs exactly one of 'expected' and 'expected_error'")
    if has_error:
        error = _field(document, "expected_error", dict, display)
        kind = _field(error, "kind", str, display, "expected_error.")
        message = _field(error, "message", str, display, "expected_error.")
        if kind not in ERROR_KINDS:
            raise FixtureError(display, f"expected_error.kind {kind!r} is not one of {list(ERROR_KINDS)}")
        inputs = {}
        for name in INPUT_NAMES:
            tensor = inputs_doc[name]
            inputs[name] = (
                None
                if tensor is None
                else decode_numbers(
                    _field(
                        tensor, "data", (list, int, float, bool, str, type(None)), display, f"inputs.{name}."
                    )
                )
            )
        return FixtureCase(case_id, description, tags, path, inputs, params, None, (kind, message))
    inputs = {}
    for name in INPUT_NAMES:
        tensor = inputs_doc[name]
        if tensor is None:
            if name != "attn_mask":
                raise FixtureError(display, f"inputs.{name} is null")
            inputs[name] = None
            continue
        inputs[name] = _read_tensor(tensor, display, f"inputs.{name}", allow_bool=name == "attn_mask")
    expected_doc = _field(document, "expected", dict, display)
    expected = {}
    for name in EXPECTED_NAMES:
        if name not in expected_doc:
            raise FixtureError(display, f"missing field 'expected.{name}'")
        expected[name] = _read_tensor(expected_doc[name], display, f"expected.{name}", allow_bool=False)
    if expected["error_scale"].shape != expected["output"].shape:
        raise FixtureError(display, "expected.error_scale and expected.output differ in shape")
    return FixtureCase(case_id, description, tags, path, inputs, params, ExpectedValues(**expected), None)


def load_fixtures(folder: Path | str, case_ids: Iterable[str] | None = None) -> list[FixtureCase]:
    """Every case of a fixture folder (or only `case_ids`), checked against the manifest.

    Any problem raises FixtureError naming the file; nothing is ever written."""
    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    display = str(manifest_path)
    if not folder.is_dir():
        raise FixtureError(folder, f"is not a fixture folder; {REGENERATE_HINT}")
    manifest = _read_json(manifest_path, display)
    if not isinstance(manifest, dict):
        raise FixtureError(display, "is not a JSON object")
    _check_format(manifest, MANIFEST_FORMAT, display)
    entries = _field(manifest, "cases", list, display)
    root = folder.resolve()
    seen = set()
    selected = []
    wanted = None if case_ids is None else set(case_ids)
    for number, entry in enumerate(entries):
        where = f"cases[{number}]."
        case_id = _field(entry, "id", str, display, where)
        file = _field(entry, "file", str, display, where)
        digest = _field(entry, "sha256", str, display, where)
        if case_id in seen:
            raise FixtureError(display, f"case id {case_id!r} appears twice")
        seen.add(case_id)
        target = (folder / file).resolve()
        if os.path.isabs(file) or not target.is_relative_to(root):
            raise FixtureError(display, f"{where}file {file!r} leaves the fixture folder")
        if wanted is None or case_id in wanted:
            selected.append((entry, target, digest))
    if wanted is not None and wanted - seen:
        raise FixtureError(display, f"no case named {sorted(wanted - seen)[0]!r}")
    loaded = []
    for entry, target, digest in selected:
        case_display = str(folder / entry["file"])
        try:
            data = target.read_bytes()
        except FileNotFoundError:
            raise FixtureError(case_display, f"missing; {REGENERATE_HINT}") from None
        actual = _sha256(data)
        if actual != digest:
            raise FixtureError(
                case_display,
                f"sha256 {actual[:12]}… does not match the manifest's {digest[:12]}…;"
                f" the file was edited by hand or is damaged; {REGENERATE_HINT}",
            )
        loaded.append(_read_case(folder, entry, case_display))
    return loaded


FIXTURES_README = """\
# Fixtures: the contract between the languages

Written by `attention-port generate` (scripts/generate) from the case table in
`python/attention_port/cases.py`; do not edit by hand (the manifest's sha256 would catch it).
Regenerating reproduces every file byte for byte, on any machine.

## Files

- `manifest.json`: `format` ("attention-port-fixtures"), `version` (2), the `generator` command,
  the shared list of `error_kinds`, and one entry per case: `id`, `file` (always inside this
  folder), `tags`, `expect` ("output" or "error") and the `sha256` of the case file. Readers refuse
  another version and say to regenerate.
- `cases/<id>.json`: one case. `format` ("attention-port-fixture"), `version`, `id`, a one-line
  `description`, feature `tags` and the `seed` its random inputs were drawn with, then:
  - `inputs`: `query`, `key`, `value` and `attn_mask` (or null). Each tensor is
    `{"dtype", "shape", "data"}`: `data` is a nested JSON array, so a reader sees exactly the
    `number[][]` the TypeScript port takes; `dtype` is "float64" or, for a mask, "bool"
    (true = may attend). A zero-size dim ends the nesting: shape [2, 0, 8] is written `[[], []]`.
  - `params`: `is_causal`, `scale` (null = 1/sqrt(E)), `enable_gqa`, `softcap` (0 = off).
  - a valid case has `expected`: `scores` (query · keyᵀ), `logits` (the scores
    scaled, softcapped and masked: softmax's input), `weights` (softmax), `output`, and
    `error_scale`, one number per output element, each `{"shape", "data"}`.
  - an invalid case has `expected_error`: `{"kind", "message"}` that every port must raise.
    Its inputs are written as they are given to the ports (maybe ragged, maybe holding a string),
    so their `dtype` and `shape` are null.

## Numbers

Numbers are written in Python's shortest round-trip form, exact for float64. JSON has no NaN or
infinities: the strings "NaN", "Infinity" and "-Infinity" stand for them in inputs, params and
expected values. Random inputs are standard normal draws (numpy `Generator(PCG64(seed))`, one
seed per case) kept to three significant digits.

## Where the expected values come from

The oracle (`python/attention_port/oracle.py`) does the five steps in 50-digit decimal arithmetic
and rounds once to float64. numpy, torch and TypeScript are all ports under test against it.

## How close is close enough

Element-wise on the output: `|actual - expected| <= 16 * u * error_scale`, with `u` the unit
roundoff of the dtype the port computes in (2^-53 float64, 2^-24 float32, 2^-11 float16, 2^-8
bfloat16) and `error_scale = (1 + S_i) * (|weights| · |value|)`,
`S_i = |scale| * max_j sum_t |q_it * k_jt| + max_j |finite float-mask value|`. NaN must meet NaN;
where `error_scale` is 0 (fully-masked rows, Lk = 0) the output must be exactly +0.0. Shapes and
error kinds must match exactly; error messages too (the TypeScript port spells `attn_mask`,
`enable_gqa` and `is_causal` as `attnMask`, `enableGqa` and `isCausal`).
"""
