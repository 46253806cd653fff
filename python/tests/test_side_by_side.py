"""docs/side-by-side.md is generated from the sources and must match them."""

from __future__ import annotations

import pytest

from attention_port import side_by_side


def test_page_is_up_to_date():
    assert side_by_side.is_fresh(), "run `attention-port side-by-side` and commit docs/side-by-side.md"


def test_a_missing_label_is_reported(tmp_path):
    source = side_by_side.TYPESCRIPT_SOURCE.read_text().replace("// Step 3:", "// step three:")
    with pytest.raises(side_by_side.SourceLayoutError, match=r"found \[1, 2, 4, 5\]"):
        side_by_side.step_blocks(source, "//", tmp_path / "attention.ts")
