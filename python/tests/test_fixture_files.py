"""The fixture folder: fresh, regenerated atomically, and refused clearly when damaged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ALL_CASES, FIXTURES_DIR

from attention_port import cases as case_table
from attention_port import cli, fixtures, oracle


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_committed_fixtures_are_fresh(tmp_path):
    fixtures.write_fixtures(tmp_path / "fixtures")
    assert _tree(tmp_path / "fixtures") == _tree(FIXTURES_DIR), "run `attention-port generate` and commit"


def test_case_table_size_and_seeds():
    valid = [c for c in case_table.CASES if not c.expects_error]
    invalid = [c for c in case_table.CASES if c.expects_error]
    assert len(valid) >= 30 and len(invalid) >= 15
    assert len({c.seed for c in case_table.CASES}) == len(case_table.CASES), "each case has its own seed"
    assert len({c.id for c in case_table.CASES}) == len(case_table.CASES)
    assert {c.error[0] for c in invalid} == set(fixtures.ERROR_KINDS)


def test_adding_a_case_changes_no_other(tmp_path):
    extra = case_table.Case(
        id="extra_case",
        seed=999,
        tags=("rank2",),
        description="An extra case",
        query=(2, 4),
        key=(3, 4),
        value=(3, 4),
    )
    fixtures.write_fixtures(tmp_path / "f", [extra, *case_table.CASES])
    for name, data in _tree(FIXTURES_DIR).items():
        if name.startswith("cases/"):
            assert (tmp_path / "f" / name).read_bytes() == data, name


def test_no_bare_nan_or_infinity_in_files():
    for path in FIXTURES_DIR.rglob("*.json"):
        json.loads(
            path.read_text(), parse_constant=lambda c, path=path: pytest.fail(f"{path} holds bare {c}")
        )


def _copy(tmp_path) -> Path:
    target = tmp_path / "fixtures"
    shutil.copytree(FIXTURES_DIR, target)
    return target


def test_interrupted_generate_leaves_old_fixtures_whole(tmp_path, monkeypatch):
    target = _copy(tmp_path)
    before = _tree(target)
    calls = {"n": 0}
    real = oracle.attention

    def interrupted(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 10:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(oracle, "attention", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fixtures.write_fixtures(target)
    assert _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"], "no temporary folder left behind"


def test_failed_swap_puts_the_old_folder_back(tmp_path, monkeypatch):
    target = _copy(tmp_path)
    before = _tree(target)
    real_rename = fixtures.os.rename
    failed = []

    def rename(source, destination):
        # The first rename into place (new folder in) fails; putting the old one back works.
        if Path(destination) == target and not failed:
            failed.append(source)
            raise OSError("disk full")
        real_rename(source, destination)

    monkeypatch.setattr(fixtures.os, "rename", rename)
    with pytest.raises(OSError):
        fixtures.write_fixtures(target)
    assert _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"]


def test_generate_refuses_a_folder_that_is_not_fixtures(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(fixtures.FixtureError, match="refusing to replace"):
        fixtures.write_fixtures(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def _rewrite_case(folder: Path, case_id: str, edit) -> None:
    """Edit one case file and fix its sha256 in the manifest, so the edit itself is what fails."""
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    entry = next(e for e in manifest["cases"] if e["id"] == case_id)
    path = folder / entry["file"]
    text = edit(path.read_text())
    path.write_text(text)
    entry["sha256"] = fixtures._sha256(text.encode())
    manifest_path.write_text(json.dumps(manifest))


def _set(key_path, value):
    def edit(text):
        document = json.loads(text)
        node = document
        for key in key_path[:-1]:
            node = node[key]
        if value is KeyError:
            del node[key_path[-1]]
        else:
            node[key_path[-1]] = value
        return json.dumps(document)

    return edit


CORRUPTIONS = {
    "bad_json": (lambda f: _rewrite_case(f, "rank2_square", lambda t: t[:-20]), "is not valid JSON"),
    "old_version": (  # a folder written before `logits` was stored
        lambda f: (f / "manifest.json").write_text(
            (f / "manifest.json")
            .read_text()
            .replace(f'"version": {fixtures.FORMAT_VERSION}', '"version": 1', 1)
        ),
        "format version 1 is not supported",
    ),
    "missing_field": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["expected", "weights"], KeyError)),
        "missing field 'expected.weights'",
    ),
    "ragged_array": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["inputs", "query", "data", 1], [1.0, 2.0])),
        "inputs.query.data",
    ),
    "sha256_mismatch": (
        lambda f: (f / "cases" / "rank2_square.json").write_text(
            (f / "cases" / "rank2_square.json").read_text().replace("1", "2", 1)
        ),
        "sha256",
    ),
    "path_leaves_folder": (
        lambda f: (f / "manifest.json").write_text(
            (f / "manifest.json").read_text().replace('"cases/rank2_square.json"', '"../../etc/passwd"')
        ),
        "leaves the fixture folder",
    ),
    "missing_file": (lambda f: (f / "cases" / "rank2_square.json").unlink(), "missing"),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=str)
def test_corrupt_fixtures_give_one_clear_line(tmp_path, capsys, corruption):
    damage, expected = CORRUPTIONS[corruption]
    target = _copy(tmp_path)
    damage(target)
    before = _tree(target)
    with pytest.raises(fixtures.FixtureError, match=expected):
        fixtures.load_fixtures(target)
    status = cli.main(["verify", "--ports", "numpy", "--fixtures", str(target)])
    captured = capsys.readouterr()
    assert status == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], captured.err
    assert "Traceback" not in captured.err + captured.out
    assert _tree(target) == before, "verify never writes to the fixture folder"


def test_generate_check_reports_stale_fixtures(tmp_path, capsys):
    target = _copy(tmp_path)
    assert cli.main(["generate", "--check", "--out", str(target)]) == 0
    (target / "README.md").write_text("edited")
    assert cli.main(["generate", "--check", "--out", str(target)]) == 1
    assert "stale" in capsys.readouterr().out


def test_loader_round_trips_every_case():
    assert [c.id for c in ALL_CASES] == [c.id for c in case_table.CASES]
    for case in ALL_CASES:
        assert case.path.is_file()
