"""What the port table (contract/ports.json) gives the files that list the ports, rendered for
`attention-port contract` (pages/generated.py): package.json's `exports`, the explorer's backends
(typescript/explorer/generated/backends.ts), README's port table and docs/design.md's ladder.

A port's npm subpath points at its module compiled into dist/ (typescript/src/flash.ts ->
./dist/src/flash.js); a row with a Node entry of its own (simd.ts, whose kernel Node reads from
disk) gets the conditions a bundler and Node each pick: its types, "node" its Node entry, "default"
its module. Several rows of one module (typescript-simd and typescript-simd-float32) share one
subpath.
"""

from __future__ import annotations

import json

from attention_port.paths import PORT_TABLE, REPO_ROOT
from attention_port.port_table import ROWS, PortRow, npm_extras

SOURCE = PORT_TABLE.relative_to(REPO_ROOT).as_posix()


def _dist(path: str, suffix: str = ".js") -> str:
    """Where the package build (typescript/package/build.ts) puts a file of the checkout: a .ts
    under typescript/ is compiled into dist/, anything else ships as itself."""
    if path.startswith("typescript/") and path.endswith(".ts"):
        return "./dist/" + path.removeprefix("typescript/").removesuffix(".ts") + suffix
    return "./" + path


def exports() -> dict[str, object]:
    """package.json's exports map: each port's subpath in table order, then the extras."""
    out: dict[str, object] = {}
    for row in ROWS:
        if row.npm is None:
            continue
        if row.node_entry is None:
            entry: object = _dist(row.module)
        else:
            entry = {
                "types": _dist(row.module, ".d.ts"),
                "node": _dist(row.node_entry),
                "default": _dist(row.module),
            }
        if out.setdefault(row.npm, entry) != entry:
            raise ValueError(f"{SOURCE}: npm subpath {row.npm!r} is given two different modules")
    for extra in npm_extras():
        out[extra["subpath"]] = _dist(extra["target"])
    return out


def render_package_json() -> str:
    """package.json with its exports map from the table; every other key as it is, in npm's
    formatting (2-space JSON and a final newline)."""
    package = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))
    package["exports"] = exports()
    return json.dumps(package, indent=2, ensure_ascii=False) + "\n"


def _ts(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_explorer_backends() -> str:
    """The explorer's backends as data: one per row with an explorer backend, in table order."""
    lines = [
        f"// Generated from {SOURCE} by `attention-port contract` (scripts/generate-contract): do not",
        "// edit. The rows with an explorer backend, in the table's order; backends.ts gives each its",
        "// computation.",
        "",
        "export const BACKEND_ROWS = [",
    ]
    for row in ROWS:
        if row.explorer is None:
            continue
        fields = [
            f"name: {_ts(row.explorer['name'])}",
            f"label: {_ts(row.explorer['label'])}",
            f"source: {_ts(row.module)}",
        ]
        if row.node_entry is not None:
            fields.append(f"nodeSource: {_ts(row.node_entry)}")
        fields += [
            f"diagnostics: {_ts('own' if row.records_steps else 'readable')}",
            f"dtype: {_ts(row.dtypes[0])}",
        ]
        lines += ["  {", *(f"    {field}," for field in fields), "  },"]
    lines += [
        "] as const;",
        "",
        "/** A backend's name: the picker's value, and the ?backend= of the page's address. */",
        'export type BackendName = (typeof BACKEND_ROWS)[number]["name"];',
        "",
    ]
    return "\n".join(lines)


def _code(row: PortRow) -> str:
    return " + ".join(f"`{code}`" for code in row.docs["code"])


def readme_port_table() -> list[str]:
    """README.md's port table, from the rows' docs lines."""
    table = ["| port | file | computes in |", "| --- | --- | --- |"]
    table += [
        f"| {row.docs['label']} | {_code(row)} | {row.docs['computes_in']} |"
        for row in ROWS
        if row.docs is not None
    ]
    return table


def design_ladder() -> list[str]:
    """docs/design.md's ladder of ports, from the rows' docs lines that are rungs."""
    table = ["| port | file | computes in | what it adds |", "| --- | --- | --- | --- |"]
    table += [
        f"| {row.docs['label']} | {_code(row)} | {rung['computes_in']} | {rung['adds']} |"
        for row in ROWS
        if row.docs is not None and (rung := row.docs["ladder"]) is not None
    ]
    return table
