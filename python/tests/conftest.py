"""Shared pytest fixtures: the committed fixture folder, loaded once. Under CI (the CI variable
set, as .ci/run's caller sets it) hypothesis draws the same examples every run, so that a landing is
decided by the code, not by the luck of a draw; on a developer's machine it keeps exploring."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

import leftovers
import pytest
from hypothesis import settings

from attention_port.cli import DEFAULT_FIXTURES
from attention_port.golden import generate
from attention_port.golden import reader as fixtures
from attention_port.learner import check

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

# Reading the committed folder again costs about half a second of CPU (JSON, then the tensors), and
# the suite did it about 300 times: check and verify read it on every in-process run, and modules
# read it at import. So, in the test processes, `reader.load_fixtures` of the committed folder hands
# out the cases read above, each call with inputs and params of its own (deep copies, as a fresh
# read gives: a port that changes its inputs in place reaches no later call). Any other folder, a
# case id the folder lacks, or a manifest changed since (its bytes are compared) goes to the real
# reader, which the tests of the reader itself call on folders of their own. conformance.py keeps
# the real reader too: its tests hold each load_cases to fresh inputs by reading again.
_READ_FIXTURES = fixtures.load_fixtures
_COMMITTED = (FIXTURES_DIR.resolve(), (FIXTURES_DIR / "manifest.json").read_bytes())


def _committed_fixtures(folder, case_ids=None, kinds=("attention",), *, schema=True):
    try:
        committed = Path(folder).resolve() == _COMMITTED[0]
        committed = committed and (_COMMITTED[0] / "manifest.json").read_bytes() == _COMMITTED[1]
    except OSError:
        committed = False
    wanted = None if case_ids is None else set(case_ids)
    if not committed or (wanted is not None and wanted - {case.id for case in _EVERY_CASE}):
        return _READ_FIXTURES(folder, case_ids, kinds, schema=schema)
    kinds = set(kinds)
    return [
        dataclasses.replace(case, inputs=copy.deepcopy(case.inputs), params=copy.deepcopy(case.params))
        for case in _EVERY_CASE
        if case.kind in kinds and (wanted is None or case.id in wanted)
    ]


fixtures.load_fixtures = _committed_fixtures
check.load_fixtures = _committed_fixtures  # imported by name there

# verify compares every case it loads with what generate would write (generate.stale_cases: the
# table's inputs drawn and serialized again, about 1.3 s of CPU), on every in-process run. For the
# committed folder the answer is the same each time in a process (test_fixture_files holds the folder
# fresh), so it is worked out once per set of cases; a folder of a test's own, a changed manifest, or
# a table or renderer a test swapped in is worked out afresh.
_STALE_CASES = generate.stale_cases
_STALE_ANSWERS: dict[tuple, list[str]] = {}


def _stale_once(on_disk):
    on_disk = list(on_disk)
    try:
        committed = (_COMMITTED[0] / "manifest.json").read_bytes() == _COMMITTED[1] and all(
            Path(case.path).resolve().is_relative_to(_COMMITTED[0]) for case in on_disk
        )
    except OSError:
        committed = False
    if not committed:
        return _STALE_CASES(on_disk)
    key = (
        tuple(case.id for case in on_disk),
        id(generate.FIXTURE_CASES),
        generate.render_case,
        generate.case_document,
    )
    if key not in _STALE_ANSWERS:
        _STALE_ANSWERS[key] = _STALE_CASES(on_disk)
    return list(_STALE_ANSWERS[key])


generate.stale_cases = _stale_once


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


# Every process the run starts inherits this (leftovers.py says how it is found again at the end).
LEFTOVER_VARIABLE = "ATTENTION_PORT_PYTEST_RUN"


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the run itself, not one of pytest-xdist's workers
        os.environ[LEFTOVER_VARIABLE] = f"{os.getpid()}-{time.time_ns()}"


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if a process it started is still alive at its end (a server, a browser, a Node
    run), naming each; each is stopped, so that it does not outlive the run either."""
    if hasattr(session.config, "workerinput"):
        return
    found = leftovers.left_behind(LEFTOVER_VARIABLE, os.environ[LEFTOVER_VARIABLE])
    if found:
        leftovers.stop(found)
        session.config.stash[_LEFT_BEHIND] = found
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_LEFT_BEHIND = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    for pid, command in config.stash.get(_LEFT_BEHIND, []):
        terminalreporter.write_line(
            f"left running after the tests (stopped now): pid {pid}: {command}", red=True
        )
