"""The fixture folder: fresh, regenerated atomically, checked against its schema, and refused
clearly when damaged."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES_DIR

from attention_port import cli, reference
from attention_port.golden import cases as case_table
from attention_port.golden import generate, oracle
from attention_port.golden import reader as fixtures
from attention_port.inputs import ERROR_KINDS


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


_RENDERED: dict[int, tuple[case_table.Case, str]] = {}
_RENDER_CASE = generate.render_case


def _render_once(case: case_table.Case) -> str:
    """generate.render_case, its answer kept for the same case: the first render is the real one,
    so a folder written through this is byte for byte what generate writes."""
    kept = _RENDERED.get(id(case))
    if kept is None or kept[0] is not case:
        kept = _RENDERED[id(case)] = (case, _RENDER_CASE(case))
    return kept[1]


@pytest.fixture
def oracle_once(monkeypatch):
    """The oracle's run over every case is most of a regeneration's time, and four regenerations
    here (a fresh folder, three `generate --check`) would each redo it: each case's file is
    rendered once in this process instead. The tests of generate's own steps (interrupted, swapped,
    failing) keep the real render_case, and so does the one that adds a case, which must see every
    other case rendered after the new one (rendered_after_a_new_case)."""
    monkeypatch.setattr(generate, "render_case", _render_once)


def _render_and_keep(case: case_table.Case) -> str:
    """generate.render_case, always run, its answer kept for _render_once."""
    _RENDERED[id(case)] = (case, _RENDER_CASE(case))
    return _RENDERED[id(case)][1]


@pytest.fixture(scope="module")
def rendered_after_a_new_case(tmp_path_factory) -> Path:
    """A folder written with a case the table does not have first, every case really rendered after
    it, and each render kept for oracle_once: the test that adds a case reads the folder, and the
    test of the committed folder's freshness writes its folder from those renders rather than run
    the oracle over every case a second time (a render that changed with what was rendered before
    it would fail the first of the two)."""
    folder = tmp_path_factory.mktemp("added") / "f"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generate, "render_case", _render_and_keep)
        generate.write_fixtures(folder, [EXTRA_CASE, *case_table.FIXTURE_CASES])
    return folder


def test_committed_fixtures_are_fresh(tmp_path, rendered_after_a_new_case, oracle_once):
    generate.write_fixtures(tmp_path / "fixtures")
    assert _tree(tmp_path / "fixtures") == _tree(FIXTURES_DIR), "run `attention-port generate` and commit"


def test_case_table_size_and_seeds():
    valid = [c for c in case_table.CASES if not c.expects_error]
    invalid = [c for c in case_table.CASES if c.expects_error]
    assert len(valid) >= 30 and len(invalid) >= 15
    assert len({c.seed for c in case_table.FIXTURE_CASES}) == len(case_table.FIXTURE_CASES), "own seeds"
    assert len({c.id for c in case_table.CASES}) == len(case_table.CASES)
    # Every kind but size: a fixture refused for its size would have to be that large.
    # test_inputs.py and inputs.test.ts hold both languages to the size message instead.
    assert {c.error[0] for c in invalid} == set(ERROR_KINDS) - {"size"}


def test_every_tag_is_documented_and_used():
    used = {tag for case in case_table.FIXTURE_CASES + case_table.ARRAY_CASES for tag in case.tags}
    assert used == set(case_table.TAGS), "tags and cases.TAGS differ"


EXTRA_CASE = case_table.Case(
    id="extra_case",
    seed=999,
    tags=("rank2",),
    description="An extra case",
    query=(2, 4),
    key=(3, 4),
    value=(3, 4),
)


def test_adding_a_case_changes_no_other(rendered_after_a_new_case):
    for name, data in _tree(FIXTURES_DIR).items():
        if name.startswith("cases/"):
            assert (rendered_after_a_new_case / name).read_bytes() == data, name


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
    with pytest.raises(fixtures.FixtureError, match="disk full"):
        generate.write_fixtures(target, FEW)
    assert failed and _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"]


def _staging(tmp_path: Path, name: str, marked: bool) -> Path:
    folder = tmp_path / name
    (folder / "fixtures" / "cases").mkdir(parents=True)
    (folder / "fixtures" / "manifest.json").write_text("{}")
    if marked:
        (folder / generate.STAGING_MARKER).write_text("")
    return folder


def test_generate_removes_only_its_own_stale_staging_folders(tmp_path):
    """Removed: the exact staging name, the marker inside, a process that is gone. Everything else
    that looks like one stays: a user's `.fixtures.new-backup`, a folder without the marker, one of
    a live process, a symlink to a marked folder, a file of the exact name."""
    target = _copy(tmp_path)
    dead = _staging(tmp_path, ".fixtures.new-999999999-abcd_012", marked=True)  # no such process
    kept = [
        _staging(tmp_path, ".fixtures.new-backup", marked=True),
        _staging(tmp_path, ".fixtures.new-999999999-backup00", marked=False),
        _staging(tmp_path, ".fixtures.new-999999999-abc", marked=True),  # not mkdtemp's 8 characters
        _staging(tmp_path, ".fixtures.new-999999999-abcdefgh-old", marked=True),
        _staging(tmp_path, f".fixtures.new-{os.getppid()}-abcdefgh", marked=True),  # a generate at work
        _staging(tmp_path, ".other.new-999999999-abcdefgh", marked=True),  # another folder's
    ]
    elsewhere = _staging(tmp_path / "elsewhere", "marked", marked=True)
    (tmp_path / ".fixtures.new-999999998-linkedxx").symlink_to(elsewhere)
    (tmp_path / ".fixtures.new-999999997-afile000").write_text("mine")
    before = {p.name for p in tmp_path.iterdir()}
    assert generate.remove_stale_staging(target) == [dead]
    assert {p.name for p in tmp_path.iterdir()} == before - {dead.name}
    assert all((folder / "fixtures" / "manifest.json").is_file() for folder in [*kept, elsewhere])
    generate.write_fixtures(target, case_table.CASES[:1])  # a real run leaves them too, and its own none
    assert {p.name for p in tmp_path.iterdir()} == before - {dead.name}


def test_a_killed_generate_leaves_only_a_marked_staging_folder(tmp_path, monkeypatch):
    """Killed after writing (nothing cleaned up), what is left beside the target carries the
    marker, so the next run removes it once that process is gone."""
    target = _copy(tmp_path)

    def killed(fresh, folder):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "_swap_in", killed)
    monkeypatch.setattr(generate.shutil, "rmtree", lambda *args, **kwargs: None)  # as if killed
    with pytest.raises(KeyboardInterrupt):
        generate.write_fixtures(target, case_table.CASES[:1])
    monkeypatch.undo()
    left = [p for p in tmp_path.iterdir() if p.name != "fixtures"]
    assert len(left) == 1 and (left[0] / generate.STAGING_MARKER).is_file()
    # Its name, as if the process that wrote it were gone (this one is alive, and its own is skipped).
    suffix = left[0].name.rsplit("-", 1)[1]
    dead = left[0].rename(tmp_path / f".fixtures.new-999999999-{suffix}")
    assert generate.remove_stale_staging(target) == [dead]


def _foreign_folders(tmp_path: Path) -> dict[str, Path]:
    """Folders generate did not write, each holding a file of its owner that must survive."""
    folders = {}

    def make(name: str, files: dict[str, str]) -> None:
        folder = tmp_path / name
        for relative, text in files.items():
            (folder / relative).parent.mkdir(parents=True, exist_ok=True)
            (folder / relative).write_text(text)
        folders[name] = folder

    manifest = (FIXTURES_DIR / "manifest.json").read_text()
    make("empty_manifest_and_src", {"manifest.json": "{}", "src/a": "x"})  # the reported loss
    make("other_format_manifest", {"manifest.json": '{"format": "npm"}', "cases/a.json": "{}"})
    make("manifest_not_json", {"manifest.json": "not json", "notes.txt": "mine"})
    make("manifest_deep", {"manifest.json": "[" * 100_000, "notes.txt": "mine"})
    make("fixtures_and_src", {"manifest.json": manifest, "src/a": "x"})
    make("fixtures_and_notes", {"manifest.json": manifest, "notes.md": "mine"})
    make("fixtures_and_dotfile", {"manifest.json": manifest, ".env": "SECRET=1"})
    make("fixtures_cases_holds_text", {"manifest.json": manifest, "cases/notes.txt": "mine"})
    make("fixtures_schema_holds_text", {"manifest.json": manifest, "schema/notes.txt": "mine"})
    make("cases_is_a_file", {"manifest.json": manifest, "cases": "mine"})
    make("only_a_readme", {"README.md": "mine"})
    nested = tmp_path / "folder_in_cases"
    shutil.copytree(FIXTURES_DIR, nested)
    (nested / "cases" / "mine").mkdir()
    (nested / "cases" / "mine" / "a.json").write_text("{}")
    folders[nested.name] = nested
    return folders


def _contents(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_generate_replaces_only_a_folder_it_wrote(tmp_path, capsys):
    """Refused in one line (exit 2) and left as it was: every folder that is neither empty nor a
    fixture folder holding only what generate writes."""
    folders = _foreign_folders(tmp_path)
    for name, folder in folders.items():
        before = _contents(folder)
        status = cli.main(["generate", "--out", str(folder)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert status == 2 and len(lines) == 1 and "refusing to replace it" in lines[0], (name, lines)
        assert _contents(folder) == before, name
    assert not [p for p in tmp_path.iterdir() if ".new-" in p.name], "no staging folder left"


def test_generate_replaces_an_empty_folder_and_a_fixture_folder_with_a_damaged_manifest(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert generate.write_fixtures(empty, case_table.CASES[:2]) == 2
    damaged = _copy(tmp_path)
    (damaged / "manifest.json").write_text("{ damaged")  # still recognised by its schema/
    (damaged / "cases" / "stale_case.json").write_text("{}")
    assert generate.write_fixtures(damaged, case_table.CASES[:2]) == 2
    written = sorted(p.name for p in (damaged / "cases").iterdir())
    assert written == sorted(f"{case.id}.json" for case in case_table.CASES[:2])


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
    "version_before_budgets": (  # a folder whose judges derived the budgets themselves
        lambda f: (f / "manifest.json").write_text(
            (f / "manifest.json")
            .read_text()
            .replace(f'"version": {fixtures.FORMAT_VERSION}', '"version": 4', 1)
        ),
        "format version 4 is not supported (this code reads version 5); regenerate",
    ),
    "budget_of_another_shape": (
        lambda f: _rewrite_case(
            f, "rank2_square", _set(["expected", "budgets", "float32", "output"], {"shape": [1], "data": [1]})
        ),
        "expected.budgets.float32.output and expected.output differ in shape",
    ),
    "infinite_budget_without_fallback": (
        lambda f: _rewrite_case(
            f,
            "rank2_square",
            _set(
                ["expected", "budgets", "float16", "output"],
                {"shape": [6, 8], "data": [["Infinity"] * 8] * 6},
            ),
        ),
        "expected.budgets.float16.output is infinite where no fallback is given",
    ),
    "scaled_budget_without_its_value": (  # float32's budget as float64's times 2^29, one place unsaid
        lambda f: _rewrite_case(
            f, "rank2_square", _set(["expected", "budgets", "float32", "output", "index"], [7])
        ),
        "expected.budgets.float32.output.index and expected.budgets.float32.output.data differ in length",
    ),
    "scaled_budget_past_the_end": (
        lambda f: _rewrite_case(
            f,
            "rank2_square",
            _set(
                ["expected", "budgets", "float32", "output"],
                {"float64_times": 2.0, "index": [48], "data": [1]},
            ),
        ),
        "expected.budgets.float32.output.index holds a position outside the tensor",
    ),
    "missing_budget": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["expected", "budgets", "bfloat16"], KeyError)),
        "missing field 'expected.budgets.bfloat16'",
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
        "is a folder, not a regular file",
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


def _replace(path: Path, make) -> None:
    path.unlink()
    make(path)


def _reseal(case_id: str, old: str, new: str):
    """Replace `old` by `new` in one case file and reseal it (the manifest's sha256)."""

    def damage(folder: Path) -> None:
        def edit(text: str) -> str:
            assert old in text, old
            return text.replace(old, new, 1)

        _rewrite_case(folder, case_id, edit)

    return damage


def _edit_manifest(edit):
    def damage(folder: Path) -> None:
        manifest = json.loads((folder / "manifest.json").read_text())
        edit(manifest)
        (folder / "manifest.json").write_text(json.dumps(manifest))

    return damage


def _entry(manifest: dict, case_id: str) -> dict:
    return next(e for e in manifest["cases"] if e["id"] == case_id)


# Faults of a folder a user edited, each refused in one line naming the file.
CORRUPTIONS |= {
    "symlink_loop": (
        lambda f: _replace(f / "cases" / "rank2_square.json", lambda p: p.symlink_to(p.name)),
        "cannot be resolved (a symlink loop?)",
    ),
    "empty_case_list": (_edit_manifest(lambda m: m.update(cases=[])), "lists no case"),
    # Valid JSON that no reader could use: each would surface as an OverflowError or a
    # RecursionError traceback if the reader did not refuse it as it parses.
    "integer_beyond_float64": (
        lambda f: _rewrite_case(f, "rank2_square", _set(["expected", "score_bound"], 10**400)),
        "holds an integer of 401 digits, beyond the float64 range",
    ),
    "number_beyond_float64": (
        lambda f: _rewrite_case(
            f, "rank2_square", lambda t: t.replace('"seed": ', '"seed": 1e400, "x": ', 1)
        ),
        "holds the number 1e400, beyond the float64 range",
    ),
    "nested_100000_deep": (
        lambda f: _rewrite_case(
            f,
            "rank2_square",
            lambda t: t.replace('"seed": ', f'"x": {"[" * 100_000}{"]" * 100_000}, "seed": ', 1),
        ),
        "nests arrays or objects more than 100 deep",
    ),
    "manifest_tags_contradict": (
        _edit_manifest(lambda m: _entry(m, "rank2_square").update(tags=["rank2", "causal"])),
        "tags ['rank2'] differ from the manifest's ['rank2', 'causal']",
    ),
    "manifest_expect_contradicts": (
        _edit_manifest(lambda m: _entry(m, "rank2_square").update(expect="error")),
        "expects an output, but the manifest says an error",
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


@pytest.mark.parametrize("corruption", ["integer_beyond_float64", "nested_100000_deep"])
def test_check_refuses_absurd_fixtures_in_one_line(tmp_path, capsys, corruption):
    """check reads the fixtures through the same reader as verify, before any learner runs."""
    damage, expected = CORRUPTIONS[corruption]
    target = _copy(tmp_path)
    damage(target)
    learner = Path(__file__).parent / "learner_files" / "no_mistake.py"
    status = cli.main(["check", "--fixtures", str(target), str(learner)])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and expected in lines[0], captured.err
    assert "Traceback" not in captured.err + captured.out


def test_generate_check_reports_stale_fixtures(tmp_path, capsys, oracle_once):
    target = _copy(tmp_path)
    assert cli.main(["generate", "--check", "--out", str(target)]) == 0
    (target / "README.md").write_text("edited")
    assert cli.main(["generate", "--check", "--out", str(target)]) == 1
    assert "stale" in capsys.readouterr().out


def test_the_schema_lists_the_shared_error_kinds():
    schema = json.loads((fixtures.SCHEMA_DIR / fixtures.SCHEMA_FILES[fixtures.MANIFEST_FORMAT]).read_text())
    assert tuple(schema["$defs"]["error_kind"]["enum"]) == ERROR_KINDS


LEARNER = Path(reference.__file__)  # the project's own port, as a learner's file


def _drop_case(folder: Path, case_id: str) -> None:
    """Remove a case from the manifest and the folder alike: a folder consistent in itself."""
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["cases"] = [e for e in manifest["cases"] if e["id"] != case_id]
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "cases" / f"{case_id}.json").unlink()


def test_verify_warns_when_the_folder_lacks_a_case_of_the_table(tmp_path, capsys):
    target = _copy(tmp_path)
    _drop_case(target, "fully_masked_bool_nan_inf_value")
    status = cli.main(["verify", "--ports", "numpy", "--fixtures", str(target)])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 0
    assert err == [
        f"warning: {target} lacks 1 case(s) of cases.py (e.g. fully_masked_bool_nan_inf_value);"
        " run `attention-port generate` to refresh it"
    ]
    # Selected by a tag the dropped case carries: still said; by one it lacks: nothing to say.
    cli.main(["verify", "--ports", "numpy", "--fixtures", str(target), "--tag", "fully_masked"])
    assert "lacks 1 case(s)" in capsys.readouterr().err
    cli.main(["verify", "--ports", "numpy", "--fixtures", str(target), "--tag", "gqa"])
    assert capsys.readouterr().err == ""


def test_verify_warns_when_the_folder_holds_a_case_the_table_does_not(tmp_path, capsys):
    target = tmp_path / "fixtures"
    generate.write_fixtures(target, [EXTRA_CASE, *case_table.CASES[:3]])
    cli.main(["verify", "--ports", "numpy", "--fixtures", str(target)])
    err = capsys.readouterr().err
    assert (
        f"{len(case_table.FIXTURE_CASES) - 3} case(s) of cases.py" in err
        and "holds 1 case(s) cases.py does not" in err
    )


def test_verify_says_only_generate_check_proves_the_expected_values(tmp_path, capsys, oracle_once):
    """A flipped expected digit, resealed, passes verify's ports (they match the truth, the file
    does not) unless its rule is strict enough; verify's summary says what it proves, and
    generate --check sees the flip."""
    target = _copy(tmp_path)
    _rewrite_case(target, "large_scale", lambda t: t.replace('"score_bound": ', '"score_bound": 1', 1))
    status = cli.main(["verify", "--ports", "numpy", "--fixtures", str(target), "--case", "large_scale"])
    out = capsys.readouterr().out.strip().splitlines()
    assert status == 0
    assert out[-1].endswith("only `generate --check` proves them the oracle's)")
    assert cli.main(["generate", "--check", "--out", str(target)]) == 1
    assert "cases/large_scale.json differs" in capsys.readouterr().out


def _one_line_exit_2(capsys, argv: list[str], *words: str) -> str:
    status = cli.main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert "Traceback" not in captured.err and all(word in lines[0] for word in words), lines
    return lines[0]


@pytest.mark.parametrize(
    ("code", "where"),
    [(errno.ENOSPC, "a case file"), (errno.EBUSY, "the swap"), (errno.ENOSPC, "the swap")],
)
def test_generate_on_a_full_disk_or_a_busy_mount_is_one_line_and_exit_2(
    tmp_path, monkeypatch, capsys, code, where
):
    """ENOSPC while a case is written, EBUSY (the folder is a mount point) when it is swapped in:
    one line naming the folder and the system's reason, exit 2, the old folder whole."""
    target = _copy(tmp_path)
    before = _tree(target)
    if where == "a case file":
        real_write = Path.write_bytes

        def write_bytes(self, data):
            if self.parent.name == "cases":
                raise OSError(code, os.strerror(code), str(self))
            return real_write(self, data)

        monkeypatch.setattr(Path, "write_bytes", write_bytes)
    else:

        def refuse(first, second):
            raise OSError(code, os.strerror(code), str(first))

        monkeypatch.setattr(generate, "_exchange", refuse)
    real_write_fixtures = generate.write_fixtures
    monkeypatch.setattr(generate, "write_fixtures", lambda folder: real_write_fixtures(folder, FEW))
    _one_line_exit_2(capsys, ["generate", "--out", str(target)], str(target), os.strerror(code))
    assert _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"], "no staging folder left behind"


def test_generate_past_the_file_size_limit_is_one_line_and_exit_2(tmp_path):
    """A real EFBIG: generate under RLIMIT_FSIZE, in a child (SIGXFSZ ignored, so that the write
    fails instead of killing the process)."""
    target = _copy(tmp_path)
    before = _tree(target)
    program = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))\n"
        "from attention_port import cli\n"
        f"sys.exit(cli.main(['generate', '--out', {str(target)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert str(target) in lines[0] and os.strerror(errno.EFBIG) in lines[0], lines
    assert _tree(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["fixtures"]


def test_generate_with_a_path_too_long_is_one_line_and_exit_2(tmp_path, capsys):
    out = tmp_path / "/".join(["d" * 200] * 20)  # about 4,000 bytes, past PATH_MAX
    _one_line_exit_2(capsys, ["generate", "--out", str(out)], os.strerror(errno.ENAMETOOLONG))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["generate", "--out"], ["verify", "--ports", "numpy", "--json"]])
def test_a_4000_byte_file_name_is_one_line_and_exit_2(tmp_path, capsys, command):
    """One name longer than the file system allows (not a long path of short names): refused when
    the path is checked, before any work starts."""
    out = tmp_path / ("d" * 4000)
    _one_line_exit_2(
        capsys, [*command, str(out)], "cannot be used as a path", os.strerror(errno.ENAMETOOLONG)
    )
    assert list(tmp_path.iterdir()) == []
