"""`attention-port explore`: the attention explorer in the browser.

The page lives in typescript/explorer/ (index.html, main.ts, model.ts) and runs the real
typescript/src/attention.ts, bundled for the browser by esbuild; typescript/explorer/build.ts
builds and serves it. This module only finds the project's Node and hands over:

    attention-port explore                   serve on 127.0.0.1 (a free port), print the URL; Ctrl-C,
                                             SIGTERM or SIGHUP stops it
    attention-port explore --port 8000       the same on a chosen port
    attention-port explore --build [DIR]     write DIR/index.html (default docs/explorer/): one file
                                             that works opened from disk, offline
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from pathlib import Path

from attention_port.harness.node import find_node
from attention_port.paths import DOCS, EXPLORER_BUILD, NODE_MODULES, require_checkout

DEFAULT_BUILD_DIR = DOCS / "explorer"


def explorer_command(build: Path | None = None, port: int = 0, fixtures: Path | None = None) -> list[str]:
    """The Node command line that builds (build=DIR) or serves (build=None) the page."""
    command = [str(find_node()), str(EXPLORER_BUILD)]
    command += ["build", "--out", str(build)] if build is not None else ["serve", "--port", str(port)]
    if fixtures is not None:
        command += ["--fixtures", str(fixtures)]
    return command


def command_explore(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:  # said here: Node's own refusal is several lines with its usage
        print(f"error: --port must be a whole number from 0 to 65535, got {args.port}", file=sys.stderr)
        return 2
    # --build with no DIR gives "": the default folder. Paths are the caller's, resolved here.
    build = None if args.build is None else (Path(args.build).resolve() if args.build else DEFAULT_BUILD_DIR)
    fixtures = None if args.fixtures is None else Path(args.fixtures).resolve()
    checkout = require_checkout("explore")  # the page's sources and esbuild are not in the wheel
    if not (NODE_MODULES / "esbuild").is_dir():
        print("error: esbuild is not installed (run scripts/setup, or npm ci)", file=sys.stderr)
        return 2
    process = subprocess.Popen(explorer_command(build, args.port, fixtures), cwd=checkout)
    # SIGTERM (a process manager, `kill`) and SIGHUP (the terminal closed) stop the server as Ctrl-C
    # does. Sent to this process alone they would otherwise end it and leave Node serving.
    previous = {number: signal.signal(number, _raise_stop) for number in STOP_SIGNALS}
    try:
        return process.wait()
    except KeyboardInterrupt:
        # From a terminal, Ctrl-C reaches Node too (the same process group); pass it on anyway for
        # the case where only this process was interrupted. Node closes the server and says so.
        return _stop(process, signal.SIGINT)
    except _Stop as stop:
        return _stop(process, stop.number)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# SIGHUP does not exist on Windows.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Stop(Exception):
    """A stop signal arrived while waiting for Node."""

    def __init__(self, number: int):
        super().__init__(number)
        self.number = number


def _raise_stop(number: int, _frame: object) -> None:
    raise _Stop(number)


def _stop(process: subprocess.Popen, number: int) -> int:
    """Pass the signal on to Node, wait for it to close the server, and kill it if it does not."""
    process.send_signal(number)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return 0
