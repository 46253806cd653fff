"""The README stays one screenful, and every relative link in the docs leads somewhere.

A link is `[text](target)` or `![alt](target)` with a target that is not a URL; it must name a file
of the checkout, and its `#anchor`, if any, a heading of that file (GitHub's slugs: lower case,
punctuation dropped, spaces to hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attention_port.paths import DOCS, IN_CHECKOUT, REPO_ROOT

pytestmark = pytest.mark.skipif(not IN_CHECKOUT, reason="reads the checkout's docs")
README_MOST_LINES = 150
PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "fixtures" / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_the_readme_fits_in_one_screenful():
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MOST_LINES


def _broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO_ROOT)))
def test_every_relative_link_names_a_file_and_a_heading_that_exist(page):
    assert _broken_links(page) == []


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("## 4. Errors, and more\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# A title\n[ok](#a-title) [ok](other.md#4-errors-and-more) [web](https://example.org/x)\n"
        "[gone](missing.md) [bad](#nowhere) ![img](other.md#elsewhere)\n```\n[in code](skipped.md)\n```\n"
    )
    assert _broken_links(page) == [
        "missing.md: no such file",
        "#nowhere: no heading #nowhere in page.md",
        "other.md#elsewhere: no heading #elsewhere in other.md",
    ]


def test_the_docs_layer_transcripts_point_at_the_lesson_lines_check_points_at():
    """A transcript of check in the docs names a lesson line: it must be one that a named layer
    mistake's pointer gives today, so that a moved line fails here instead of going stale."""
    from attention_port.learner import layer_mistakes

    pointers = {
        mistake.pointer(language).strip()
        for mistake in layer_mistakes.ALL
        for language in layer_mistakes.LESSONS
    }
    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for cited in re.findall(r"\(the lesson does it right at \S+ line \d+\)", text):
            assert cited in pointers, (page.name, cited)


def test_the_docs_level_guides_point_at_the_lesson_lines_check_points_at():
    """check's level guide reads "Read FILE lines 124 (mask), 131 (bool mask)": each cited line must
    be where the lesson does that topic today."""
    from attention_port.learner import lesson

    for page in PAGES:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for file, cited in re.findall(r"Read (\S+) lines? ((?:\d+ \([a-z ]+\)(?:, )?)+)", text):
            language = "JavaScript" if file.endswith(".ts") else "Python"
            for line, topic in re.findall(r"(\d+) \(([a-z ]+)\)", cited):
                assert lesson.place(topic.replace(" ", "_"), language) == f"{file} line {line}", (
                    page.name,
                    topic,
                )
