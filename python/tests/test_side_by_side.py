"""docs/side-by-side.md is generated from the sources and must match them."""

from __future__ import annotations

import pytest

from attention_port.pages import side_by_side


def test_page_is_up_to_date():
    assert side_by_side.is_fresh(), "run `attention-port side-by-side` and commit docs/side-by-side.md"


def test_a_missing_label_is_reported(tmp_path):
    source = side_by_side.TYPESCRIPT_SOURCE.read_text().replace("// Step 3:", "// step three:")
    with pytest.raises(side_by_side.SourceLayoutError, match=r"found \[1, 2, 4, 5\]"):
        side_by_side.step_blocks(source, "//", tmp_path / "attention.ts")


@pytest.mark.parametrize("body_lines", [0, 1, 3])
def test_the_whole_docstring_is_shown(body_lines, tmp_path):
    body = [f"    line {n} of the docstring." for n in range(body_lines)]
    docstring = ['    """One line."""'] if not body_lines else ['    """Opening line.', *body, '    """']
    text = "\n".join(["def attention_steps(query, key,", "        value):", *docstring, "    return 1"])
    shown = side_by_side.signature_and_doc(text, "def attention_steps(", tmp_path / "reference.py")
    assert shown == "\n".join(["def attention_steps(query, key,", "        value):", *docstring])
