"""The fixture folder: fresh, regenerated atomically, checked against its schema, and refused
clearly when damaged."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR

from attention_port import cases as case_table
from attention_port import cli, fixtures, generate, oracle
from attention_port.inputs import ERROR_KINDS


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_committed_fixtures_are_fresh(tmp_path):
    generate.write_fixtures(tmp_path / "fixtures")
    assert _tree(tmp_path / "fixtures") == _tree(FIXTURES_DIR), "run `attention-port generate` and commit"


def test_case_table_size_and_seeds():
    valid = [c for c in case_table.CASES if not c.expects_error]
    invalid = [c for c in case_table.CASES if c.expects_error]
    assert len(valid) >= 30 and len(invalid) >= 15
    assert len({c.seed for c in case_table.CASES}) == len(case_table.CASES), "each case has its own seed"
    assert len({c.id for c in case_table.CASES}) == len(case_table.CASES)
    # Every kind but size: a fixture refused for its size would have to be that large.
    # test_inputs.py and inputs.test.ts hold both languages to the size message instead.
    assert {c.error[0] for c in invalid} == set(ERROR_KINDS) - {"size"}


def test_every_tag_is_documented_and_used():
    used = {tag for case in case_table.CASES + case_table.ARRAY_CASES for tag in case.tags}
    assert used == set(case_table.TAGS), "tags and cases.TAGS differ"


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
    generate.write_fixtures(tmp_path / "f", [extra, *case_table.CASES])
    for name, data in _tree(FIXTURES_DIR).items():
        if name.startswith("cases/"):
            assert (tmp_path / "f" / name).read_bytes() == data, name


def test_no_bare_nan_or_infinity_in_files():
    for path in FIXTURES_DIR.rglob("*.json"):
        json.loads(
            path.read_text(), parse_constant=lambda c, path=path: pytest.fail(f"{path} holds bare {c}")
        )


# The staging and swap tests need a folder of a few cases, not the oracle's run over every case.
FEW = case_table.CASES[:3]


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
        generate.write_fixtures(target)
    assert _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"], "no temporary folder left behind"


def test_the_swap_never_leaves_the_folder_missing(tmp_path, monkeypatch):
    """The new folder replaces the old in one exchange: nothing ever renames the folder away."""
    target = _copy(tmp_path)
    (target / "cases" / "stale_case.json").write_text("{}")  # the new folder must not keep it
    real_rename, real_exchange = generate.os.rename, generate._exchange
    seen = []

    def rename(source, destination):
        assert Path(source) != target, "the fixture folder was renamed away"
        real_rename(source, destination)

    def exchange(first, second):
        seen.append((target / "manifest.json").is_file())
        swapped = real_exchange(first, second)
        seen.append((target / "manifest.json").is_file())
        return swapped

    monkeypatch.setattr(generate.os, "rename", rename)
    monkeypatch.setattr(generate, "_exchange", exchange)
    generate.write_fixtures(target, FEW)
    assert seen == [True, True]
    # The new folder, whole: its cases alone (the old folder's, stale_case.json too, went with it).
    assert sorted(p.name for p in (target / "cases").iterdir()) == sorted(f"{c.id}.json" for c in FEW)
    assert [case.id for case in fixtures.load_fixtures(target)] == [c.id for c in FEW]
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"], "the old folder is removed"


def test_failed_swap_puts_the_old_folder_back(tmp_path, monkeypatch):
    """Where the system cannot exchange two folders, two renames, undone when the second fails."""
    target = _copy(tmp_path)
    before = _tree(target)
    real_rename = generate.os.rename
    failed = []

    def rename(source, destination):
        # The first rename into place (new folder in) fails; putting the old one back works.
        if Path(destination) == target and not failed:
            failed.append(source)
            raise OSError("disk full")
        real_rename(source, destination)

    monkeypatch.setattr(generate, "_exchange", lambda first, second: False)
    monkeypatch.setattr(generate.os, "rename", rename)
    with pytest.raises(OSError):
        generate.write_fixtures(target, FEW)
    assert failed and _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"]


def test_generate_removes_staging_folders_left_by_a_killed_run(tmp_path):
    target = _copy(tmp_path)
    dead = tmp_path / ".fixtures.new-999999999-abc"  # no such process
    unnamed = tmp_path / ".fixtures.new-xyz"  # an older generate's name
    alive = tmp_path / f".fixtures.new-{os.getppid()}-abc"  # another generate at work
    for folder in (dead, unnamed, alive):
        (folder / "cases").mkdir(parents=True)
        (folder / "manifest.json").write_text("{}")
    generate.write_fixtures(target, FEW)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["fixtures", alive.name])


def test_generate_refuses_a_folder_that_is_not_fixtures(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(fixtures.FixtureError, match="refusing to replace"):
        generate.write_fixtures(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_generate_into_a_file_or_below_one_is_one_line_and_exit_2(tmp_path, capsys):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for out in (a_file, a_file / "fixtures"):
        status = cli.main(["generate", "--out", str(out)])
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured.err
        assert str(a_file) in lines[0] and "not a folder" in lines[0]
    assert a_file.read_text() == "mine"
    assert list(tmp_path.iterdir()) == [a_file], "nothing else is written"


def _rewrite_case(folder: Path, case_id: str, edit) -> None:
    """Edit one case file and fix its sha256 in the manifest, so the edit itself is what fails."""
    manifest_path = folder / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    entry = next(e for e in manifest["cases"] if e["id"] == case_id)
    path = folder / entry["file"]
    text = edit(path.read_text())
    path.write_text(text)
    entry["sha256"] = fixtures.sha256(text.encode())
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
    "directory_for_case": (
        lambda f: ((f / "cases" / "rank2_square.json").unlink(), (f / "cases" / "rank2_square.json").mkdir()),
        "cannot be read (Is a directory)",
    ),
    "bare_nan": (  # json.dumps writes NaN bare; the TypeScript reader would refuse it too
        lambda f: _rewrite_case(f, "rank2_square", _set(["inputs", "query", "data", 0, 0], float("nan"))),
        "holds a bare NaN",
    ),
    "unexpected_field": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["expected", "extra"], [1.0])),
        "unexpected field 'expected.extra'",
    ),
    "expected_and_error": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["expected_error"], {"kind": "type", "message": ""})),
        "needs exactly one of 'expected' and 'expected_error'",
    ),
    "wrong_type": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["params", "is_causal"], "yes")),
        "field 'params.is_causal' has the wrong type",
    ),
    "unknown_error_kind": (
        lambda f: _rewrite_case(f, "error_query_rank1", _set(["expected_error", "kind"], "oops")),
        "field 'expected_error.kind' is \"oops\"",
    ),
    "manifest_entry_without_sha256": (
        lambda f: (f / "manifest.json").write_text(
            (f / "manifest.json").read_text().replace('"sha256"', '"sha"', 1)
        ),
        "missing field 'cases[0].sha256'",
    ),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS, ids=str)
def test_corrupt_fixtures_give_one_clear_line(tmp_path, capsys, corruption):
    damage, expected = CORRUPTIONS[corruption]
    target = _copy(tmp_path)
    damage(target)
    before = _tree(target)
    with pytest.raises(fixtures.FixtureError, match=re.escape(expected)):
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


def test_the_schema_lists_the_shared_error_kinds():
    schema = json.loads((fixtures.SCHEMA_DIR / fixtures.SCHEMA_FILES[fixtures.MANIFEST_FORMAT]).read_text())
    assert tuple(schema["$defs"]["error_kind"]["enum"]) == ERROR_KINDS
