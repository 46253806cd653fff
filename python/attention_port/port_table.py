"""The port table (contract/ports.json, shipped in the wheel): every port declared
once, read by verify's runners, by typescript/harness/cli.ts, by the bench and by
`attention-port ports`; the npm exports, the explorer's backends and the docs' port tables are
generated from it (pages/port_outputs.py).

Adding a port is its module, its tests and one row there. What each runner needs to know of a port
is a property of its row, never its name: where it runs (python, node or browser), the dtypes it
computes in, whether its scores, logits and weights are its own (records_steps) or only its
output is judged, and the rows the bench times it in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields

from attention_port.paths import PORT_TABLE

LANGUAGES = ("python", "typescript")
RUNS_IN = ("python", "node", "browser")


@dataclass(frozen=True)
class PortRow:
    name: str  # as verify --ports names it and the report prints it
    language: str  # python or typescript
    module: str  # the file that computes, repository-relative
    node_entry: str | None  # the module Node imports for it, where not `module` (simd-node.ts)
    dtypes: tuple[str, ...]  # what it computes in (torch: those of them its device supports)
    entries: tuple[str, ...]  # the functions it exports
    records_steps: bool  # its scores, logits and weights are its own; else only its output is judged
    runs_in: str  # python, node or browser
    device: bool  # runs on verify's --device and --dtypes (torch's)
    npm: str | None  # its subpath of the npm package
    explorer: dict | None  # its backend in the explorer: {"name", "label"}
    bench: tuple[dict, ...]  # the rows `attention-port bench` times it in (bench/run.py's BenchPort)
    docs: dict | None  # its line in README's port table and design.md's ladder (pages/port_outputs.py)


def _row(entry: dict) -> PortRow:
    names = {field.name for field in fields(PortRow)}
    if set(entry) != names:
        raise ValueError(f"{PORT_TABLE}: a row has fields {sorted(entry)}, not {sorted(names)}")
    row = PortRow(
        **{
            **entry,
            "dtypes": tuple(entry["dtypes"]),
            "entries": tuple(entry["entries"]),
            "bench": tuple(entry["bench"]),
        }
    )
    if row.language not in LANGUAGES or row.runs_in not in RUNS_IN:
        raise ValueError(
            f"{PORT_TABLE}: port {row.name!r} has language {row.language!r}, runs_in {row.runs_in!r}"
        )
    return row


def load_table() -> tuple[PortRow, ...]:
    rows = tuple(_row(entry) for entry in json.loads(PORT_TABLE.read_text(encoding="utf-8"))["ports"])
    if len({row.name for row in rows}) != len(rows):
        raise ValueError(f"{PORT_TABLE}: a port name appears twice")
    return rows


ROWS = load_table()
BY_NAME = {row.name: row for row in ROWS}


def npm_extras() -> tuple[dict, ...]:
    """The npm subpaths that are no port (the layer, the conformance kit, package.json), in order."""
    return tuple(json.loads(PORT_TABLE.read_text(encoding="utf-8"))["npm_extras"])


def render() -> str:
    """The table as `attention-port ports` prints it: one line a port, in columns."""
    header = ("port", "language", "runs in", "dtypes", "own steps", "module")
    own = {True: "yes", False: "output only"}
    lines = [
        (row.name, row.language, row.runs_in, ",".join(row.dtypes), own[row.records_steps], row.module)
        for row in ROWS
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header) - 1)]
    return "\n".join(
        "  ".join([*(cell.ljust(width) for cell, width in zip(line, widths, strict=False)), line[-1]])
        for line in [header, *lines]
    )
