"""Every file generated from the contract's declaration (contract/), written by
`attention-port contract` and held fresh by a test (`attention-port contract --check`).

Each entry maps a repository-relative path to the function that renders its whole text from
contract/*.json. A generated file says so in its first lines; nobody edits it by hand.
"""

from __future__ import annotations

from collections.abc import Callable

from attention_port.files import write_atomic
from attention_port.pages import levels
from attention_port.paths import REPO_ROOT

# path (relative to the checkout) -> the text it must hold. Add a line here for a new generated file.
GENERATED: dict[str, Callable[[], str]] = {
    "typescript/conformance/generated/levels.ts": levels.typescript,
    "docs/learn.md": levels.learn_page,
    "docs/conformance-kit.md": levels.kit_page,
}


def stale() -> list[str]:
    """The generated files whose text on disk is not what the contract gives."""
    out = []
    for path, render in GENERATED.items():
        target = REPO_ROOT / path
        if not target.is_file() or target.read_text(encoding="utf-8") != render():
            out.append(path)
    return out


def write() -> list[str]:
    """Write every generated file that is stale; returns the paths written."""
    written = stale()
    for path in written:
        write_atomic(REPO_ROOT / path, GENERATED[path]())
    return written
