"""Write a fixture folder: the case table through the oracle into files, swapped in atomically.

A fixture folder holds what the generator writes (manifest.json, cases/*.json) and the format's
own documents, committed by hand (README.md, schema/). Every folder written gets the repository's
copies of those documents, so a folder always carries the description of its format.

Nothing is ever half-written, and the folder is never missing:
  1. Stale staging folders (`.fixtures.new-<pid>-*` of a process that is gone, left by a generate
     that was killed) are removed first.
  2. Everything is written into a new staging folder beside the target, then read back with
     fixtures.load_fixtures: a folder that does not read back is never swapped in.
  3. The staging folder and the target are exchanged in one atomic step (renameat2 with
     RENAME_EXCHANGE on Linux, renamex_np with RENAME_SWAP on macOS): at every moment the target
     path names a complete folder, the old one or the new one. The target stays an ordinary
     directory, so git tracks its files as always. Where the system has no exchange, two renames
     are the fallback, with the old folder put back if the second fails.
  4. The old folder, now under the staging name, is removed.
An interruption before step 3 leaves the old folder as it was; after it, the new one is complete.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from . import oracle
from .cases import CASES, Case
from .files import output_problem
from .fixtures import (
    CASE_FORMAT,
    EXPECTED_NAMES,
    FORMAT_VERSION,
    INPUT_NAMES,
    MANIFEST_FORMAT,
    SCHEMA_DIR,
    FixtureError,
    encode_numbers,
    load_fixtures,
    sha256,
)
from .inputs import ERROR_KINDS

GENERATOR_COMMAND = "attention-port generate"
FORMAT_DOCUMENTS = SCHEMA_DIR.parent  # the shipped fixtures/: README.md and schema/ come from here
DOCUMENTS = ("README.md", "schema")


def _scalar_json(x: object) -> str:
    # A float is written as its shortest round-trip repr, exact for float64.
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


def case_document(case: Case, with_expected: bool = True) -> dict:
    """The JSON document of one case: inputs, options and either expected values or the error
    (with_expected=False leaves out the oracle's values, for a quick comparison)."""
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
    if not with_expected:
        return document
    truth = oracle.attention(
        arrays["query"], arrays["key"], arrays["value"], arrays["attn_mask"], **case.params
    )
    document["expected"] = {
        name: {"shape": list(getattr(truth, name).shape), "data": encode_numbers(getattr(truth, name))}
        for name in EXPECTED_NAMES
    }
    document["expected"]["score_bound"] = encode_numbers(truth.score_bound)
    return document


def render_case(case: Case) -> str:
    return dump_json(case_document(case)) + "\n"


ORACLE_SAMPLE = 2  # valid cases whose expected values stale_cases recomputes: the smallest ones


def stale_cases(on_disk: Iterable) -> list[str]:
    """Ids of fixture cases (as loaded) that `attention-port generate` would write differently:
    every case's id, description, tags, seed, inputs, options and expected error against the table,
    and the expected values of the oracle_sample cases against the oracle. Cheap enough for every
    verify (the whole oracle takes seconds); `generate --check` is the full check."""
    by_id = {case.id: case for case in CASES}
    known = [case for case in on_disk if case.id in by_id]
    stale = []
    for case in known:
        written = json.loads(case.path.read_text(encoding="utf-8"))
        written.pop("expected", None)
        if written != json.loads(dump_json(case_document(by_id[case.id], with_expected=False))):
            stale.append(case.id)
    for case in oracle_sample([case for case in known if case.id not in stale]):
        if case.path.read_text(encoding="utf-8") != render_case(by_id[case.id]):
            stale.append(case.id)
    return stale


def oracle_sample(cases: Iterable) -> list:
    """The ORACLE_SAMPLE smallest valid cases (as loaded) that have an output to compute."""

    def size(case) -> int:
        return sum(np.size(case.inputs[name]) for name in ("query", "key", "value"))

    valid = [case for case in cases if not case.expects_error and case.expected.output.size > 0]
    return sorted(valid, key=size)[:ORACLE_SAMPLE]


def _write_generated(staging: Path, cases: Iterable[Case]) -> int:
    """manifest.json and cases/*.json into `staging`; returns the case count."""
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
                "sha256": sha256(data),
            }
        )
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": FORMAT_VERSION,
        "generator": GENERATOR_COMMAND,
        "oracle": f"exact dot products, then mpmath at {oracle.PRECISION_BITS} bits, rounded once",
        "tolerance": "|actual - expected| <= 16 * u(dtype) * (1 + spread) * magnitude"
        " + 16 * (tiny(dtype) / 2^-1074) * error_floor, element-wise; see compare.py",
        "error_kinds": list(ERROR_KINDS),
        "cases": entries,
    }
    (staging / "manifest.json").write_text(dump_json(manifest) + "\n", encoding="utf-8")
    return len(entries)


def _copy_documents(staging: Path) -> None:
    for name in DOCUMENTS:
        source = FORMAT_DOCUMENTS / name
        if not source.exists():
            raise FixtureError(source, "missing; restore it from git (the format's documents are committed)")
        if source.is_dir():
            shutil.copytree(source, staging / name)
        else:
            shutil.copyfile(source, staging / name)


def write_fixtures(folder: Path | str, cases: Iterable[Case] = CASES) -> int:
    """Generate every case into a staging folder beside `folder`, check it reads back, then swap it
    in atomically (see the module's docstring). Returns the case count."""
    folder = Path(folder).resolve()
    if problem := output_problem(folder, folder=True):
        raise FixtureError(folder, problem)
    if folder.exists() and any(folder.iterdir()) and not (folder / "manifest.json").exists():
        raise FixtureError(folder, "exists, is not empty and holds no manifest.json; refusing to replace it")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(folder)
        staging = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(folder)}{os.getpid()}-", dir=folder.parent))
    except OSError as error:
        raise FixtureError(
            folder.parent, f"cannot hold a new fixture folder ({error.strerror or error})"
        ) from None
    try:
        staging.chmod(folder.stat().st_mode & 0o7777 if folder.exists() else 0o755)  # not mkdtemp's 0700
        count = _write_generated(staging, cases)
        _copy_documents(staging)
        load_fixtures(staging)  # never swap in a folder that does not read back
        _swap_in(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return count


# ---------------------------------------------------------------------------------------------
# Staging folders and the swap


def _staging_prefix(folder: Path) -> str:
    return f".{folder.name}.new-"


def remove_stale_staging(folder: Path) -> list[Path]:
    """Remove the staging folders beside `folder` whose generate process is gone (killed mid-way).
    A folder named after a live process (another generate at work) is left alone."""
    removed = []
    prefix = _staging_prefix(folder)
    for candidate in folder.parent.glob(f"{prefix}*"):
        pid_text = candidate.name[len(prefix) :].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and _process_exists(int(pid_text)):
            continue
        shutil.rmtree(candidate, ignore_errors=True)
        removed.append(candidate)
    return removed


def _process_exists(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would end the process there; leave its folder alone
        return True
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process is there
    except ProcessLookupError:
        return False
    except PermissionError:  # there, but someone else's
        return True
    return True


def _exchange(first: Path, second: Path) -> bool:
    """Swap two directory entries in one atomic step; False where the system cannot."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    a, b = os.fsencode(first), os.fsencode(second)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        at_fdcwd, rename_exchange = -100, 2
        result = libc.renameat2(at_fdcwd, a, at_fdcwd, b, ctypes.c_uint(rename_exchange))
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        rename_swap = 2
        result = libc.renamex_np(a, b, ctypes.c_uint(rename_swap))
    else:
        return False
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):  # kernel or file system without it
        return False
    raise OSError(code, os.strerror(code), str(first))


def _swap_in(staging: Path, folder: Path) -> None:
    """Put `staging` where `folder` is; the old folder is removed once it is out of the way."""
    if not folder.exists():
        os.rename(staging, folder)
        return
    if _exchange(staging, folder):
        shutil.rmtree(staging, ignore_errors=True)  # it holds the old folder now
        return
    retired = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(folder)}{os.getpid()}-old-", dir=folder.parent))
    retired.rmdir()
    os.rename(folder, retired)
    try:
        os.rename(staging, folder)
    except BaseException:
        os.rename(retired, folder)
        raise
    shutil.rmtree(retired, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Freshness


def _file_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its path relative to it."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def stale_files(folder: Path | str) -> list[str]:
    """Regenerate into a temporary folder and compare byte for byte with `folder`: one line per
    file that differs, is missing or should not be there (empty: the folder is fresh)."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "fixtures"
        write_fixtures(fresh)
        want, have = _file_bytes(fresh), _file_bytes(Path(folder))
    stale = [f"{name} differs" for name in sorted(want.keys() & have.keys()) if want[name] != have[name]]
    stale += [f"{name} is missing" for name in sorted(want.keys() - have.keys())]
    stale += [f"{name} should not be there" for name in sorted(have.keys() - want.keys())]
    return stale
