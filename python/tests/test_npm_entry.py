"""`npm test` (and `npm run deps`) work whichever npm starts them: scripts/node picks a Node that
can run .ts files.

A stub `node` that says it is v20 (too old to strip TypeScript types) stands first on PATH, as the
system Node does on a machine with an old Node. scripts/node must then run the project's Node from
.venv, or, when there is none, fail with one line that says which command to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from attention_port.harness.node import find_node
from attention_port.paths import REPO_ROOT

OLD_NODE = """#!/bin/sh
# A stand-in for an old system Node: reports v20 and cannot run TypeScript.
case "$1" in
  --version) echo v20.11.1 ;;
  -p|-e) [ "$2" = "process.versions.node" ] && echo 20.11.1; exit 1 ;;
  *) echo "node v20: cannot run $*" >&2; exit 9 ;;
esac
"""


def _old_node_dir(tmp_path: Path) -> Path:
    stub_dir = tmp_path / "old-node"
    stub_dir.mkdir()
    stub = stub_dir / "node"
    stub.write_text(OLD_NODE)
    stub.chmod(0o755)
    return stub_dir


def _env(stub_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("npm_")}
    env["PATH"] = f"{stub_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    env["npm_node_execpath"] = str(stub_dir / "node")  # npm itself run by the old Node
    return env


def test_the_npm_test_command_runs_on_the_projects_node_when_path_has_an_old_one(tmp_path):
    # The exact command `npm test` runs, with one test file so that it stays quick.
    command = json.loads((REPO_ROOT / "package.json").read_text())["scripts"]["test"]
    command = command.replace('"typescript/test/**/*.test.ts"', "typescript/test/batching.test.ts")
    stub_dir = _old_node_dir(tmp_path)
    result = subprocess.run(
        ["sh", "-c", command], cwd=REPO_ROOT, env=_env(stub_dir), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "node v20: cannot run" not in result.stderr
    # As many passed as the file has tests (it grows), and none failed.
    written = (REPO_ROOT / "typescript" / "test" / "batching.test.ts").read_text().count("\n  test(")
    assert written > 0
    assert f"# pass {written}" in result.stdout or f"ℹ pass {written}" in result.stdout, result.stdout


def test_the_npm_deps_command_runs_on_the_projects_node_when_path_has_an_old_one(tmp_path):
    # dependency-cruiser needs Node 22 or later: `npm run deps` goes through scripts/node too.
    command = json.loads((REPO_ROOT / "package.json").read_text())["scripts"]["deps"]
    assert command.startswith("sh scripts/node "), command
    stub_dir = _old_node_dir(tmp_path)
    result = subprocess.run(
        ["sh", "-c", command], cwd=REPO_ROOT, env=_env(stub_dir), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "node v20: cannot run" not in result.stderr
    assert "no dependency violations found" in result.stdout, result.stdout


def test_scripts_node_prefers_a_recent_node_and_says_which_node_it_ran(tmp_path):
    stub_dir = _old_node_dir(tmp_path)
    result = subprocess.run(
        ["sh", str(REPO_ROOT / "scripts" / "node"), "-p", "process.execPath"],
        env=_env(stub_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).resolve() == find_node().resolve()


def test_without_a_project_node_it_fails_with_one_line_naming_the_setup_command(tmp_path):
    # A copy of the repo's launcher in a folder with no .venv.
    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "node", checkout / "scripts" / "node")
    stub_dir = _old_node_dir(tmp_path)
    result = subprocess.run(
        ["sh", str(checkout / "scripts" / "node"), "--test"],
        env=_env(stub_dir),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Node.js >= 22.18" in lines[0] and "v20.11.1" in lines[0] and "scripts/setup" in lines[0]
