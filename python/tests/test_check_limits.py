"""`attention-port check` runs a learner's code within limits (time, memory, processes, output) and
says every misbehaviour in one line on the case that caused it; what the code prints is shown under
the case that printed it; `check --watch` checks again on each save. check is not a security
sandbox: these are the bounds on what a bug can do, not defences against a program written to
get round them.
"""

from __future__ import annotations

import itertools
import os
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
from attention_port.golden import cases
from attention_port.learner import check
from attention_port.learner.runner import PRINTED_LIMIT, RUNTIME_ADDRESS_SPACE

LEARNER_FILES = Path(__file__).parent / "learner_files"
REPO_ROOT = Path(__file__).resolve().parents[2]
GIB = 1 << 30
TOTAL = len(cases.CORE_LEVELS)  # the attention core's levels (contract/levels.json)


def run_check(name: str, **options) -> tuple[int, str]:
    lines: list[str] = []
    path = LEARNER_FILES / name
    code = check.check(path, FIXTURES_DIR, say=lines.append, say_error=lines.append, **options)
    return code, "\n".join(lines)


def test_the_learners_code_runs_in_an_empty_folder_of_its_own_removed_afterwards(tmp_path):
    path = tmp_path / "where.py"
    path.write_text(
        "import os\n\n\n"
        "def scaled_dot_product_attention(query, key, value):\n"
        "    open('stray.txt', 'w').close()  # a relative write lands in check's folder\n"
        "    raise RuntimeError(repr([os.getcwd(), sorted(os.listdir())]))\n"
    )
    lines: list[str] = []
    check.check(path, FIXTURES_DIR, say=lines.append)
    said = next(line for line in lines if line.startswith("  fail tutorial_seq3_dk4: your function threw"))
    folder = said.split("RuntimeError: ['", 1)[1].split("'", 1)[0]
    assert "attention-port-check-" in folder and "['stray.txt']" in said, said
    assert not Path(folder).exists()  # removed with the process
    assert not (REPO_ROOT / "stray.txt").exists() and not (tmp_path / "stray.txt").exists()


# ---- memory is bounded ------------------------------------------------------------------------------


MEMORY_TOLD = "your code ran out of memory: check lets your code use {} (--memory raises that)"


def _peak_of_check(name: str, memory: int) -> tuple[str, int]:
    """check's report on a learner file, and the peak resident memory of the processes it ran
    (in bytes), measured in a Python of its own so that no other test's processes count."""
    script = (
        "import resource, sys; from pathlib import Path; from attention_port.learner import check\n"
        "check.check(Path(sys.argv[1]), Path(sys.argv[2]), memory=int(sys.argv[3]), timeout=60)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", script, str(LEARNER_FILES / name), str(FIXTURES_DIR), str(memory)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    *report, peak = finished.stdout.splitlines()
    return "\n".join(report), int(peak)


@pytest.mark.parametrize(
    "name",
    [
        "holds-memory.mjs",  # 6 GiB of Buffers, outside V8's heap
        "holds_memory.py",  # 6 GiB of numpy arrays
        "maps_memory.py",  # 3 GiB of shared anonymous mappings a case, which RLIMIT_DATA does not count
    ],
)
def test_a_learner_holding_more_than_its_memory_is_stopped_by_the_bound(name):
    text, peak = _peak_of_check(name, GIB)
    assert f"  fail tutorial_seq3_dk4: {MEMORY_TOLD.format('1 GiB')}" in text, text
    # Every process check ran stayed under the bound: --memory and what the runtime maps for itself.
    language = "JavaScript" if name.endswith(".mjs") else "Python"
    assert peak < GIB + RUNTIME_ADDRESS_SPACE[language], peak


@pytest.mark.parametrize("name", ["allocates-on-load.mjs", "allocates_on_load.py"])
def test_running_out_of_memory_while_loading_says_the_memory_limit(name):
    code, text = run_check(name)
    assert code == 2
    path = LEARNER_FILES / name
    assert text == f"error: {path} could not be loaded: {MEMORY_TOLD.format('2 GiB')}", text


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


def _still_sleeping_after(seconds: str, grace: float) -> list[int]:
    """The `sleep SECONDS` processes still there after up to `grace` seconds: a process killed an
    instant ago can stay in /proc for a moment before the kernel ends it."""
    deadline = time.monotonic() + grace
    while (found := _sleeping(seconds)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="looks for processes in /proc")
@pytest.mark.parametrize(("name", "seconds"), [("spawns.mjs", "297.5"), ("spawns.py", "296.5")])
def test_a_process_the_learner_starts_does_not_outlive_check(name, seconds):
    try:
        code, text = run_check(name)
        if name.endswith(".mjs"):
            # Node's --permission refuses it, on the learner's line that tried: not a throw of its own
            assert code == 1, text
            crashed = "  fail tutorial_seq3_dk4: your code crashed at line 7 of spawns.mjs: Error"
            assert f"{crashed}: check does not let your code start a process" in text, text
        else:  # Python starts it, in check's process group, which check kills at the end
            assert f"level 1 of {TOTAL}: the tutorial example — 3 of 3 cases pass" in text, text
        assert _still_sleeping_after(seconds, 3.0) == []
    finally:
        for pid in _sleeping(seconds):
            os.kill(pid, signal.SIGKILL)


# ---- misbehaviour is one line, on the case that caused it --------------------------------------


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("rejects.mjs", "your function threw Error: not written yet (line 3 of rejects.mjs)"),
        (
            "throwing-getter.mjs",
            "reading the output your function returned threw Error: row 0 is not ready",
        ),
        ("cyclic.mjs", "output is nested more than 64 deep (an array that holds itself?)"),
        ("deep.mjs", "output is nested more than 64 deep (an array that holds itself?)"),
        (
            "huge-shape.mjs",
            "output.shape [1e+300, 1e+300] is not a list of sizes (whole numbers >= 0, at most 64)",
        ),
        (
            "stray-rejection.mjs",
            "your function threw Error: left behind (thrown outside your function's call: a promise it"
            " did not await, or a timer) (line 6 of stray-rejection.mjs)",
        ),
        ("cyclic.py", "output is nested more than 64 deep (a list that holds itself?)"),
        (
            "raising_array.py",
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
    code, text = run_check("await-forever.mjs")
    assert code == 2
    path = LEARNER_FILES / "await-forever.mjs"
    assert text == f"error: {path} did not finish loading: a top-level await in it never settles"


@pytest.mark.parametrize(
    ("option", "told"),
    [
        (["--timeout", "1e10"], "--timeout must be at most 86400 seconds (a day), got 1e+10"),
        (["--memory", "1e10GiB"], "--memory takes a size such as 4GiB or 1536MiB, got '1e10GiB'"),
        (["--memory", "2048"], "--memory takes a size such as 4GiB or 1536MiB, got '2048'"),
        (
            ["--memory", "64MiB"],
            "--memory must be at least 1 GiB, got 64MiB",
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


# ---- what the learner's code prints is shown under its case ----------------------------------------


@pytest.mark.parametrize("name", ["prints.mjs", "prints.py"])
def test_what_the_learners_code_prints_is_shown_under_the_case_that_printed_it(name):
    code, text = run_check(name)
    assert code == 0, text
    assert "  your code printed while loading:\n  | loaded\n" in text, text
    for case_id, rows in (("tutorial_seq3_dk4", 3), ("tutorial_seq4_dk8", 4)):
        said = f"      your code printed:\n      | query has {rows} rows\n      | key has {rows} rows\n"
        assert f"  pass {case_id}\n{said}" in text, text


@pytest.mark.parametrize("name", ["prints-escapes.mjs", "prints_escapes.py"])
def test_terminal_control_characters_the_learner_prints_are_made_visible(name):
    code, text = run_check(name)
    assert code == 0, text
    assert "      | \\x1b[2J\\x1b[31mred\\x1b[0m\\x0dover\n" in text, text
    assert "\x1b" not in text and "\r" not in text


@pytest.mark.parametrize("name", ["prints-megabytes.mjs", "prints_megabytes.py"])
def test_megabytes_the_learner_prints_are_cut_and_the_report_says_so(name):
    code, text = run_check(name)
    assert code == 0, text  # the run goes on: the learner's process is never blocked on its output
    after = text.split("  pass tutorial_seq3_dk4\n", 1)[1].splitlines()
    first = "\n".join(itertools.takewhile(lambda line: line.startswith("      "), after))
    assert first.startswith("      your code printed:\n      | 0 xxx"), first
    assert first.count("\n      | ") == check.PRINTED_LINES, first
    assert first.endswith(
        f"      (cut: your code printed {30_000 * 100:,} bytes here; check shows the first"
        f" {check.PRINTED_LINES} lines and {PRINTED_LIMIT} bytes)"
    ), first
    assert len(text) < 30_000, len(text)


# ---- errors go to stderr --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "told"),
    [
        ("/nonexistent.ts", "/nonexistent.ts: no such file"),
        (
            "/etc/passwd",
            "/etc/passwd: check runs a .ts, .mts, .js, .mjs, .py file, not a file without a suffix",
        ),
        ("{tmp}/somedir.ts", "{tmp}/somedir.ts: is a folder, not a file"),
    ],
)
def test_a_path_check_cannot_run_is_an_error_on_stderr(path, told, tmp_path, capsys):
    (tmp_path / "somedir.ts").mkdir()
    assert cli.main(["check", path.format(tmp=tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: {told.format(tmp=tmp_path)}\n"


def test_check_help_says_it_bounds_and_is_not_a_sandbox(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check", "--help"])
    said = " ".join(capsys.readouterr().out.split())
    assert "bounds the time, memory, processes and output of your code" in said, said
    assert "not a security sandbox: your code runs as you" in said, said


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
        failing = first.index(f"level 8 of {TOTAL}: batch and heads — ")
        assert failing < first.index(f"level 1 of {TOTAL}: the tutorial example — 3 of 3 cases pass"), first
        # Saved again, with the scale forgotten: now the first level fails.
        source = path.read_text()
        assert "/ np.sqrt(d_k)" in source
        path.write_text(source.replace("/ np.sqrt(d_k)", ""))
        second = _read_until(process, "Watching", seen)
        assert check.CLEAR_SCREEN in second, second
        assert f"Stopped at level 1 of {TOTAL}: the tutorial example — 3 of 3 cases fail." in second, second
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
