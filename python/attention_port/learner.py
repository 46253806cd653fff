"""Run a learner's own attention code in a process of its own, one case at a time.

`attention-port check` (check.py) asks; this module keeps the process that answers. A JavaScript or
TypeScript file runs in the project's Node (node.py) through typescript/src/check.ts; a Python file
runs in a fresh Python through learner_worker.py. Both speak one protocol, described in check.ts:
a hello line when the file is loaded, then one request line on stdin and one answer line per case,
the answers on a pipe of their own so that whatever the learner prints cannot be taken for one.

The learner's code never runs in the harness: a case that hangs past its time-out has its process
killed, a case that kills its process is reported, and either way the next case gets a fresh one.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .node import NodeError, checked_node
from .paths import CHECK_TS, DATA_ROOT
from .ports import decode_tensor

NODE_SUFFIXES = (".ts", ".mts", ".js", ".mjs")
PYTHON_SUFFIXES = (".py",)
LOAD_TIMEOUT = 30.0  # seconds to load the file (Node or Python start, imports, type stripping)


class LearnerError(Exception):
    """The file could not be run at all; the message is one line."""


@dataclass(frozen=True)
class Hello:
    """What the process found in the learner's file."""

    function: str  # the name it calls: attentionSteps / scaledDotProductAttention (or snake_case)
    takes_options: bool
    option_names: frozenset[str] | None  # the options it accepts by name (Python); None: any
    language: str  # "JavaScript" or "Python"


@dataclass(frozen=True)
class Reply:
    """One case's answer. `how` is "steps", "threw", "bad" (not nested numbers), "hang" or "died"."""

    how: str
    steps: dict[str, np.ndarray] | None = None
    message: str = ""
    error_name: str | None = None
    error_kind: str | None = None
    deliberate: bool = True  # threw: raised on purpose (a raise / throw), not a crash in the learner's math
    where: str | None = None  # threw: the line of the learner's file it came from, if known ("line 12")


def command_for(path: Path, fixtures_dir: Path) -> tuple[list[str], str]:
    """The command that runs the worker for this file, and the language it runs."""
    suffix = path.suffix.lower()
    # The worker runs in the repository root: a relative path is the caller's, so it goes absolute.
    common = ["--module", str(path.absolute()), "--fixtures", str(fixtures_dir.absolute())]
    if suffix in NODE_SUFFIXES:
        try:
            node = checked_node()
        except NodeError as error:
            raise LearnerError(str(error)) from None
        return [str(node), str(CHECK_TS), *common], "JavaScript"
    if suffix in PYTHON_SUFFIXES:
        return [sys.executable, "-m", "attention_port.learner_worker", *common], "Python"
    kinds = ", ".join(NODE_SUFFIXES + PYTHON_SUFFIXES)
    raise LearnerError(f"{path}: check runs a {kinds} file, not {suffix or 'a file without a suffix'}")


class LearnerProcess:
    """The process that runs the learner's file; started again after a hang or a crash."""

    def __init__(self, path: Path, fixtures_dir: Path, timeout: float):
        if not path.is_file():
            raise LearnerError(f"{path}: no such file")
        self.path = path
        self.timeout = timeout
        self.command, self.language = command_for(path, fixtures_dir)
        self.process: subprocess.Popen | None = None
        self.answers = -1  # the read end of the answer pipe
        self.buffer = b""
        self.log = None  # what the learner's code printed (stdout and stderr)
        self.hello: Hello | None = None
        self.restart_failed: str | None = None  # why a fresh process after a hang or crash would not load

    def start(self) -> Hello:
        """Start the process and read its hello; LearnerError when the file cannot be run."""
        self.close()
        read_end, write_end = os.pipe()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  closed by close()
        try:
            self.process = subprocess.Popen(
                [*self.command, "--answers-fd", str(write_end)],
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=self.log,
                pass_fds=(write_end,),
                cwd=DATA_ROOT,
            )
        except OSError as error:
            os.close(read_end)
            raise LearnerError(f"could not start {self.command[0]}: {error}") from None
        finally:
            os.close(write_end)
        self.answers, self.buffer = read_end, b""
        limit = max(LOAD_TIMEOUT, self.timeout)
        line = self._read_line(limit)
        if line is None:
            self.close()
            raise LearnerError(f"{self.path} did not finish loading within {limit:g} s")
        if line == "":
            last = self._last_output()
            self.close()
            raise LearnerError(f"{self.path} could not be loaded: {last or 'its process ended'}")
        message = json.loads(line)
        if "fatal" in message:
            self.close()
            raise LearnerError(message["fatal"])
        hello = message["hello"]
        names = hello.get("optionNames")
        self.hello = Hello(
            function=hello["function"],
            takes_options=bool(hello["takesOptions"]),
            option_names=None if names is None else frozenset(names),
            language=self.language,
        )
        return self.hello

    def ask(self, case_id: str, options: bool) -> Reply:
        """Run one case; a hang or a crash is a Reply too, and the next case starts a fresh process."""
        if self.process is None or self.process.poll() is not None:
            if self.restart_failed is None:
                try:
                    self.start()
                except LearnerError as error:  # the file changed, say: this and every later case fail
                    self.restart_failed = f"your code could not be started again: {error}"
            if self.restart_failed is not None:
                return Reply("died", message=self.restart_failed)
        request = json.dumps({"id": case_id, "options": options}) + "\n"
        try:
            self.process.stdin.write(request.encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        line = self._read_line(self.timeout)
        if line is None:
            self.close()
            return Reply("hang", message=f"no answer within {self.timeout:g} s")
        if line == "":
            return self._died()
        answer = json.loads(line)
        if answer.get("id") != case_id:
            self.close()
            return Reply("died", message="the answer was for another case")
        if "threw" in answer:
            threw = answer["threw"]
            return Reply(
                "threw",
                message=threw["message"],
                error_name=threw["name"],
                error_kind=threw.get("kind"),
                deliberate=threw.get("deliberate", True),
                where=threw.get("where"),
            )
        if "bad" in answer:
            return Reply("bad", message=answer["bad"])
        try:
            steps = {name: decode_tensor(entry) for name, entry in answer["steps"].items()}
        except (ValueError, TypeError, KeyError) as error:
            return Reply("bad", message=f"malformed answer ({error})")
        return Reply("steps", steps=steps)

    def _died(self) -> Reply:
        code = self.process.wait() if self.process is not None else None
        last = self._last_output()
        self.close()
        detail = f"exit code {code}" + (f": {last}" if last else "")
        return Reply("died", message=f"the process running your code ended ({detail})")

    def _read_line(self, timeout: float) -> str | None:
        """The next answer line; None after `timeout` seconds, "" when the pipe closed."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.answers], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(self.answers, 1 << 16)
            if not chunk:
                return ""
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")

    def _last_output(self) -> str:
        """The last line the learner's process printed (a Python traceback's last line, say)."""
        if self.log is None:
            return ""
        self.log.seek(0)
        lines = self.log.read().decode("utf-8", "replace").splitlines()
        return next((line.strip() for line in reversed(lines) if line.strip()), "")

    def close(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            if self.process.stdin is not None:
                with contextlib.suppress(OSError):
                    self.process.stdin.close()
            self.process = None
        if self.answers >= 0:
            os.close(self.answers)
            self.answers = -1
        if self.log is not None:
            self.log.close()
            self.log = None
