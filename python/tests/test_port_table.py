"""The port table (ports.json) is the one list of ports: verify, cli.ts and the bench read it, and
the npm exports, the explorer's backends and the docs' port tables are generated from it
(pages/port_outputs.py, held fresh by test_generated.py). Here: that each row is true of its
module, that what is generated from a row works, and that every reader acts on the row."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import subprocess
import sys

import pytest

from attention_port import port_table
from attention_port.harness import runners
from attention_port.harness.node import find_node
from attention_port.pages import generated, port_outputs
from attention_port.paths import REPO_ROOT

ROWS = port_table.ROWS
TYPESCRIPT_EXPORTS = """
const modules = JSON.parse(process.argv[1]);
const out = {};
for (const file of modules) {
  const module = await import(new URL(file, `file://${process.cwd()}/`).href);
  out[file] = Object.keys(module).filter((name) => typeof module[name] === "function");
}
console.log(JSON.stringify(out));
"""


def _typescript_functions(files: list[str]) -> dict[str, list[str]]:
    """The functions each TypeScript module exports, as Node imports it."""
    done = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", TYPESCRIPT_EXPORTS, json.dumps(sorted(set(files)))],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_verify_runs_every_row_and_nothing_else():
    assert list(runners.PORTS) == [row.name for row in ROWS]
    assert set(runners.PYTHON_RUNNERS) == {row.name for row in ROWS if row.runs_in == "python"}
    assert set(runners.DEVICE_PORTS) <= set(runners.PYTHON_RUNNERS)
    assert "numpy" not in runners.DEVICE_PORTS and "torch" in runners.DEVICE_PORTS


def test_every_rows_module_is_there_and_exports_its_entries():
    typescript = [row for row in ROWS if row.language == "typescript"]
    functions = _typescript_functions([row.module for row in typescript] +
                                      [row.node_entry for row in typescript if row.node_entry])  # fmt: skip
    for row in ROWS:
        assert (REPO_ROOT / row.module).is_file(), row
        if row.language == "python":
            module = importlib.import_module(
                row.module.removeprefix("python/").removesuffix(".py").replace("/", ".")
            )
            missing = [entry for entry in row.entries if not callable(getattr(module, entry, None))]
        else:  # its module, and the Node entry a Node program imports instead, export the same
            missing = [e for e in row.entries if e not in functions[row.module]]
            if row.node_entry is not None:
                node = functions[row.node_entry]
                missing += [f"{row.node_entry}: {e}" for e in row.entries if e not in node]
        assert not missing, (row.name, missing)


def _sources(target: object) -> list[str]:
    """The files of the checkout an exports entry is built from (dist/X.js and dist/X.d.ts from X.ts)."""
    paths = target.values() if isinstance(target, dict) else [target]
    out = []
    for path in paths:
        assert path.startswith("./"), path
        if path.startswith("./dist/"):
            stem = path.removeprefix("./dist/").removesuffix(".d.ts").removesuffix(".js")
            out.append(f"typescript/{stem}.ts")
        else:
            out.append(path.removeprefix("./"))
    return out


def test_each_npm_subpath_is_built_from_a_file_that_is_there():
    exports = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))["exports"]
    by_subpath = {row.npm: row for row in ROWS if row.npm is not None}
    assert list(exports)[: len(by_subpath)] == list(by_subpath)  # the ports first, in table order
    for subpath, target in exports.items():
        for source in _sources(target):
            assert (REPO_ROOT / source).is_file(), (subpath, source)
        if subpath in by_subpath:  # a port's subpath: its module by default, as a bundler takes it
            row = by_subpath[subpath]
            assert _sources(target if isinstance(target, str) else target["default"]) == [row.module]
            if row.node_entry is not None:
                assert _sources(target["node"]) == [row.node_entry]
                assert _sources(target["types"]) == [row.module]  # its types are the module's


def test_a_new_row_is_its_subpath_and_two_modules_for_one_subpath_are_refused(monkeypatch):
    row = dataclasses.replace(
        port_table.BY_NAME["typescript-flash"],
        name="typescript-new",
        module="typescript/src/new.ts",
        npm="./new",
        node_entry="typescript/src/new-node.ts",
    )
    monkeypatch.setattr(port_outputs, "ROWS", (*ROWS, row))
    exports = port_outputs.exports()
    assert exports["./new"] == {
        "types": "./dist/src/new.d.ts",
        "node": "./dist/src/new-node.js",
        "default": "./dist/src/new.js",
    }
    assert list(exports).index("./new") < list(exports).index("./layer")  # before the extras
    clash = dataclasses.replace(row, npm="./flash", node_entry=None)
    monkeypatch.setattr(port_outputs, "ROWS", (*ROWS, clash))
    with pytest.raises(ValueError, match="npm subpath './flash' is given two different modules"):
        port_outputs.exports()


def test_every_rows_module_has_a_line_in_the_docs_port_tables():
    """A row whose own docs line is null shares another's (typescript-simd-float32, simd.ts's)."""
    documented = {code for row in ROWS if row.docs is not None for code in row.docs["code"]}
    assert {row.module for row in ROWS} <= documented
    for path in ("README.md", "docs/design.md"):
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
        begin = generated.begin_marker("contract/ports.json")
        section = text[text.index(begin) : text.index(generated.END, text.index(begin))]
        for row in ROWS:
            assert f"`{row.module}`" in section, (path, row.name)


def test_the_import_contracts_name_every_port():
    """pyproject.toml's import-linter layers are not generated: held to the table here."""
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    config = (REPO_ROOT / ".dependency-cruiser.cjs").read_text(encoding="utf-8")
    pattern = config.split('const PORTS = "', 1)[1].split('";', 1)[0]
    for row in ROWS:
        if row.language == "typescript":
            assert re.search(pattern, row.module), (row.name, pattern)
    layers = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    top = next(c for c in layers["contracts"] if c["containers"] == ["attention_port"])
    ports_layer = next(layer for layer in top["layers"] if "reference" in layer)
    for row in ROWS:
        if row.language == "python":
            assert row.module.removeprefix("python/attention_port/").removesuffix(".py") in ports_layer, row


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


def test_each_bench_row_times_a_port_of_the_table_through_its_module(tmp_path):
    from attention_port.bench import run as bench
    from attention_port.bench import worker

    names = [p.name for p in bench.PORTS]
    assert len(set(names)) == len(names), names
    expected = [entry["name"] for row in ROWS for entry in row.bench] + [p.name for p in bench.PEERS]
    assert names == expected
    for p in bench.PORTS:
        if p.port is not None:
            module = port_table.BY_NAME[p.port].module
            assert module.rsplit("/", 1)[1] in p.what or p.port.startswith("torch-sdpa"), (p.name, module)
    # Each worker knows each of its rows: bench/worker.ts names those it can time when asked for another.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"port": "no-such-port"}), encoding="utf-8")
    done = subprocess.run([str(find_node()), "typescript/bench/worker.ts", str(plan)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 1 and "unknown Node port 'no-such-port'" in done.stderr, done.stderr
    node_side = done.stderr.split("choose from ", 1)[1].strip().split(", ")
    assert {p.name for p in bench.PORTS if p.worker == "node"} <= set(node_side)
    for p in bench.PORTS:
        if p.worker == "python" and not p.browser:
            assert callable(worker.load_port(p.name, 1).run), p.name
    with pytest.raises(ValueError, match="choose from numpy, torch-math, torch-sdpa, webgpu, native-limits"):
        worker.load_port("no-such-port", 1)


def test_no_port_is_named_in_the_commands():
    """What verify does with a port follows from its row (runs_in, language), never its name."""
    for path in ("python/attention_port/cli.py", "typescript/harness/cli.ts"):
        # A language ("typescript"), cli.ts's default --port and comments are not branches on a name.
        lines = (REPO_ROOT / path).read_text(encoding="utf-8").splitlines()
        code = [line for line in lines if not line.lstrip().startswith(("#", "*", "//"))]
        source = "\n".join(line for line in code if "language" not in line and "default:" not in line)
        named = [row.name for row in ROWS if f'"{row.name}"' in source or f"'{row.name}'" in source]
        assert named == [], (path, named)
