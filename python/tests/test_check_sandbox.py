"""`attention-port check` runs a learner's code in a sandbox, and says every misbehaviour in one line
on the case that caused it; `check --watch` checks again on each save.

The hostile learners under learner_files/ (hostile-*.mjs, hostile_*.py) each try one thing: read the
expected values from the fixtures, write an answer to check's answer channel, hold 6 GiB, leave a
process running, or return something that hurts whoever reads it.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR, interruptible

from attention_port import cli
from attention_port.harness.node import checked_node
from attention_port.learner import check
from attention_port.learner import protocol as learner_protocol

LEARNER_FILES = Path(__file__).parent / "learner_files"
REPO_ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30


def run_check(name: str, **options) -> tuple[int, str]:
    lines: list[str] = []
    code = check.check(LEARNER_FILES / name, FIXTURES_DIR, say=lines.append, **options)
    return code, "\n".join(lines)


# ---- the learner's code cannot read the expected values -------------------------------------------


@pytest.mark.parametrize(
    ("name", "told"),
    [
        # through a path on its command line, ./fixtures where it runs, or the repository's known path
        (
            "hostile-fixtures-argv.mjs",
            "does not let your code read /no/fixtures/on/the/command/line/manifest.json",
        ),
        ("hostile-fixtures-cwd.mjs", "does not let your code read fixtures/manifest.json"),
        ("hostile-fixtures-known-path.mjs", f"does not let your code read {FIXTURES_DIR}/manifest.json"),
        ("hostile_reads_fixtures.py", f"does not let your code read {FIXTURES_DIR}/manifest.json"),
    ],
)
def test_a_learner_cannot_copy_the_expected_values_from_the_fixtures(name, told):
    code, text = run_check(name)
    assert code == 1, text
    assert "level 1 of 13: the tutorial example — 3 of 3 cases fail" in text, text
    # Node's refusal comes on the learner's line that read, and is not a throw of the learner's own;
    # the Python learner catches the hook's PermissionError and raises it again, on purpose.
    if name.endswith(".mjs"):
        said = "your code crashed at line 8 of hostile-fixtures.mjs: Error"
    else:
        said = "your function threw PermissionError"
    assert f"  fail tutorial_seq3_dk4: {said}: check's sandbox {told}" in text, text


def test_the_learners_process_is_told_no_fixture_path_and_runs_in_a_folder_of_its_own(tmp_path):
    path = tmp_path / "where.py"
    path.write_text(
        "import os, sys\n\n\n"
        "def scaled_dot_product_attention(query, key, value):\n"
        "    raise RuntimeError(repr([os.getcwd(), sys.argv, dict(os.environ)]))\n"
    )
    lines: list[str] = []
    check.check(path, FIXTURES_DIR, say=lines.append)
    said = next(
        line
        for line in lines
        if line.startswith("  fail tutorial_seq3_dk4: your function threw RuntimeError")
    )
    assert "fixtures" not in said, said  # not in its arguments, its environment or its folder's name
    assert f"'{REPO_ROOT}'" not in said, said  # it does not run in the repository


# ---- only what the function returns is an answer --------------------------------------------------


@pytest.mark.parametrize("name", ["hostile-writes-answers.mjs", "hostile_writes_answers.py"])
def test_what_the_learners_code_writes_to_the_answer_channel_is_not_an_answer(name):
    # The file returns zeros and writes the right answer for tutorial_seq3_dk4 to the answer channel.
    code, text = run_check(name)
    assert code == 1, text
    told = "your code wrote to check's answer channel: only what your function returns is an answer"
    assert f"  fail tutorial_seq3_dk4: {told}\n" in text, text
    assert "level 1 of 13: the tutorial example — 3 of 3 cases fail" in text, text


# ---- memory is bounded ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["hostile-holds-memory.mjs", "hostile_holds_memory.py"])
def test_a_learner_holding_6_gib_is_stopped_by_the_memory_bound(name):
    code, text = run_check(name, memory=GIB, timeout=60)
    assert code == 1, text
    told = "your code ran out of memory: check lets it use 1 GiB (--memory raises that)"
    assert f"  fail tutorial_seq3_dk4: {told}" in text, text
    # The largest process check ever waited for stayed under the bound (ru_maxrss is in KiB).
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1.25 * GIB / 1024


# ---- no process outlives check -------------------------------------------------------------------


def _sleeping(seconds: str) -> list[int]:
    """The pids of `sleep SECONDS` processes (the hostile learners pick lengths nothing else uses)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\0{seconds}\0".encode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="looks for processes in /proc")
@pytest.mark.parametrize(
    ("name", "seconds", "where"),
    [
        ("hostile-spawns.mjs", "297.5", "line 7 of hostile-spawns.mjs: Error"),
        ("hostile_spawns.py", "296.5", "line 11 of hostile_spawns.py: PermissionError"),
    ],
)
def test_a_process_the_learner_starts_does_not_outlive_check(name, seconds, where):
    try:
        code, text = run_check(name)
        assert code == 1, text
        # the sandbox's refusal, on the learner's line that tried: not a throw of its own
        crashed = f"  fail tutorial_seq3_dk4: your code crashed at {where}"
        assert f"{crashed}: check's sandbox does not let your code start a process" in text, text
        assert _sleeping(seconds) == []
    finally:
        for pid in _sleeping(seconds):
            os.kill(pid, signal.SIGKILL)


# ---- misbehaviour is one line, on the case that caused it --------------------------------------


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("hostile-rejects.mjs", "your function threw Error: not written yet (line 3 of hostile-rejects.mjs)"),
        (
            "hostile-throwing-getter.mjs",
            "reading the output your function returned threw Error: row 0 is not ready",
        ),
        (
            "hostile-throwing-tostring.mjs",
            "your function threw object: (its message or toString threw when read)",
        ),
        (
            "hostile-proxy.mjs",
            "reading what scaledDotProductAttention returned threw Error: read denied by the proxy",
        ),
        ("hostile-cyclic.mjs", "output is nested more than 64 deep (an array that holds itself?)"),
        ("hostile-deep.mjs", "output is nested more than 64 deep (an array that holds itself?)"),
        (
            "hostile-huge-shape.mjs",
            "output.shape [1e+300, 1e+300] is not a list of sizes (whole numbers >= 0, at most 64)",
        ),
        (
            "hostile-stray-rejection.mjs",
            "your function threw Error: left behind (thrown outside your function's call: a promise it"
            " did not await, or a timer) (line 6 of hostile-stray-rejection.mjs)",
        ),
        ("hostile_cyclic.py", "output is nested more than 64 deep (a list that holds itself?)"),
        (
            "hostile_raising_array.py",
            "reading the output your function returned raised RuntimeError: the output is not ready",
        ),
    ],
)
def test_a_returned_value_that_hurts_its_reader_is_one_line_on_its_own_case(name, line):
    code, text = run_check(name, timeout=5)
    assert code == 1, text
    for case_id in ("tutorial_seq3_dk4", "tutorial_seq4_dk8"):
        assert f"  fail {case_id}: {line}\n" in text + "\n", text
    assert "process running your code ended" not in text, text


def test_a_top_level_await_that_never_settles_is_said_in_one_line():
    code, text = run_check("hostile-await-forever.mjs")
    assert code == 2
    path = LEARNER_FILES / "hostile-await-forever.mjs"
    assert text == f"error: {path} did not finish loading: a top-level await in it never settles"


@pytest.mark.parametrize(
    ("option", "told"),
    [
        (["--timeout", "1e10"], "--timeout must be at most 86400 seconds (a day), got 1e+10"),
        (["--memory", "1e10GiB"], "--memory takes a size such as 4GiB or 1536MiB, got '1e10GiB'"),
        (["--memory", "2048"], "--memory takes a size such as 4GiB or 1536MiB, got '2048'"),
        (
            ["--memory", "64MiB"],
            "--memory must be at least 1 GiB (Node alone needs about 600 MiB), got 64MiB",
        ),
        (["--memory", "100000000GiB"], "--memory 100000000GiB is more than this machine has ("),
    ],
)
def test_an_absurd_option_is_a_wrong_command_line_in_one_line(option, told, capsys):
    starter = str(REPO_ROOT / "python/examples/my_attention.py")
    assert cli.main(["check", starter, *option]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {told}"), captured.err
    assert captured.err.count("\n") == 1


# ---- check --watch ------------------------------------------------------------------------------------


def _read_until(process: subprocess.Popen, text: str, seen: bytearray, seconds: float = 90) -> str:
    """The output up to the next `text` (from where the last call stopped), or a failed test."""
    deadline = time.monotonic() + seconds
    start = len(seen)
    while text.encode() not in seen[start:]:
        ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(process.stdout.fileno(), 1 << 16) if ready else b""
        if not chunk:
            pytest.fail(f"no {text!r} in the output:\n{bytes(seen).decode()}")
        seen += chunk
    end = seen.index(text.encode(), start) + len(text)
    return bytes(seen[start:end]).decode()


def test_watch_checks_again_on_save_with_the_first_failing_level_first_and_ctrl_c_exits_0(tmp_path):
    path = tmp_path / "my_attention.py"
    shutil.copy(REPO_ROOT / "python/examples/my_attention.py", path)  # fails at batch and heads
    process = subprocess.Popen(
        [sys.executable, "-m", "attention_port", "check", "--watch", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=interruptible,
    )
    seen = bytearray()
    try:
        first = _read_until(process, "Watching", seen)
        assert first.startswith(check.CLEAR_SCREEN), first
        failing = first.index("level 8 of 13: batch and heads — ")
        assert failing < first.index("level 1 of 13: the tutorial example — 3 of 3 cases pass"), first
        # Saved again, with the scale forgotten: now the first level fails.
        source = path.read_text()
        assert "/ np.sqrt(d_k)" in source
        path.write_text(source.replace("/ np.sqrt(d_k)", ""))
        second = _read_until(process, "Watching", seen)
        assert check.CLEAR_SCREEN in second, second
        assert "Stopped at level 1 of 13: the tutorial example — 3 of 3 cases fail." in second, second
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# ---- one protocol, two twins -------------------------------------------------------------------------


def test_the_typescript_protocol_module_is_the_twin_of_the_python_one():
    script = (
        "const p = await import(process.argv[1]); console.log(JSON.stringify({secretHex: p.SECRET_HEX,"
        " steps: p.STEP_NAMES, options: p.OPTION_NAMES, line: p.answerLine('s', '{}'),"
        " threwFields: p.THREW_FIELDS, threw: p.threwAnswer('c', {name: 'TypeError', message: 'm',"
        " kind: null, deliberate: false, where: 'line 3 of x.ts'})}))"
    )
    protocol = REPO_ROOT / "typescript" / "runners" / "learner-protocol.ts"
    finished = subprocess.run(
        [str(checked_node()), "--input-type=module", "-e", script, protocol.as_uri()],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    typescript = json.loads(finished.stdout)
    assert typescript["secretHex"] == learner_protocol.SECRET_HEX
    assert tuple(typescript["steps"]) == learner_protocol.STEP_NAMES
    assert tuple(typescript["options"]) == learner_protocol.OPTION_NAMES
    assert typescript["line"].encode() == learner_protocol.answer_line("s", {})
    # a "threw" answer: the same fields, in the same order, deliberate and where among them
    assert tuple(typescript["threwFields"]) == learner_protocol.THREW_FIELDS
    threw = {
        "name": "TypeError",
        "message": "m",
        "kind": None,
        "deliberate": False,
        "where": "line 3 of x.ts",
    }
    python = learner_protocol.threw_answer("c", **threw)
    assert json.loads(typescript["threw"]) == python == {"id": "c", "threw": threw}
    assert list(json.loads(typescript["threw"])["threw"]) == list(python["threw"]) == list(threw)
