"""Shared pytest fixtures: the committed fixture folder, loaded once. Under CI (the CI variable
set, as .ci/run's caller sets it) hypothesis draws the same examples every run, so that a landing is
decided by the code, not by the luck of a draw; on a developer's machine it keeps exploring."""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import settings

from attention_port.cli import DEFAULT_FIXTURES
from attention_port.golden import reader as fixtures

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

FIXTURES_DIR = DEFAULT_FIXTURES
# Read once for every test module of a process (pytest-xdist's workers each collect every module):
# the attention core's cases, and the layer's and RoPE's, in the manifest's order.
_EVERY_CASE = fixtures.load_fixtures(FIXTURES_DIR, kinds=fixtures.KINDS)
ALL_CASES = [case for case in _EVERY_CASE if case.kind == "attention"]
LAYER_CASES = [case for case in _EVERY_CASE if case.kind in ("layer", "rope")]
VALID_CASES = [case for case in ALL_CASES if not case.expects_error]
INVALID_CASES = [case for case in ALL_CASES if case.expects_error]


def case_params(cases):
    return [pytest.param(case, id=case.id) for case in cases]


def same_figures(a: object, b: object) -> bool:
    """Two verdicts' JSON equal, floats to 1e-12 (the kit's step yardsticks sum |query| |key| in
    their own order)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(same_figures, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_figures(a[k], b[k]) for k in a)
    return a == b


def copy_with_edit(tmp_path: Path, case_id: str, edit: Callable[[dict], None]) -> Path:
    """A copy of the fixtures (tmp_path/fixtures) with one case document changed by `edit`, and the
    manifest's sha256 resealed so that the folder still loads: only the readers' other checks and
    the judges can catch the change."""
    folder = tmp_path / "fixtures"
    shutil.copytree(FIXTURES_DIR, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = next(e for e in manifest["cases"] if e["id"] == case_id)
    path = folder / entry["file"]
    document = json.loads(path.read_text())
    edit(document)
    text = json.dumps(document)
    path.write_text(text)
    entry["sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def interruptible() -> None:
    """A child's preexec_fn: Ctrl-C's SIGINT at its default, as a terminal's foreground process has
    it. A test runner started in the background (`pytest &` in a script) has SIGINT ignored, and its
    children would inherit that and never see the SIGINT a test sends them."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
