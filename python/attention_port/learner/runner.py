"""Run a learner's own attention code in a sandboxed process of its own, one case at a time.

`attention-port check` (check.py) asks; this module keeps the process that answers. A JavaScript or
TypeScript file runs in the project's Node (node.py) through typescript/runners/check.ts; a Python file
runs in a fresh Python through learner_worker.py. Both speak learner_protocol.py's protocol.

The learner's code never runs in the harness: a case that hangs past its time-out has its process
killed, a case that kills its process is reported, and either way the next case gets a fresh one.
The process is a sandbox, so that the learner's code can neither read the answers nor hurt the
machine or check:
  - it is given each case's inputs and options, never the fixtures' path: not in its arguments,
    its environment or its working folder (an empty folder of its own, removed at the end);
  - it may read only what its code needs, never the fixtures or the repository's .git: Node's
    permission model (--permission, with --allow-fs-read for each folder the learner's module and
    check.ts import, no child processes, no workers, no writes), or in Python learner_worker.py's
    audit hook;
  - its memory is bounded (--memory, 2 GiB by default): the OS limit on its data (RLIMIT_DATA,
    which counts what a process writes to, so WebAssembly's large reserved memories still work,
    where RLIMIT_AS would stop Node from starting), and V8's heap limit under it;
  - it runs in a session (a process group) of its own, killed as a whole when its run ends;
  - its answers carry a secret it was given before the learner's code was loaded
    (learner_protocol.py), so only what the function returns is an answer.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_port.fixtures.reader import FixtureCase
from attention_port.harness.node import NodeError, checked_node
from attention_port.harness.runners import decode_tensor
from attention_port.learner import protocol as learner_protocol
from attention_port.paths import CHECK_TS, FIXTURES, PACKAGE_DIR, REPO_ROOT

NODE_SUFFIXES = (".ts", ".mts", ".js", ".mjs")
PYTHON_SUFFIXES = (".py",)
LOAD_TIMEOUT = 30.0  # seconds to load the file (Node or Python start, imports, type stripping)
MIB = 1 << 20
DEFAULT_MEMORY = 2048 * MIB
MINIMUM_MEMORY = 1024 * MIB  # Node itself needs about 600 MiB of data to start
# Environment variables the learner's process keeps; anything else (a path to the fixtures, say)
# stays with the harness.
KEPT_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH", "PYTHONIOENCODING")
# What a process prints or raises when it runs out of memory (V8, glibc, numpy, C++, Python).
OUT_OF_MEMORY = re.compile(
    r"out of memory|Failed to allocate memory|allocation failed|Cannot allocate memory|std::bad_alloc"
    r"|Unable to allocate|MemoryError"
)
# Module specifiers in JavaScript or TypeScript source: import/export ... from "x", import "x",
# import("x"), require("x"). A computed specifier is not seen, and its file stays unreadable.
SPECIFIER = re.compile(r"""(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["']([^"'\n]+)["']""")


def format_memory(size: int) -> str:
    return f"{size / (1 << 30):g} GiB" if size % (1 << 30) == 0 else f"{size // MIB} MiB"


def parse_memory(text: str) -> int:
    """--memory's size in bytes: a number of MiB or GiB (2GiB, 512MiB, 1.5GiB), at least what Node
    needs to start and at most what this machine has; ValueError of one line otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(MiB|GiB)\s*", text, flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"--memory takes a size such as 4GiB or 1536MiB, got {text!r}")
    size = int(float(match[1]) * (MIB if match[2].lower() == "mib" else 1 << 30))
    if size < MINIMUM_MEMORY:
        raise ValueError(
            f"--memory must be at least {format_memory(MINIMUM_MEMORY)} (Node alone needs about 600 MiB),"
            f" got {text}"
        )
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # a system that does not say: no upper bound
        total = None
    if total is not None and size > total:
        raise ValueError(f"--memory {text} is more than this machine has ({total / (1 << 30):.1f} GiB)")
    return size


class LearnerError(Exception):
    """The file could not be run at all; the message is one line."""


@dataclass(frozen=True)
class Hello:
    """What the process found in the learner's file."""

    function: str | None  # the name it calls: attentionSteps / scaledDotProductAttention (or snake_case)
    takes_options: bool
    option_names: frozenset[str] | None  # the options it accepts by name (Python); None: any
    language: str  # "JavaScript" or "Python"
    layer: str | None = None  # its multiHeadAttention / multi_head_attention, if it has one
    rotary: str | None = None  # its applyRotary / apply_rotary, if it has one


@dataclass(frozen=True)
class Reply:
    """One case's answer. `how` is "steps", "threw", "bad" (not nested numbers), "hang" or "died"."""

    how: str
    steps: dict[str, np.ndarray] | None = None
    message: str = ""
    error_name: str | None = None
    error_kind: str | None = None
    deliberate: bool = True  # threw: raised on purpose (a raise / throw), not a crash in the learner's math
    where: str | None = None  # threw: the line of the learner's code it came from ("line 12 of x.py")


def hidden_paths(fixtures_dir: Path) -> tuple[Path, ...]:
    """What the learner's code may never read: the fixtures in use, the package's own (in the checkout
    or shipped in the wheel), and the checkout's .git (whose objects hold every fixture ever committed)."""
    return tuple({fixtures_dir.resolve(), FIXTURES.resolve(), (REPO_ROOT / ".git").resolve()})


def without(folder: Path, hidden: tuple[Path, ...]) -> list[Path]:
    """Paths that together cover `folder` except the hidden ones: the folder itself when nothing
    hidden lies inside it, else each entry of it, the same way down to the hidden path."""
    folder = folder.resolve()
    if any(folder == h or folder.is_relative_to(h) for h in hidden):
        return []
    if not any(h.is_relative_to(folder) for h in hidden):
        return [folder]
    covered: list[Path] = []
    with contextlib.suppress(OSError):
        for entry in sorted(folder.iterdir()):
            covered += (
                without(entry, hidden)
                if entry.is_dir() and not entry.is_symlink()
                else ([] if entry.resolve() in hidden else [entry])
            )
    return covered


def node_imports(module: Path) -> list[Path]:
    """Every file a JavaScript or TypeScript module imports by a written path, and theirs, with the
    nearest node_modules folder above each (its packages, and what a module reads of them: simd.ts
    reads the version of the compiler that built its kernel)."""
    seen: dict[Path, None] = {}
    pending = [module.resolve()]
    while pending:
        current = pending.pop()
        if current in seen or not current.is_file():
            continue
        seen[current] = None
        try:
            source = current.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for specifier in SPECIFIER.findall(source):
            if specifier.startswith("file://"):
                specifier = specifier[len("file://") :]
            if specifier.startswith((".", "/")):
                pending.append((current.parent / specifier).resolve())
    packages = {
        next((f / "node_modules" for f in file.parents if (f / "node_modules").is_dir()), None): None
        for file in seen
    }
    return [*seen, *(folder for folder in packages if folder is not None)]


def readable_paths(path: Path, language: str, fixtures_dir: Path) -> list[Path]:
    """What the learner's process may read, none of it the fixtures: for Node, the folder of each file
    that check.ts and the learner's module import (and node_modules where they import packages); for
    Python, the learner's folder, this package and sys.path (Python's library, site-packages)."""
    hidden = hidden_paths(fixtures_dir)
    if language == "JavaScript":
        files = node_imports(CHECK_TS) + node_imports(path)
        folders = [f if f.is_dir() else f.parent for f in files]
    else:
        # This package by its own folder too: an editable install finds it by an import hook, not sys.path.
        folders = [path.resolve().parent, PACKAGE_DIR, *(Path(p) for p in sys.path if p and Path(p).is_dir())]
    covered: dict[Path, None] = {}
    for folder in folders:
        for allowed in without(folder, hidden):
            covered[allowed] = None
    return list(covered)


def command_for(path: Path, fixtures_dir: Path, memory: int) -> tuple[list[str], str]:
    """The command that runs the worker for this file, and the language it runs. It names no
    fixture: each case's inputs come on stdin."""
    suffix = path.suffix.lower()
    module = ["--module", str(path.absolute())]  # the worker runs in a folder of its own
    if suffix in NODE_SUFFIXES:
        try:
            node = checked_node()
        except NodeError as error:
            raise LearnerError(str(error)) from None
        reads = [f"--allow-fs-read={p}" for p in readable_paths(path, "JavaScript", fixtures_dir)]
        heap = f"--max-old-space-size={memory * 3 // 4 // MIB}"  # V8's own limit, under the OS one
        return [str(node), "--permission", *reads, heap, str(CHECK_TS), *module], "JavaScript"
    if suffix in PYTHON_SUFFIXES:
        reads = [f"--read={p}" for p in readable_paths(path, "Python", fixtures_dir)]
        return [sys.executable, "-m", "attention_port.learner.worker", *module, *reads], "Python"
    kinds = ", ".join(NODE_SUFFIXES + PYTHON_SUFFIXES)
    raise LearnerError(f"{path}: check runs a {kinds} file, not {suffix or 'a file without a suffix'}")


def _limits(memory: int):
    """What the learner's process sets up before it runs: the memory bound, and (on Linux) death
    with the harness, so that even a harness killed outright leaves no process behind."""
    prctl = None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
        if prctl is not None:
            prctl(pr_set_pdeathsig, signal.SIGKILL)

    return preexec


class LearnerProcess:
    """The process that runs the learner's file; started again after a hang or a crash."""

    def __init__(self, path: Path, fixtures_dir: Path, timeout: float, memory: int = DEFAULT_MEMORY):
        if not path.is_file():
            raise LearnerError(f"{path}: no such file")
        self.path = path
        self.timeout = timeout
        self.memory = memory
        self.command, self.language = command_for(path, fixtures_dir, memory)
        self.process: subprocess.Popen | None = None
        self.answers = -1  # the read end of the answer pipe
        self.buffer = b""
        self.secret = ""
        self.workdir: str | None = None  # the process's own working folder
        self.log = None  # what the learner's code printed (stdout and stderr)
        self.hello: Hello | None = None
        self.restart_failed: str | None = None  # why a fresh process after a hang or crash would not load

    def start(self) -> Hello:
        """Start the process and read its hello; LearnerError when the file cannot be run."""
        self.close()
        read_end, write_end = os.pipe()
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  closed by close()
        self.workdir = tempfile.mkdtemp(prefix="attention-port-check-")
        environment = {k: os.environ[k] for k in KEPT_ENVIRONMENT if k in os.environ}
        environment |= {"HOME": self.workdir, "TMPDIR": self.workdir}
        try:
            self.process = subprocess.Popen(
                [*self.command, "--answers-fd", str(write_end)],
                stdin=subprocess.PIPE,
                stdout=self.log,
                stderr=self.log,
                pass_fds=(write_end,),
                cwd=self.workdir,
                env=environment,
                start_new_session=True,  # a process group of its own, killed whole by close()
                preexec_fn=_limits(self.memory),  # noqa: PLW1509  check runs no threads of its own
            )
        except OSError as error:
            os.close(read_end)
            raise LearnerError(f"could not start {self.command[0]}: {error}") from None
        finally:
            os.close(write_end)
        self.answers, self.buffer = read_end, b""
        self.secret = learner_protocol.new_secret()
        with contextlib.suppress(OSError):  # a process that died at once is found out below
            self.process.stdin.write(f"{self.secret}\n".encode())
            self.process.stdin.flush()
        limit = max(LOAD_TIMEOUT, self.timeout)
        line = self._read_line(limit)
        if line is None:
            self.close()
            raise LearnerError(f"{self.path} did not finish loading within {limit:g} s")
        if line == "":
            code = self.process.wait()
            last = self._last_output()
            self.close()
            if self._out_of_memory(last):
                raise LearnerError(f"{self.path} could not be loaded: {self._memory_message()}")
            raise LearnerError(
                f"{self.path} could not be loaded: {last or f'its process ended (exit code {code})'}"
            )
        message = learner_protocol.read_answer(self.secret, line)
        if message is None:
            self.close()
            raise LearnerError(f"{self.path} could not be loaded: {self._forged_message()}")
        if "fatal" in message:
            self.close()
            raise LearnerError(self._fatal(message))
        hello = message["hello"]
        names = hello.get("optionNames")
        self.hello = Hello(
            function=hello["function"],
            takes_options=bool(hello["takesOptions"]),
            option_names=None if names is None else frozenset(names),
            language=self.language,
            layer=hello.get("layer"),
            rotary=hello.get("rotary"),
        )
        return self.hello

    def ask(self, case: FixtureCase) -> Reply:
        """Run one case; a hang or a crash is a Reply too, and the next case starts a fresh process."""
        if self.process is None or self.process.poll() is not None:
            if self.restart_failed is None:
                try:
                    self.start()
                except LearnerError as error:  # the file changed, say: this and every later case fail
                    self.restart_failed = f"your code could not be started again: {error}"
            if self.restart_failed is not None:
                return Reply("died", message=self.restart_failed)

        try:
            self.process.stdin.write(learner_protocol.request(case).encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        line = self._read_line(self.timeout)
        if line is None:
            self.close()
            return Reply("hang", message=f"no answer within {self.timeout:g} s")
        if line == "":
            return self._died()
        answer = learner_protocol.read_answer(self.secret, line)
        if answer is None:
            self.close()  # whatever the function returns would now be read for the next case
            return Reply("died", message=self._forged_message())
        if answer.get("id") != case.id:
            self.close()
            return Reply("died", message="the answer was for another case")
        if "threw" in answer:
            threw = answer["threw"]
            if threw["name"] == "MemoryError" or self._out_of_memory(threw["message"]):
                return Reply(
                    "died", message=f"{self._memory_message()} ({threw['name']}: {threw['message']})"
                )
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
        except (ValueError, TypeError, KeyError, OverflowError, AttributeError) as error:
            return Reply("bad", message=f"malformed answer ({error})")
        return Reply("steps", steps=steps)

    def _fatal(self, message: dict) -> str:
        """Why the file cannot be run. Node's import() does not say on which line a JavaScript syntax
        error is, and the sandboxed process may not start `node --check`, which does: check does."""
        syntax = message.get("syntaxError")
        if isinstance(syntax, dict):
            with contextlib.suppress(OSError, subprocess.SubprocessError, NodeError):
                checked = subprocess.run(
                    [str(checked_node()), "--check", syntax["file"]],
                    capture_output=True,
                    text=True,
                    timeout=LOAD_TIMEOUT,
                )
                first = (checked.stderr.splitlines() or [""])[0].strip()
                if match := re.search(r":(\d+)$", first):
                    return f"syntax error in {syntax['file']} (line {match[1]}): {syntax['said']}"
        return message["fatal"]

    def _forged_message(self) -> str:
        return "your code wrote to check's answer channel: only what your function returns is an answer"

    def _memory_message(self) -> str:
        return (
            f"your code ran out of memory: check lets it use {format_memory(self.memory)}"
            " (--memory raises that)"
        )

    def _out_of_memory(self, text: str) -> bool:
        return OUT_OF_MEMORY.search(text) is not None

    def _died(self) -> Reply:
        code = self.process.wait() if self.process is not None else None
        last = self._last_output()
        whole = self._whole_output()
        self.close()
        if self._out_of_memory(whole):
            return Reply("died", message=self._memory_message())
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

    def _whole_output(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")

    def _last_output(self) -> str:
        """The last line the learner's process printed (a Python traceback's last line, say)."""
        lines = self._whole_output().splitlines()
        return next((line.strip() for line in reversed(lines) if line.strip()), "")

    def close(self) -> None:
        """End the process and everything it started (its whole process group), and remove its folder."""
        if self.process is not None:
            with contextlib.suppress(OSError):  # ProcessLookupError: the group is gone already
                os.killpg(self.process.pid, signal.SIGKILL)
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
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
