"""`attention-port explore`: the attention explorer in the browser.

The page lives in typescript/explorer/ (index.html, main.ts, model.ts) and runs the real
typescript/src/attention.ts, bundled for the browser by esbuild; typescript/explorer/build.ts
builds and serves it. This module only finds the project's Node and hands over:

    attention-port explore                   serve on 127.0.0.1 (a free port), print the URL, Ctrl-C stops
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

from .node import find_node
from .paths import DOCS, EXPLORER_BUILD, NODE_MODULES, require_checkout

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
    try:
        return process.wait()
    except KeyboardInterrupt:
        # From a terminal, Ctrl-C reaches Node too (the same process group); pass it on anyway for
        # the case where only this process was interrupted. Node closes the server and says so.
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait()
        return 0
