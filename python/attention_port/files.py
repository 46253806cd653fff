"""Output files: checked before the work starts, and written so that no reader sees half of one.

Every command that writes a file (verify --json, side-by-side, the benches' reports and plots, the
√d_k plot) checks its path first, so that a long run never ends in a write that cannot happen, and
writes through a scratch file beside the path that one rename puts in place: a write that fails or
is interrupted leaves the old file whole and removes the scratch file. The fixture folder has its
own atomic swap (generate.py), since it is a folder.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def output_problem(path: Path, folder: bool) -> str | None:
    """Why `path` cannot take an output (a folder if `folder`, else a file), worded to follow
    "--out PATH: "; None when it can. Missing folders are not a problem: writers create them."""
    try:
        return _output_problem(path, folder)
    except OSError as error:  # a name longer than the file system allows, a loop of links, ...
        return f"cannot be used as a path ({error.strerror or error})"


def _output_problem(path: Path, folder: bool) -> str | None:
    if blocking := next((p for p in path.parents if p.exists() and not p.is_dir()), None):
        return f"{blocking} is a file, not a folder"
    if folder and path.exists() and not path.is_dir():
        return "is a file, not a folder"
    if not folder and path.is_dir():
        return "is a folder, not a file"
    return None


def save_atomic(path: Path, save: Callable[[Path], object]) -> None:
    """`save(scratch)` writes the file to a scratch path beside `path` (same suffix, so that a
    writer that picks its format by the suffix, as matplotlib does, picks the same one); then one
    rename puts it in place. Creates the missing folders above `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        save(scratch)
        os.replace(scratch, path)
    except BaseException:
        scratch.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, text: str) -> None:
    """`text` (UTF-8) into `path`, through save_atomic."""
    save_atomic(path, lambda scratch: scratch.write_text(text, encoding="utf-8"))
