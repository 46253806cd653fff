"""Read a fixture folder: the only Python code that reads the file format.

The format is the JSON Schema in fixtures/schema (manifest-v3.json, case-v3.json); fixtures/README.md
says it in prose. A folder is read in this order, and the first problem raises a FixtureError of one
line naming the file:
  0. each document as bytes, only from a regular file (never a FIFO, a device or a symlink loop,
     which would hang or fail inside a read), then as JSON bounded before and while it is parsed:
     nesting at most MAX_DEPTH deep (json would recurse), integers within ±2^53 and no number
     beyond float64 (numpy would overflow later), no key twice in one object (json keeps the last);
  1. each document's `format` and `version` (an old version says to regenerate);
  2. the schema: every field there, of its type, nothing unknown;
  3. what a schema cannot say: case ids unique and files inside the folder (manifest), each file's
     sha256 as the manifest gives it, each case's id as its manifest entry, each tensor's data of
     its shape and its leaves of its dtype (checked while walking the shape, which is fast; the
     schema leaves them to the readers), error_scale, magnitude, error_floor of the output's
     shape and spread of its rows, each case's tags and expectation as its manifest entry says,
     and at least one case.
Writing a folder is generate.py's job. The TypeScript reader (typescript/src/fixtures.ts) checks
only what it needs, because the harness reads every folder here first.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from . import paths
from .extras import missing_extra
from .inputs import nested_shape

if TYPE_CHECKING:
    import jsonschema

MANIFEST_FORMAT = "attention-port-fixtures"
CASE_FORMAT = "attention-port-fixture"
FORMAT_VERSION = 3  # 2: `expected.logits`; 3: spread, magnitude, error_floor and score_bound
SCHEMA_DIR = paths.SCHEMA_DIR
SCHEMA_FILES = {
    MANIFEST_FORMAT: f"manifest-v{FORMAT_VERSION}.json",
    CASE_FORMAT: f"case-v{FORMAT_VERSION}.json",
}
REGENERATE_HINT = "regenerate with `attention-port generate` (or scripts/generate)"
INPUT_NAMES = ("query", "key", "value", "attn_mask")
# The oracle's steps and, after them, what the tolerance rule reads (compare.py; oracle.py says
# why): tensors, then the one number score_bound.
EXPECTED_NAMES = (
    "scores",
    "logits",
    "weights",
    "output",
    "error_scale",
    "spread",
    "magnitude",
    "error_floor",
)

# Bounds on what a document may hold, checked before json parses it (depth) or while it does
# (numbers): past them, json or numpy would fail with a traceback rather than a sentence.
MAX_DEPTH = 64  # arrays and objects inside each other; a case needs about ten
MAX_INTEGER = 2**53  # the largest integer float64 holds exactly
MAX_DOCUMENT_BYTES = 256 * 2**20  # one file; the largest case is well under 1 MiB

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


def encode_numbers(value: object) -> object:
    """NaN and ±inf as the strings "NaN", "Infinity", "-Infinity", at any depth of dicts, lists,
    tuples and numpy arrays (numpy values become Python's), so the JSON written is strict."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        return {k: encode_numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_numbers(x) for x in value]
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def decode_numbers(value: object) -> object:
    """The strings "NaN", "Infinity", "-Infinity" become floats, at any depth; the rest is kept."""
    if isinstance(value, list):
        return [decode_numbers(x) for x in value]
    if isinstance(value, str) and value in NUMBER_STRINGS:
        return NUMBER_STRINGS[value]
    return value


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------------------------
# The schema


@functools.cache
def _jsonschema() -> ModuleType:
    """jsonschema, imported on first use: the core of the package (reference, inputs) needs only
    numpy, and reading fixtures is the harness's job (the `harness` extra)."""
    try:
        import jsonschema
        import referencing.jsonschema  # noqa: F401  (the registry _validators builds)
    except ModuleNotFoundError as error:
        raise missing_extra(error, "reading fixtures", "harness") from error
    return jsonschema


@functools.cache
def _validators() -> dict[str, jsonschema.protocols.Validator]:
    """One validator per document format, the two schemas registered by their $id."""
    jsonschema = _jsonschema()
    import referencing.jsonschema  # imported by _jsonschema already: this only names it here

    schemas = {}
    for document_format, name in SCHEMA_FILES.items():
        path = SCHEMA_DIR / name
        try:
            schemas[document_format] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise FixtureError(path, f"the fixture schema cannot be read ({error})") from None
    registry = referencing.Registry().with_resources(
        (schema["$id"], referencing.jsonschema.DRAFT202012.create_resource(schema))
        for schema in schemas.values()
    )
    return {k: jsonschema.Draft202012Validator(s, registry=registry) for k, s in schemas.items()}


def _where(path: Iterable[object]) -> str:
    """A JSON path as the messages write it: expected.weights, cases[3].file."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text


def _schema_problem(error: jsonschema.ValidationError) -> str:
    """A schema violation in one short line (jsonschema's own messages quote whole arrays)."""
    where = _where(error.absolute_path)
    prefix = f"{where}." if where else ""
    if error.validator == "required":
        missing = next(n for n in error.validator_value if n not in error.instance)
        return f"missing field '{prefix}{missing}'"
    if error.validator == "additionalProperties":
        extra = next(n for n in error.instance if n not in error.schema.get("properties", {}))
        return f"unexpected field '{prefix}{extra}'"
    if error.validator == "not" and error.validator_value == {"required": ["expected"]}:
        return "needs exactly one of 'expected' and 'expected_error'"
    if error.validator == "type":
        found = type(error.instance).__name__
        return f"field '{where}' has the wrong type ({found}, expected {error.validator_value})"
    if error.validator in ("const", "enum"):
        return f"field '{where}' is {json.dumps(error.instance)[:60]}, expected {error.validator_value}"
    message = " ".join(error.message.split())
    return f"field '{where}' {message[:120]}{'…' if len(message) > 120 else ''}"


def _check_document(data: bytes, document_format: str, path: Path) -> dict:
    """JSON, then format and version (an old folder is told to regenerate), then the schema."""
    document = _parse_json(data, path)
    if not isinstance(document, dict):
        raise FixtureError(path, "is not a JSON object")
    found = document.get("format")
    if found != document_format:
        raise FixtureError(path, f"format is {found!r}, expected {document_format!r}")
    version = document.get("version")
    if version != FORMAT_VERSION:
        raise FixtureError(
            path,
            f"format version {version} is not supported (this code reads version {FORMAT_VERSION});"
            f" {REGENERATE_HINT}",
        )
    problem = _jsonschema().exceptions.best_match(_validators()[document_format].iter_errors(document))
    if problem is not None:
        raise FixtureError(path, _schema_problem(problem))
    return document


# ---------------------------------------------------------------------------------------------
# Files


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


def read_regular_file(path: Path) -> bytes:
    """The bytes of `path` if it is a regular file (a symlink to one is followed), else a
    FixtureError: reading a FIFO would wait forever, a device may never end, a symlink loop raises
    inside pathlib. The file is opened without blocking and checked again once open, so a file
    swapped for a FIFO in between is refused too."""
    try:
        before = os.stat(path)
        if not stat.S_ISREG(before.st_mode):
            raise FixtureError(path, f"is {_file_kind(before.st_mode)}, not a regular file")
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        raise FixtureError(path, f"missing; {REGENERATE_HINT}") from None
    except OSError as error:  # a symlink loop, no permission, ...
        raise FixtureError(path, f"cannot be read ({error.strerror or error})") from None
    try:
        opened = os.fstat(descriptor)
        if not stat.S_ISREG(opened.st_mode):
            raise FixtureError(path, f"is {_file_kind(opened.st_mode)}, not a regular file")
        if opened.st_size > MAX_DOCUMENT_BYTES:
            limit = MAX_DOCUMENT_BYTES
            raise FixtureError(path, f"holds {opened.st_size} bytes, more than a fixture file may ({limit})")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as error:
        raise FixtureError(path, f"cannot be read ({error.strerror or error})") from None
    finally:
        os.close(descriptor)


# A JSON string (brackets inside it are text), and the bytes that are not brackets.
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(sorted(set(range(256)) - set(b"[]{}")))
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")  # +1 opens, -1 (as int8) closes


def nesting_depth(data: bytes) -> int:
    """How deep arrays and objects nest in a JSON text, counted without parsing it (json.loads
    recurses once per level and would fail with RecursionError near 1,000)."""
    brackets = _JSON_STRING.sub(b'""', data).translate(None, _NOT_BRACKETS)
    steps = np.frombuffer(brackets.translate(_BRACKET_STEPS), dtype=np.int8)
    return int(steps.cumsum(dtype=np.int64).max(initial=0))


def _refuse_bare_constant(token: str) -> float:
    raise ValueError(f'holds a bare {token}, which JSON does not allow (write the string "{token}")')


def _bounded_integer(text: str) -> int:
    # Checked on the text first: int() of thousands of digits is slow, and float() of a huge one
    # raises OverflowError far from here.
    if len(text.lstrip("-")) > len(str(MAX_INTEGER)) or abs(int(text)) > MAX_INTEGER:
        shown = text if len(text) <= 24 else f"{text[:12]}… ({len(text.lstrip('-'))} digits)"
        raise ValueError(f"holds the integer {shown}, beyond ±2^53 (fixture numbers are float64)")
    return int(text)


def _bounded_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: json would read it as inf without a word
        shown = text if len(text) <= 24 else f"{text[:12]}…"
        raise ValueError(f'holds the number {shown}, beyond float64 (infinity is written "Infinity")')
    return value


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    document = {}
    for key, value in pairs:
        if key in document:  # json would keep the last value without a word
            raise ValueError(f"holds the key {key[:40]!r} twice in one object")
        document[key] = value
    return document


def _parse_json(data: bytes, path: Path) -> object:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FixtureError(path, f"cannot be read ({error})") from None
    if (depth := nesting_depth(data)) > MAX_DEPTH:
        raise FixtureError(path, f"nests arrays and objects more than {MAX_DEPTH} deep ({depth})")
    try:
        return json.loads(
            text,
            parse_constant=_refuse_bare_constant,
            parse_int=_bounded_integer,
            parse_float=_bounded_float,
            object_pairs_hook=_unique_keys,
        )
    except json.JSONDecodeError as error:
        raise FixtureError(path, f"is not valid JSON ({error})") from None
    except ValueError as error:  # a bound above, or a bare NaN or Infinity
        raise FixtureError(path, str(error)) from None


# ---------------------------------------------------------------------------------------------
# Cases


def _read_tensor(entry: dict, path: Path, where: str) -> np.ndarray:
    """A schema-checked tensor whose data must still match its shape and dtype."""
    shape, data, dtype = entry["shape"], entry["data"], entry.get("dtype", "float64")
    # A zero dim ends the nesting ([2, 0, 8] is written [[], []]), so compare up to it.
    cut = shape.index(0) + 1 if 0 in shape else len(shape)
    nested = nested_shape(data)
    if nested != shape[:cut]:
        raise FixtureError(path, f"{where}.data has shape {nested}, expected {shape[:cut]}")
    try:
        values = np.array(decode_numbers(data), dtype=object)
    except ValueError:
        values = None
    if values is None or list(values.shape) != shape[:cut]:
        raise FixtureError(path, f"{where}.data is ragged (expected shape {shape})")
    leaves = values.ravel().tolist()
    if dtype == "bool":
        if not all(isinstance(x, bool) for x in leaves):
            raise FixtureError(path, f"{where}.data holds a non-boolean in a bool tensor")
        return np.array(leaves, dtype=bool).reshape(shape)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in leaves):
        raise FixtureError(path, f"{where}.data holds something that is not a number")
    return np.array(leaves, dtype=np.float64).reshape(shape)


def _read_case(path: Path, data: bytes, entry: dict) -> FixtureCase:
    document = _check_document(data, CASE_FORMAT, path)
    if document["id"] != entry["id"]:
        raise FixtureError(path, f"id {document['id']!r} does not match the manifest's {entry['id']!r}")
    # The manifest repeats the tags and the expectation so that a folder can be listed without
    # reading every case; a contradiction means one of the two files was edited.
    if document["tags"] != entry["tags"]:
        raise FixtureError(path, f"tags {document['tags']} differ from the manifest's {entry['tags']}")
    expect = "error" if "expected_error" in document else "output"
    if expect != entry["expect"]:
        raise FixtureError(path, f"expects an {expect}, but the manifest says an {entry['expect']}")
    inputs_doc = document["inputs"]
    params = {name: decode_numbers(value) for name, value in document["params"].items()}
    about = (document["id"], document["description"], tuple(document["tags"]), path)
    if "expected_error" in document:
        error = document["expected_error"]
        inputs = {n: None if t is None else decode_numbers(t["data"]) for n, t in inputs_doc.items()}
        return FixtureCase(*about, inputs, params, None, (error["kind"], error["message"]))
    inputs = {
        name: None if tensor is None else _read_tensor(tensor, path, f"inputs.{name}")
        for name, tensor in inputs_doc.items()
    }
    expected = {
        name: _read_tensor(document["expected"][name], path, f"expected.{name}") for name in EXPECTED_NAMES
    }
    for name in ("error_scale", "magnitude", "error_floor"):
        if expected[name].shape != expected["output"].shape:
            raise FixtureError(path, f"expected.{name} and expected.output differ in shape")
    if expected["spread"].shape != expected["output"].shape[:-1]:
        raise FixtureError(path, "expected.spread is not one number per query row")
    score_bound = float(decode_numbers(document["expected"]["score_bound"]))
    return FixtureCase(*about, inputs, params, ExpectedValues(**expected, score_bound=score_bound), None)


def load_fixtures(folder: Path | str, case_ids: Iterable[str] | None = None) -> list[FixtureCase]:
    """Every case of a fixture folder (or only `case_ids`), checked against the manifest.

    Any problem raises FixtureError naming the file; nothing is ever written."""
    folder = Path(folder)
    manifest_path = folder / "manifest.json"
    if not folder.is_dir():
        raise FixtureError(folder, f"is not a fixture folder; {REGENERATE_HINT}")
    data = read_regular_file(manifest_path)
    manifest = _check_document(data, MANIFEST_FORMAT, manifest_path)
    if not manifest["cases"]:
        raise FixtureError(manifest_path, f"lists no case; {REGENERATE_HINT}")
    root = folder.resolve()
    seen = set()
    wanted = None if case_ids is None else set(case_ids)
    selected = []
    for number, entry in enumerate(manifest["cases"]):
        case_id, file = entry["id"], entry["file"]
        if case_id in seen:
            raise FixtureError(manifest_path, f"case id {case_id!r} appears twice")
        seen.add(case_id)
        try:
            inside = (folder / file).resolve().is_relative_to(root)
        except (OSError, RuntimeError):  # RuntimeError: pathlib's word for a symlink loop
            raise FixtureError(folder / file, "cannot be resolved (a symlink loop?)") from None
        if os.path.isabs(file) or not inside:
            raise FixtureError(manifest_path, f"cases[{number}].file {file!r} leaves the fixture folder")
        if wanted is None or case_id in wanted:
            selected.append(entry)
    if wanted is not None and wanted - seen:
        raise FixtureError(manifest_path, f"no case named {sorted(wanted - seen)[0]!r}")
    loaded = []
    for entry in selected:
        path = folder / entry["file"]
        data = read_regular_file(path)
        actual = sha256(data)
        if actual != entry["sha256"]:
            raise FixtureError(
                path,
                f"sha256 {actual[:12]}… does not match the manifest's {entry['sha256'][:12]}…;"
                f" the file was edited by hand or is damaged; {REGENERATE_HINT}",
            )
        loaded.append(_read_case(path, data, entry))
    return loaded
