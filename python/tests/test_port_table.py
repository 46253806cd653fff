"""The port table (ports.json) is the one list of ports: verify and cli.ts read it, and every other
list of ports (the npm exports, the explorer's backends, the import contracts, README's table) is
held to it here."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys

import tomllib

from attention_port import port_table
from attention_port.harness import runners
from attention_port.paths import REPO_ROOT

ROWS = port_table.ROWS


def test_verify_runs_every_row_and_nothing_else():
    assert list(runners.PORTS) == [row.name for row in ROWS]
    assert set(runners.PYTHON_RUNNERS) == {row.name for row in ROWS if row.runs_in == "python"}
    assert set(runners.DEVICE_PORTS) <= set(runners.PYTHON_RUNNERS)


def test_every_rows_module_is_there_and_exports_its_entries():
    for row in ROWS:
        path = REPO_ROOT / row.module
        assert path.is_file(), row
        if row.language == "python":
            module = importlib.import_module(
                row.module.removeprefix("python/").removesuffix(".py").replace("/", ".")
            )
            missing = [entry for entry in row.entries if not callable(getattr(module, entry, None))]
        else:
            text = path.read_text(encoding="utf-8")
            missing = [
                e for e in row.entries if not re.search(rf"export (async )?(function|const) {e}\b", text)
            ]
        assert not missing, (row.name, missing)


def test_the_npm_exports_are_the_tables():
    exports = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))["exports"]
    from_table = {row.npm: f"./dist/{row.module.removeprefix('typescript/').removesuffix('.ts')}.js"
                  for row in ROWS if row.npm is not None}  # fmt: skip
    # An entry with conditions ("node": simd's Node entry, then "default") is the row's module by
    # default, as a browser bundle takes it. The ports are the entries under dist/src/ but the
    # layer, which wraps any port's core (layerWith); the others (package.json, the conformance
    # kit) are no port either.
    default = {k: v if isinstance(v, str) else v["default"] for k, v in exports.items()}
    assert default.pop("./layer") == "./dist/src/layer.js"
    assert {k: v for k, v in default.items() if v.startswith("./dist/src/")} == from_table


def test_the_explorers_backends_are_the_tables():
    text = (REPO_ROOT / "typescript" / "explorer" / "backends.ts").read_text(encoding="utf-8")
    backends = dict(re.findall(r'name: "([^"]+)",\s*label: "[^"]*",\s*source: "([^"]+)"', text))
    assert backends == {row.explorer: row.module for row in ROWS if row.explorer is not None}


def test_the_import_contracts_name_every_port():
    config = (REPO_ROOT / ".dependency-cruiser.cjs").read_text(encoding="utf-8")
    pattern = re.search(r'const PORTS = "([^"]+)";', config).group(1)
    for row in ROWS:
        if row.language == "typescript":
            assert re.search(pattern, row.module), (row.name, pattern)
    layers = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    top = next(c for c in layers["contracts"] if c["containers"] == ["attention_port"])
    ports_layer = next(layer for layer in top["layers"] if "reference" in layer)
    for row in ROWS:
        if row.language == "python":
            assert row.module.removeprefix("python/attention_port/").removesuffix(".py") in ports_layer, row


def test_readmes_port_list_names_every_ports_module():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## The ports") :]
    table = section[: section.index("\n\n", section.index("| port |"))]
    for row in ROWS:
        assert f"`{row.module}`" in table, row.module


def test_attention_port_ports_prints_the_table():
    done = subprocess.run(
        [sys.executable, "-m", "attention_port", "ports"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:3] == ["port", "language", "runs"]
    expected = json.loads((REPO_ROOT / "contract" / "ports.json").read_text(encoding="utf-8"))["ports"]
    assert [line.split()[0] for line in lines[1:]] == [entry["name"] for entry in expected]
    for line, entry in zip(lines[1:], expected, strict=True):
        assert line.split()[1:4] == [entry["language"], entry["runs_in"], ",".join(entry["dtypes"])], line
        assert line.endswith(entry["module"])
    assert "attention-port ports" in (REPO_ROOT / "docs" / "usage.md").read_text(encoding="utf-8")


def test_each_bench_row_times_a_port_of_the_table_through_its_module():
    from attention_port.bench import run as bench

    timed = {p.port for p in bench.PORTS if p.port is not None}
    assert timed <= set(port_table.BY_NAME), timed - set(port_table.BY_NAME)
    for p in bench.PORTS:
        if p.port is not None:
            module = port_table.BY_NAME[p.port].module
            assert module.rsplit("/", 1)[1] in p.what or p.port.startswith("torch-sdpa"), (p.name, module)
            assert p.worker == ("node" if port_table.BY_NAME[p.port].runs_in == "node" else "python"), p.name
    node_side = (REPO_ROOT / "typescript" / "runners" / "bench.ts").read_text(encoding="utf-8")
    for p in bench.PORTS:
        if p.worker == "node" and not p.peer:
            assert f'"{p.name}": ' in node_side or f"  {p.name}: " in node_side, p.name


def test_no_port_is_named_in_the_commands():
    """What verify does with a port follows from its row (runs_in, language), never its name."""
    for path in ("python/attention_port/cli.py", "typescript/runners/cli.ts"):
        # A language ("typescript"), cli.ts's default --port and comments are not branches on a name.
        lines = (REPO_ROOT / path).read_text(encoding="utf-8").splitlines()
        code = [line for line in lines if not line.lstrip().startswith(("#", "*", "//"))]
        source = "\n".join(line for line in code if "language" not in line and "default:" not in line)
        named = [row.name for row in ROWS if f'"{row.name}"' in source or f"'{row.name}'" in source]
        assert named == [], (path, named)
