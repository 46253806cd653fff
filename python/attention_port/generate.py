"""Write a fixture folder: the case table through the oracle into files, swapped in atomically.

A fixture folder holds what the generator writes (manifest.json, cases/*.json) and the format's
own documents, committed by hand (README.md, schema/). Every folder written gets the repository's
copies of those documents, so a folder always carries the description of its format.

It replaces only what it wrote: the target must be missing, empty, or a fixture folder it
recognises (a manifest.json of this format, and nothing beside the generator's files and the
format's documents); anything else is refused in one line, and nothing is touched.

Nothing is ever half-written, and the folder is never missing:
  1. Stale staging folders of this target are removed first: named exactly `.<name>.new-<pid>-<8
     characters>` (mkdtemp's), holding this module's STAGING_MARKER, of a process that is gone
     (a generate that was killed). A folder of the same pattern without the marker is not ours.
  2. Everything is written into `<staging>/<name>`, a new folder inside a new staging folder
     beside the target, then read back with fixtures.load_fixtures: a folder that does not read
     back is never swapped in.
  3. `<staging>/<name>` and the target are exchanged in one atomic step (renameat2 with
     RENAME_EXCHANGE on Linux, renamex_np with RENAME_SWAP on macOS): at every moment the target
     path names a complete folder, the old one or the new one. The target stays an ordinary
     directory, so git tracks its files as always. Where the system has no exchange, two renames
     are the fallback, with the old folder put back if the second fails.
  4. The staging folder, which now holds the old folder beside its marker, is removed.
An interruption before step 3 leaves the old folder as it was; after it, the new one is complete;
at any step what is left beside it carries the marker, so the next generate removes it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import re
import shutil
import stat
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
    read_regular_file,
    sha256,
)
from .inputs import ERROR_KINDS

GENERATOR_COMMAND = "attention-port generate"
FORMAT_DOCUMENTS = SCHEMA_DIR.parent  # the shipped fixtures/: README.md and schema/ come from here
DOCUMENTS = ("README.md", "schema")
GENERATED = ("manifest.json", "cases")
# Written first into every staging folder: the clean-up removes only folders that hold it.
STAGING_MARKER = ".attention-port-staging"
MANIFEST_SCHEMA_ID = "urn:attention-port:fixture-manifest:"  # the $id of every version's schema


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
    if problem := not_ours(folder):
        raise FixtureError(folder, f"{problem}; refusing to replace it (give an empty or new folder)")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_staging(folder)
        staging = Path(tempfile.mkdtemp(prefix=f"{_staging_prefix(folder)}{os.getpid()}-", dir=folder.parent))
    except OSError as error:
        raise FixtureError(
            folder.parent, f"cannot hold a new fixture folder ({error.strerror or error})"
        ) from None
    try:
        (staging / STAGING_MARKER).write_text(f"a staging folder of {GENERATOR_COMMAND}\n", encoding="utf-8")
        fresh = staging / folder.name
        fresh.mkdir()
        fresh.chmod(folder.stat().st_mode & 0o7777 if folder.exists() else 0o755)  # not the umask's
        count = _write_generated(fresh, cases)
        _copy_documents(fresh)
        load_fixtures(fresh)  # never swap in a folder that does not read back
        _swap_in(fresh, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # the old folder, after a swap
    return count


def not_ours(folder: Path) -> str | None:
    """Why generate may not replace `folder`, worded to follow its path; None when it may: the
    folder is missing or empty, or is a fixture folder, recognised by its manifest (of this format,
    any version) or its schema, that holds nothing generate would not write there."""
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot be listed ({error.strerror or error})"
    if not names:
        return None
    if not (_json_field(folder / "manifest.json", "format") == MANIFEST_FORMAT or _holds_the_schema(folder)):
        return "is not empty and is not a fixture folder (no manifest.json or schema/ of this format)"
    if foreign := [name for name in names if name not in GENERATED + DOCUMENTS]:
        return f"is a fixture folder but also holds {foreign[0]!r}, which generate does not write"
    for name in ("cases", "schema"):
        inside = folder / name
        if not inside.exists() and not inside.is_symlink():
            continue
        if inside.is_symlink() or not inside.is_dir():
            return f"holds {name} that is not a folder"
        for entry in os.scandir(inside):
            if not (entry.name.endswith(".json") and entry.is_file(follow_symlinks=False)):
                return f"is a fixture folder but {name}/ holds {entry.name!r}, which generate does not write"
    return None


def _json_field(path: Path, field: str) -> object:
    """`field` of the JSON object in `path`, if it is a regular file holding one; else None."""
    try:
        document = json.loads(read_regular_file(path))
    except (FixtureError, ValueError, RecursionError):
        return None
    return document.get(field) if isinstance(document, dict) else None


def _holds_the_schema(folder: Path) -> bool:
    """schema/ with the format's manifest schema, any version (a folder whose manifest is damaged)."""
    return any(
        str(_json_field(path, "$id")).startswith(MANIFEST_SCHEMA_ID)
        for path in sorted((folder / "schema").glob("manifest-v*.json"))
    )


# ---------------------------------------------------------------------------------------------
# Staging folders and the swap


def _staging_prefix(folder: Path) -> str:
    return f".{folder.name}.new-"


def remove_stale_staging(folder: Path) -> list[Path]:
    """Remove the staging folders beside `folder` that a killed generate left: exactly of the
    staging name, a real folder holding STAGING_MARKER, of a process that is gone. A folder named
    after a live process (another generate at work) is left alone, and so is anything else."""
    removed = []
    # mkdtemp's names: the prefix, then 8 characters of [a-z0-9_].
    pattern = re.compile(re.escape(_staging_prefix(folder)) + r"(\d+)-[a-z0-9_]{8}")
    for candidate in folder.parent.iterdir():
        match = pattern.fullmatch(candidate.name)
        if match is None or not _is_marked(candidate):
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or _process_exists(pid):
            continue
        shutil.rmtree(candidate, ignore_errors=True)
        removed.append(candidate)
    return removed


def _is_marked(candidate: Path) -> bool:
    """A real folder (not a symlink to one) with the marker a staging folder gets first."""
    try:
        if not stat.S_ISDIR(candidate.lstat().st_mode):
            return False
        return stat.S_ISREG((candidate / STAGING_MARKER).lstat().st_mode)
    except OSError:
        return False


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


def _swap_in(fresh: Path, folder: Path) -> None:
    """Put `fresh` where `folder` is; the old folder ends where `fresh` was, inside the staging
    folder, which the caller removes."""
    if not folder.exists():
        os.rename(fresh, folder)
        return
    if _exchange(fresh, folder):
        return
    retired = fresh.with_name(f"{fresh.name}.old")
    os.rename(folder, retired)
    try:
        os.rename(fresh, folder)
    except BaseException:
        os.rename(retired, folder)
        raise


# ---------------------------------------------------------------------------------------------
# Freshness


def _file_bytes(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its path relative to it (one that is not a regular file, such
    as a FIFO, by a note that differs from any content, and never opened)."""
    files = {}
    for path in folder.rglob("*"):
        if not path.is_dir():
            try:
                files[path.relative_to(folder).as_posix()] = read_regular_file(path)
            except FixtureError as error:
                files[path.relative_to(folder).as_posix()] = error.problem.encode() + b"\0"
    return files


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
