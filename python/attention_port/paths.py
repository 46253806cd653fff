"""Every path the package reads or writes by default, in one place.

Two layouts hold the same files at the same relative places:
  - a checkout of the repository (an editable install, or PYTHONPATH=python): everything lives in
    the checkout, and the repo-only commands (side-by-side, plot-sqrt-dk, explore, bench) work;
  - an installed wheel: the fixtures, their schema and the TypeScript sources the harness runs are
    shipped inside the package, under attention_port/data/ (pyproject.toml lists them), so that
    `attention-port verify` and `check` work from any folder.
DATA_ROOT is whichever of the two is here; the rest is named from it or from REPO_ROOT.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # python/attention_port, or site-packages/attention_port
REPO_ROOT = PACKAGE_DIR.parents[1]  # the checkout, when there is one
# A checkout has its pyproject.toml and the TypeScript sources two levels up; an installed wheel
# has neither (site-packages' parents are the virtualenv's lib folders).
IN_CHECKOUT = (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / "typescript" / "src").is_dir()
DATA_ROOT = REPO_ROOT if IN_CHECKOUT else PACKAGE_DIR / "data"

# Shipped in both layouts.
FIXTURES = DATA_ROOT / "fixtures"
CONTRACT = DATA_ROOT / "contract"  # the contract as data: options, words, levels, ports, protocol
PORT_TABLE = CONTRACT / "ports.json"  # every port, declared once (port_table.py; cli.ts reads it too)
SCHEMA_DIR = FIXTURES / "schema"
# The TypeScript tree has the package's rooms where both languages have the tool: golden/ (the
# fixture reader), harness/ (verify's Node runner), learner/ (check's Node worker) and bench/.
TYPESCRIPT = DATA_ROOT / "typescript"
TYPESCRIPT_SRC = TYPESCRIPT / "src"
TYPESCRIPT_CLI = TYPESCRIPT / "harness" / "cli.ts"  # runs and judges the TypeScript ports (node.py)
CHECK_TS = TYPESCRIPT / "learner" / "worker.ts"  # runs a learner's JavaScript or TypeScript (runner.py)
# What check and a learner's process say to each other, read by both (learner/protocol.py).
LEARNER_PROTOCOL = CONTRACT / "learner-protocol.json"

# Only in a checkout: sources, docs and the npm dev dependencies that the repo-only commands use.
PYTHON_PACKAGE = REPO_ROOT / "python" / "attention_port"
DOCS = REPO_ROOT / "docs"
NODE_MODULES = REPO_ROOT / "node_modules"
BENCH_TS = REPO_ROOT / "typescript" / "bench" / "worker.ts"  # the Node twin of bench/worker.py
BENCH_PEERS = REPO_ROOT / "typescript" / "bench-peers"
EXPLORER_BUILD = REPO_ROOT / "typescript" / "explorer" / "build.ts"


class NotACheckout(Exception):
    """A repo-only command run from an installed wheel; the message is one line."""


def require_checkout(command: str) -> Path:
    """REPO_ROOT, or NotACheckout saying that `command` needs a checkout of the repository."""
    if not IN_CHECKOUT:
        raise NotACheckout(
            f"{command} works in a checkout of the repository (it reads or writes files that the"
            " installed package does not ship); clone it and run scripts/setup"
        )
    return REPO_ROOT
