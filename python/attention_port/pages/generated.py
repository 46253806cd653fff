"""Every file, and every section of a hand-written page, generated from the contract's declaration
(contract/, and the list of the contract's rules in the case table), written by `attention-port
contract` and held fresh by a test (`attention-port contract --check`).

- GENERATED maps a repository-relative path to the function that renders the file's whole text. A
  generated file says so in its first lines; nobody edits it by hand.
- SECTIONS maps (path, source) to the function that renders the lines of one section of a page
  whose other lines are written by hand (README.md, docs/*.md). The section sits between
  `<!-- generated from SOURCE by attention-port contract: do not edit -->` and
  `<!-- end generated -->`; SOURCE names what it comes from, so one page may hold several.
"""

from __future__ import annotations

from collections.abc import Callable

from attention_port.files import write_atomic
from attention_port.pages import contract_rules, fixture_schema, levels, options, port_outputs, vocabulary
from attention_port.paths import REPO_ROOT

# path (relative to the checkout) -> the text it must hold. Add a line here for a new generated file.
GENERATED: dict[str, Callable[[], str]] = {
    "typescript/src/generated/vocabulary.ts": vocabulary.render_typescript,
    "package.json": port_outputs.render_package_json,  # its exports map
    "typescript/explorer/generated/backends.ts": port_outputs.render_explorer_backends,
    "typescript/conformance/generated/levels.ts": levels.typescript,
    options.TYPESCRIPT: options.render_typescript,
    fixture_schema.CASE_SCHEMA: fixture_schema.render_case_schema,  # its params
}

# (path, source) -> the lines between the section's markers. Add a line here for a new section.
SECTIONS: dict[tuple[str, str], Callable[[], list[str]]] = {
    ("README.md", "contract/ports.json"): port_outputs.readme_port_table,
    ("docs/design.md", "contract/ports.json"): port_outputs.design_ladder,
    ("docs/learn.md", "contract/levels.json"): levels.learn_table,
    ("docs/conformance-kit.md", "contract/levels.json"): levels.kit_levels,
    ("docs/design.md", "contract/options.json"): options.design_table,
    ("docs/design.md", contract_rules.SOURCE): contract_rules.design_rules,
}

END = "<!-- end generated -->"


def begin_marker(source: str) -> str:
    return f"<!-- generated from {source} by attention-port contract: do not edit -->"


def _with_section(path: str, text: str, source: str, lines: list[str]) -> str:
    """`text` with the lines between the section's markers replaced by `lines`."""
    begin = begin_marker(source)
    start = text.find(begin)
    end = text.find(END, start)
    if start < 0 or end < 0:
        raise ValueError(f"{path}: no '{begin}' ... '{END}' section")
    return text[: start + len(begin)] + "\n" + "\n".join(lines) + "\n" + text[end:]


def expected_text(path: str) -> str:
    """What `path` must hold: its whole text if it is generated, else its text on disk with each
    of its generated sections rendered."""
    text = GENERATED[path]() if path in GENERATED else (REPO_ROOT / path).read_text(encoding="utf-8")
    for (section_path, source), render in SECTIONS.items():
        if section_path == path:
            text = _with_section(path, text, source, render())
    return text


def _paths() -> list[str]:
    return list(dict.fromkeys([*GENERATED, *(path for path, _ in SECTIONS)]))


def stale() -> list[str]:
    """The generated files (or pages with generated sections) whose text on disk is not what the
    contract gives."""
    out = []
    for path in _paths():
        target = REPO_ROOT / path
        if not target.is_file() or target.read_text(encoding="utf-8") != expected_text(path):
            out.append(path)
    return out


def write() -> list[str]:
    """Write every generated file that is stale; returns the paths written."""
    written = stale()
    for path in written:
        write_atomic(REPO_ROOT / path, expected_text(path))
    return written
