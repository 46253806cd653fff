"""What TypeScript and the docs need of the check levels, rendered from contract/levels.json.

`attention-port contract` writes each (pages/generated.py): the conformance kit's levels as
TypeScript (typescript/conformance/generated/levels.ts), docs/learn.md's table of the levels and
docs/conformance-kit.md's list of the kit's levels, each a section of its page.
"""

from __future__ import annotations

import json
import textwrap

from attention_port.golden.cases import CORE_LEVELS, LEVELS, PLAIN_LEVEL

SOURCE = "contract/levels.json"
TYPESCRIPT_WIDTH = 110  # Biome's lineWidth (biome.json): a longer record goes on lines of its own
PAGE_WIDTH = 100  # the docs' prose lines (a table's rows are as long as they are)


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


def learn_table() -> list[str]:
    """docs/learn.md's table of every level: what each adds, and the mistake it usually catches."""
    table = [
        "| # | level | what it adds to your implementation | the mistake it usually catches |",
        "| ---: | --- | --- | --- |",
    ]
    table += [
        f"| {level.number} | {_cell(level.name)} | {_cell(level.adds)} | {_cell(level.catches)} |"
        for level in LEVELS
    ]
    return table


def kit_levels() -> list[str]:
    """docs/conformance-kit.md's list of the levels a kit case can have: the attention core's."""
    listed = ", ".join(f"{level.number} {level.name}" for level in CORE_LEVELS)
    text = (
        f"A case's `level` is one of `attention-port check`'s levels for the attention core: {listed}"
        " ([learn.md](learn.md#the-levels) says what each adds)."
    )
    return textwrap.wrap(text, PAGE_WIDTH, break_long_words=False, break_on_hyphens=False)
