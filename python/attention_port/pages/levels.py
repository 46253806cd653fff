"""What TypeScript and the docs need of the check levels, rendered from contract/levels.json.

`attention-port contract` writes each (pages/generated.py): the conformance kit's levels as
TypeScript (typescript/conformance/generated/levels.ts), and the level tables of docs/learn.md and
the kit's level list in docs/conformance-kit.md, each between the generated-section markers, the
rest of the page as it is.
"""

from __future__ import annotations

import json
import textwrap

from attention_port.fixtures.cases import CORE_LEVELS, LAYER_LEVELS, PLAIN_LEVEL, Level
from attention_port.paths import REPO_ROOT

SOURCE = "contract/levels.json"
START = f"<!-- generated from {SOURCE} by attention-port contract: do not edit -->"
END = "<!-- end generated -->"
TYPESCRIPT_WIDTH = 110  # Biome's lineWidth (biome.json): a longer record goes on lines of its own
PAGE_WIDTH = 100  # the docs' prose lines (a table's rows are as long as they are)


class SectionsMissing(Exception):
    """A page no longer has the generated sections it is rendered into."""


def typescript() -> str:
    """typescript/conformance/generated/levels.ts: the attention core's levels, the kit's."""
    rows = []
    for level in CORE_LEVELS:
        name, tags = json.dumps(level.name, ensure_ascii=False), json.dumps(list(level.tags))
        row = f"  {{ name: {name}, tags: {tags} }},"
        if len(row) > TYPESCRIPT_WIDTH:
            row = f"  {{\n    name: {name},\n    tags: {tags},\n  }},"
        rows.append(row)
    return "\n".join(
        [
            f"// Generated from {SOURCE} by `attention-port contract` (scripts/generate-contract): do not",
            "// edit. Edit the records there and regenerate; a test holds this file to them.",
            "",
            "/** One level of `attention-port check`: its name, and the tags that put a case on it. */",
            "export interface Level {",
            "  readonly name: string;",
            "  readonly tags: readonly string[];",
            "}",
            "",
            "/** The attention core's levels, easiest first, numbered from 1: the conformance kit's. */",
            "export const LEVELS: readonly Level[] = [",
            *rows,
            "];",
            "",
            "/** The level of a case whose tags name no level. */",
            f"export const PLAIN_LEVEL = {PLAIN_LEVEL};",
            "",
        ]
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(levels: tuple[Level, ...]) -> str:
    lines = [
        "| # | level | what it adds to your implementation | the mistake it usually catches |",
        "| ---: | --- | --- | --- |",
    ]
    lines += [
        f"| {level.number} | {_cell(level.name)} | {_cell(level.adds)} | {_cell(level.catches)} |"
        for level in levels
    ]
    return "\n".join(lines)


def _kit_levels() -> str:
    listed = ", ".join(f"{level.number} {level.name}" for level in CORE_LEVELS)
    text = (
        f"A case's `level` is one of `attention-port check`'s levels for the attention core: {listed}"
        " ([learn.md](learn.md#the-levels) says what each adds)."
    )
    return textwrap.fill(text, PAGE_WIDTH, break_long_words=False, break_on_hyphens=False)


def with_sections(text: str, bodies: list[str], where: str = "the page") -> str:
    """`text` with its sections generated from contract/levels.json, in order, holding `bodies`;
    everything outside them (other generated sections too) as it was."""
    parts = text.split(START)
    if len(parts) != len(bodies) + 1 or not all(END in part for part in parts[1:]):
        raise SectionsMissing(f"{where}: expected {len(bodies)} sections between {START} and {END}")
    out = [parts[0]]
    for body, part in zip(bodies, parts[1:], strict=True):
        out.append(f"{START}\n\n{body}\n\n{END}{part.split(END, 1)[1]}")
    return "".join(out)


def _page(path: str, bodies: list[str]) -> str:
    return with_sections((REPO_ROOT / path).read_text(encoding="utf-8"), bodies, path)


def learn_page() -> str:
    """docs/learn.md: the core's level table, then the layer's."""
    return _page("docs/learn.md", [_table(CORE_LEVELS), _table(LAYER_LEVELS)])


def kit_page() -> str:
    """docs/conformance-kit.md: the levels a kit case can have."""
    return _page("docs/conformance-kit.md", [_kit_levels()])
