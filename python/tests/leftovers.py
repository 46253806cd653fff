"""The processes a test run left behind: servers, browsers, learners or Node runs still alive after
the run that started them ended.

A run marks itself with a token in an environment variable that every process it starts inherits
(they copy os.environ); once the run is over, any live process carrying the token that is not the
run itself (nor what started it), or one of its own children still being waited for, was left
behind. conftest.py checks
pytest's run at its end; scripts/test checks the whole suite's (pytest and `npm test`) with

    python python/tests/leftovers.py VARIABLE

which prints each one left, stops it, and exits 1 if there was any. Linux only (/proc); elsewhere
nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

PROC = Path("/proc")


def _parent(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after "(command name)": state, then ppid


def _descendants(root: int, pids: list[int]) -> set[int]:
    parents = {pid: _parent(pid) for pid in pids}
    found, grew = {root}, True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in found} - found
        found |= more
        grew = bool(more)
    return found


def _ancestors(pid: int) -> set[int]:
    """This process's parents up to init (the script that started the check carries the token)."""
    found = set()
    while pid and pid not in found:
        found.add(pid)
        pid = _parent(pid) or 0
    return found


def _carries(pid: int, marker: bytes) -> bool:
    try:
        return marker in (PROC / str(pid) / "environ").read_bytes().split(b"\0")
    except OSError:  # gone, or a zombie
        return False


def _command(pid: int) -> str:
    try:
        words = (PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(word.decode("utf-8", "replace") for word in words if word)[:200]


def left_behind(variable: str, token: str, grace: float = 5.0) -> list[tuple[int, str]]:
    """The live processes (pid, command line) whose environment has variable=token, other than this
    process, its ancestors and its descendants, after waiting up to `grace` seconds for them to end."""
    if not PROC.is_dir():
        return []
    marker = f"{variable}={token}".encode()
    deadline = time.monotonic() + grace
    while True:
        pids = [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]
        ours = _descendants(os.getpid(), pids) | _ancestors(os.getpid())
        found = [(pid, _command(pid)) for pid in pids if pid not in ours and _carries(pid, marker)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def stop(found: list[tuple[int, str]]) -> None:
    for pid, _ in found:
        with contextlib.suppress(OSError):  # it ended meanwhile
            os.kill(pid, signal.SIGKILL)


def main(variable: str) -> int:
    token = os.environ.get(variable)
    if not token:
        print(f"leftovers: ${variable} is not set: nothing to look for", file=sys.stderr)
        return 2
    found = left_behind(variable, token)
    for pid, command in found:
        print(f"left running after the tests (stopped now): pid {pid}: {command}")
    stop(found)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
