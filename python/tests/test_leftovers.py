"""leftovers.py, which fails a test run that leaves a process running: it finds a process the run
started and left behind, and only those."""

from __future__ import annotations

import os
import subprocess
import sys

import leftovers
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_process_left_behind_is_found_and_stopped_and_one_still_waited_for_is_not():
    variable, token = "ATTENTION_PORT_LEFTOVERS_TEST", f"{os.getpid()}-probe"
    env = {**os.environ, variable: token}
    # The shell starts `sleep` in the background and exits: the sleep is an orphan, as a server is
    # whose starter was stopped without it.
    orphan = subprocess.run(
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(orphan.stdout)
    child = subprocess.Popen(["sleep", "60"], env=env)  # still this process's child: not left behind
    try:
        found = leftovers.left_behind(variable, token, grace=0.5)
        assert [p for p, _ in found] == [pid], found
        assert "sleep 60" in found[0][1]
        leftovers.stop(found)
        assert leftovers.left_behind(variable, token, grace=5.0) == []
        assert leftovers.left_behind(variable, "another-run", grace=0) == []
    finally:
        child.kill()
        child.wait()
        leftovers.stop([(pid, "")])


def test_the_command_line_check_exits_1_naming_what_it_stopped():
    variable, token = "ATTENTION_PORT_LEFTOVERS_TEST", f"{os.getpid()}-cli"
    env = {**os.environ, variable: token}
    subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 &"], env=env, check=True)
    run = subprocess.run(
        [sys.executable, leftovers.__file__, variable], env=env, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.startswith("left running after the tests (stopped now): pid "), run.stdout
    assert "sleep 60" in run.stdout
    again = subprocess.run(
        [sys.executable, leftovers.__file__, variable], env=env, capture_output=True, text=True, timeout=60
    )
    assert (again.returncode, again.stdout) == (0, ""), again.stdout + again.stderr
