"""Run a learner's own attention code in a process of its own, one case at a time, within limits.

`attention-port check` (check.py) asks; this module keeps the process that answers. A JavaScript or
TypeScript file runs in the project's Node (node.py) through typescript/learner/worker.ts; a Python file
runs in a fresh Python through worker.py. Both speak protocol.py's protocol.

The learner's code never runs in the harness: a case that hangs past its time-out has its process
killed, a case that kills its process is reported, and either way the next case gets a fresh one.
check bounds what a bug can do to the learner's machine; it is not a security sandbox, and the
learner's code runs as the learner, able to read what they can read (the fixtures too):
  - time: each case has a time-out (--timeout);
  - memory: the OS limit on the process's address space (RLIMIT_AS, which counts every mapping,
    shared and anonymous ones too, where RLIMIT_DATA does not) is --memory plus what the runtime
    maps for itself before the learner's code runs (RUNTIME_ADDRESS_SPACE), with V8's heap limit
    under it for Node;
  - processes: it runs in a session (a process group) of its own, killed as a whole when its run
    ends, and on Linux it dies with check (PR_SET_PDEATHSIG); Node's --permission keeps it from
    starting processes or writing files at all;
  - output: the answers travel on a descriptor of their own, so the learner's stdout and stderr are
    read on a pipe of their own and kept, up to PRINTED_LIMIT bytes a case, to be shown under the
    case that printed them;
  - files: it runs in an empty working folder of its own, removed at the end, so that a stray
    relative write lands there.
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
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attention_port.golden.reader import FixtureCase
from attention_port.harness.node import NodeError, checked_node
from attention_port.harness.runners import decode_tensor
from attention_port.learner import protocol as learner_protocol
from attention_port.paths import CHECK_TS

NODE_SUFFIXES = (".ts", ".mts", ".js", ".mjs")
PYTHON_SUFFIXES = (".py",)
LOAD_TIMEOUT = 30.0  # seconds to load the file (Node or Python start, imports, type stripping)
MIB = 1 << 20
DEFAULT_MEMORY = 2048 * MIB
MINIMUM_MEMORY = 1024 * MIB
# The address space a runtime maps for itself before the learner's code runs, added to --memory for
# the OS limit. Node 24 maps about 1.1-1.3 GiB at start (VmPeak), most of it V8's reserved and unused
# heap space, and does not start under 1.1 GiB; Python with numpy maps about 150 MiB.
RUNTIME_ADDRESS_SPACE = {"JavaScript": 1536 * MIB, "Python": 256 * MIB}
# Bytes of what the learner's code prints that are kept for each case (and while loading); the rest
# is read and dropped, and counted. The last TAIL_LIMIT bytes are kept too, to say why a process died.
PRINTED_LIMIT = 4096
TAIL_LIMIT = 4096
# What a process prints or raises when it runs out of memory (V8, WebAssembly, glibc, numpy, C++,
# Python): each is the memory limit, whatever the allocation that hit it.
OUT_OF_MEMORY = re.compile(
    r"out of memory|Failed to allocate|allocation failed|Cannot allocate memory|could not allocate memory"
    r"|Unable to grow instance memory|Failed to reserve virtual memory|std::bad_alloc|Unable to allocate"
    r"|MemoryError"
)


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
        raise ValueError(f"--memory must be at least {format_memory(MINIMUM_MEMORY)}, got {text}")
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # a system that does not say: no upper bound
        total = None
    if total is not None and size > total:
        raise ValueError(f"--memory {text} is more than this machine has ({total / (1 << 30):.1f} GiB)")
    return size


@dataclass(frozen=True)
class Hello:
    """What the process found in the learner's file."""

    function: str | None  # the name it calls: attentionSteps / scaledDotProductAttention (or snake_case)
    takes_options: bool
    option_names: frozenset[str] | None  # the options it accepts by name (Python); None: any
    language: str  # "JavaScript" or "Python"
    layer: str | None = None  # its multiHeadAttention / multi_head_attention, if it has one
    rotary: str | None = None  # its applyRotary / apply_rotary, if it has one
    layer_past: bool = False  # its layer takes a KV cache (past_key, past_value, return_cache)
    layer_option_names: frozenset[str] | None = None  # the options its layer names (Python); None: any


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
    changed: tuple[str, ...] = ()  # the arguments the call changed in place (query, key, ...)
    printed: Printed | None = None  # what the learner's code printed while the case ran


@dataclass
class Printed:
    """What the learner's code printed (stdout and stderr, in the order written) while one case ran,
    or while it loaded: the first PRINTED_LIMIT bytes, the last TAIL_LIMIT, and how many in all."""

    kept: bytes = b""
    tail: bytes = b""
    total: int = 0

    def add(self, chunk: bytes) -> None:
        if len(self.kept) < PRINTED_LIMIT:
            self.kept += chunk[: PRINTED_LIMIT - len(self.kept)]
        self.tail = (self.tail + chunk)[-TAIL_LIMIT:]
        self.total += len(chunk)

    @property
    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")

    @property
    def cut(self) -> int:
        """Bytes printed past PRINTED_LIMIT, not kept."""
        return self.total - len(self.kept)

    def last_line(self) -> str:
        """The last line printed (a Python traceback's last line, say)."""
        lines = self.tail.decode("utf-8", errors="replace").splitlines()
        return next((line.strip() for line in reversed(lines) if line.strip()), "")


class LearnerError(Exception):
    """The file could not be run at all; the message is one line. `printed` is what its code printed
    while loading, if anything."""

    def __init__(self, message: str, printed: Printed | None = None):
        super().__init__(message)
        self.printed = printed


def command_for(path: Path, memory: int) -> tuple[list[str], str]:
    """The command that runs the worker for this file, and the language it runs."""
    suffix = path.suffix.lower()
    module = ["--module", str(path.absolute())]  # the worker runs in a folder of its own
    if suffix in NODE_SUFFIXES:
        try:
            node = checked_node()
        except NodeError as error:
            raise LearnerError(str(error)) from None
        heap = f"--max-old-space-size={memory * 3 // 4 // MIB}"  # V8's own limit, under the OS one
        # --permission: no writes, no child processes, no workers; it may read anything.
        flags = ["--permission", "--allow-fs-read=*", heap]
        return [str(node), *flags, str(CHECK_TS), *module], "JavaScript"
    if suffix in PYTHON_SUFFIXES:
        return [sys.executable, "-m", "attention_port.learner.worker", *module], "Python"
    kinds = ", ".join(NODE_SUFFIXES + PYTHON_SUFFIXES)
    raise LearnerError(f"{path}: check runs a {kinds} file, not {suffix or 'a file without a suffix'}")


def _limits(address_space: int):
    """What the learner's process sets up before it runs: the bound on its address space, and (on
    Linux) death with the harness, so that even a harness killed outright leaves no process behind."""
    prctl = None
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            prctl = ctypes.CDLL(None, use_errno=True).prctl
    pr_set_pdeathsig = 1

    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        if prctl is not None:
            prctl(pr_set_pdeathsig, signal.SIGKILL)

    return preexec


class LearnerProcess:
    """The process that runs the learner's file; started again after a hang or a crash."""

    def __init__(self, path: Path, timeout: float, memory: int = DEFAULT_MEMORY):
        if path.is_dir():
            raise LearnerError(f"{path}: is a folder, not a file")
        if not path.is_file():
            raise LearnerError(f"{path}: no such file")
        self.path = path
        self.timeout = timeout
        self.memory = memory
        self.command, self.language = command_for(path, memory)
        self.process: subprocess.Popen | None = None
        self.answers = -1  # the read end of the answer pipe
        self.output = -1  # the read end of the pipe the learner's stdout and stderr go to
        self.buffer = b""
        self.printed = Printed()  # what the learner's code printed since the last answer
        self.workdir: str | None = None  # the process's own working folder
        self.hello: Hello | None = None
        self.loading_printed: Printed | None = None  # what it printed while loading
        self.restart_failed: str | None = None  # why a fresh process after a hang or crash would not load

    def start(self) -> Hello:
        """Start the process and read its hello; LearnerError when the file cannot be run."""
        self.close()
        answers_read, answers_write = os.pipe()
        output_read, output_write = os.pipe()
        self.workdir = tempfile.mkdtemp(prefix="attention-port-check-")
        # Unbuffered, so that what Python prints is in the pipe before the answer that follows it;
        # numpy's BLAS on one thread, so that its address space does not grow with the machine's cores.
        environment = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", **os.environ}
        environment["PYTHONUNBUFFERED"] = "1"
        limit = self.memory + RUNTIME_ADDRESS_SPACE[self.language]
        try:
            self.process = subprocess.Popen(
                [*self.command, "--answers-fd", str(answers_write)],
                stdin=subprocess.PIPE,
                stdout=output_write,
                stderr=output_write,
                pass_fds=(answers_write,),
                cwd=self.workdir,
                env=environment,
                start_new_session=True,  # a process group of its own, killed whole by close()
                preexec_fn=_limits(limit),  # noqa: PLW1509  check runs no threads of its own
            )
        except OSError as error:
            os.close(answers_read)
            os.close(output_read)
            raise LearnerError(f"could not start {self.command[0]}: {error}") from None
        finally:
            os.close(answers_write)
            os.close(output_write)
        self.answers, self.output, self.buffer = answers_read, output_read, b""
        self.printed = Printed()
        limit = max(LOAD_TIMEOUT, self.timeout)
        line = self._read_line(limit)
        printed, self.printed = self.printed, Printed()
        if line is None:
            self.close()
            raise LearnerError(f"{self.path} did not finish loading within {limit:g} s", printed)
        if line == "":
            code = self.process.wait()
            self.close()
            if self._out_of_memory(printed.tail.decode("utf-8", "replace"), code):
                raise LearnerError(f"{self.path} could not be loaded: {self._memory_message()}")
            said = printed.last_line() or f"its process ended (exit code {code})"
            raise LearnerError(f"{self.path} could not be loaded: {said}", printed)
        message = learner_protocol.read_answer(line)
        if message is None:
            self.close()
            raise LearnerError(f"{self.path} could not be loaded: its process answered {line[:80]!r}")
        if "fatal" in message:
            self.close()
            if self._out_of_memory(message["fatal"]):
                raise LearnerError(f"{self.path} could not be loaded: {self._memory_message()}")
            raise LearnerError(self._fatal(message), printed)
        hello = message["hello"]
        names, layer_names = hello.get("optionNames"), hello.get("layerOptionNames")
        self.loading_printed = printed
        self.hello = Hello(
            function=hello["function"],
            takes_options=bool(hello["takesOptions"]),
            option_names=None if names is None else frozenset(names),
            language=self.language,
            layer=hello.get("layer"),
            rotary=hello.get("rotary"),
            layer_past=hello.get("layerPast") is True,
            layer_option_names=None if layer_names is None else frozenset(layer_names),
        )
        return self.hello

    def ask(self, case: FixtureCase, *, same_query_key: bool = False) -> Reply:
        """Run one case; a hang or a crash is a Reply too, and the next case starts a fresh process.
        The reply holds what the learner's code printed meanwhile. With `same_query_key` the
        function is given one array as both query and key."""
        reply = self._ask(case, same_query_key)
        printed, self.printed = self.printed, Printed()
        return replace(reply, printed=printed)

    def _ask(self, case: FixtureCase, same_query_key: bool) -> Reply:
        if self.process is None or self.process.poll() is not None:
            if self.restart_failed is None:
                try:
                    self.start()
                except LearnerError as error:  # the file changed, say: this and every later case fail
                    self.restart_failed = f"your code could not be started again: {error}"
            if self.restart_failed is not None:
                return Reply("died", message=self.restart_failed)

        try:
            self.process.stdin.write(learner_protocol.request(case, same_query_key=same_query_key).encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died()
        line = self._read_line(self.timeout)
        if line is None:
            self.close()
            return Reply("hang", message=f"no answer within {self.timeout:g} s")
        if line == "":
            return self._died()
        answer = learner_protocol.read_answer(line)
        if answer is None or answer.get("id") != case.id:
            self.close()
            return Reply("died", message=f"the process running your code answered {line[:80]!r}")
        changed = tuple(str(name) for name in answer.get("changed", ()))
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
                changed=changed,
            )
        if "bad" in answer:
            return Reply("bad", message=answer["bad"])
        try:
            steps = {name: decode_tensor(entry) for name, entry in answer["steps"].items()}
        except (ValueError, TypeError, KeyError, OverflowError, AttributeError) as error:
            return Reply("bad", message=f"malformed answer ({error})")
        return Reply("steps", steps=steps, changed=changed)

    def _fatal(self, message: dict) -> str:
        """Why the file cannot be run. Node's import() does not say on which line a JavaScript syntax
        error is, and the learner's process may not start `node --check`, which does: check does."""
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

    def _memory_message(self) -> str:
        return (
            f"your code ran out of memory: check lets your code use {format_memory(self.memory)}"
            " (--memory raises that)"
        )

    def _out_of_memory(self, text: str, code: int | None = None) -> bool:
        """Whether a message (or what the process printed last) says it ran out of memory; a process
        killed outright, which check did not kill, was killed by the system for its memory."""
        return OUT_OF_MEMORY.search(text) is not None or code == -signal.SIGKILL

    def _died(self) -> Reply:
        code = self.process.wait() if self.process is not None else None
        self._drain()
        last = self.printed.last_line()
        tail = self.printed.tail.decode("utf-8", "replace")
        self.close()
        if self._out_of_memory(tail, code):
            return Reply("died", message=self._memory_message())
        detail = f"exit code {code}" + (f": {last}" if last else "")
        return Reply("died", message=f"the process running your code ended ({detail})")

    def _read_line(self, timeout: float) -> str | None:
        """The next answer line; None after `timeout` seconds, "" when the pipe closed. What the
        learner's code prints meanwhile is read into self.printed, and what it printed before the
        answer line is all there when this returns."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self.answers, *self._output_fds()], [], [], remaining)
            if not ready:
                return None
            if self.output in ready:
                self._read_output()
            if self.answers in ready:
                chunk = os.read(self.answers, 1 << 16)
                if not chunk:
                    return ""
                self.buffer += chunk
        self._drain()
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode("utf-8", errors="replace")

    def _output_fds(self) -> list[int]:
        return [self.output] if self.output >= 0 else []

    def _read_output(self) -> None:
        chunk = os.read(self.output, 1 << 16)
        if chunk:
            self.printed.add(chunk)
        else:  # the process closed it (it ended, or closed its stdout and stderr)
            os.close(self.output)
            self.output = -1

    def _drain(self) -> None:
        """Read what is in the output pipe now: written before the answer that just came, it is there."""
        while self.output >= 0 and select.select([self.output], [], [], 0)[0]:
            self._read_output()

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
        for fd in (self.answers, self.output):
            if fd >= 0:
                os.close(fd)
        self.answers = self.output = -1
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
