"""What `attention-port verify` prints: failures with their case's description and the per-port
summary by default, every line with -v, budgets past 1e6 % said as such, case selection by id
and tag, the case list, and a warning when the fixtures no longer match cases.py and the oracle."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import ALL_CASES, copy_with_edit

from attention_port import cli, paths
from attention_port.golden import generate
from attention_port.harness import compare


def _copy_with_wrong_output(tmp_path: Path, case_id: str, shift: float) -> Path:
    """A copy of the fixtures whose `case_id` expects every output number shifted by `shift`."""

    def shift_output(document: dict) -> None:
        rows = document["expected"]["output"]["data"]
        document["expected"]["output"]["data"] = [[x + shift for x in row] for row in rows]

    return copy_with_edit(tmp_path, case_id, shift_output)


def test_stale_fixtures_get_one_warning_line(tmp_path, capsys):
    # A description edited in the file but not in cases.py: every case is compared with the table.
    def describe(document: dict) -> None:
        document["description"] = "edited by hand"

    folder = copy_with_edit(tmp_path / "a", "gqa_4q_2kv", describe)
    status, _, err = _verify(capsys, "--ports", "numpy", "--fixtures", str(folder))
    assert status == 0
    (warning,) = err.strip().splitlines()
    assert warning.startswith("warning: 1 fixture case(s)") and "gqa_4q_2kv" in warning
    # Expected values the oracle no longer gives: caught on the smallest cases, which verify
    # recomputes every time (the full comparison is `generate --check`).
    sampled = generate.oracle_sample(ALL_CASES)[0].id
    folder = _copy_with_wrong_output(tmp_path / "b", sampled, 1e-9)
    status, _, err = _verify(capsys, "--ports", "numpy", "--fixtures", str(folder))
    (warning,) = err.strip().splitlines()
    assert sampled in warning and "run `attention-port generate`" in warning


def _verify(capsys, *args: str) -> tuple[int, str, str]:
    status = cli.main(["verify", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_default_report_is_failures_with_descriptions_then_the_summary(tmp_path, capsys):
    folder = _copy_with_wrong_output(tmp_path, "rank2_square", 1.0)
    status, out, err = _verify(capsys, "--ports", "numpy", "--fixtures", str(folder))
    assert status == 1
    lines = out.splitlines()
    assert not any(line.startswith("PASS") for line in lines), "passing cases are quiet by default"
    (fail,) = [line for line in lines if line.startswith("FAIL")]
    assert "rank2_square" in fail and "-- Rank 2 self-attention shape, 6 tokens, E = 8" in fail
    assert "budget > 1e6 %" in fail  # an error of 1.0 against a budget near 1e-15
    count = len(json.loads((folder / "manifest.json").read_text())["cases"])
    # score_overflow has no answer to judge: counted in the summary, listed only with -v.
    assert not any(line.startswith("OUT ") for line in lines)
    assert lines[-1] == f"{count - 2} passed, 1 failed, 1 outside the contract (-v lists them){cli.TRUSTED}"


def test_verbose_prints_every_case_and_no_warning_for_fresh_fixtures(capsys):
    status, out, err = _verify(
        capsys, "--ports", "numpy", "--case", "rank2_square,softcap,score_overflow", "-v"
    )
    assert status == 0 and err == ""
    lines = out.splitlines()
    passes = [line for line in lines if line.startswith("PASS")]
    assert [line.split()[2] for line in passes] == ["rank2_square", "softcap"]
    (outside,) = [line for line in lines if line.startswith("OUT ")]
    assert "score_overflow" in outside and "outside the contract: score overflow" in outside
    assert lines[-1] == f"2 passed, 0 failed, 1 outside the contract{cli.TRUSTED}"


def test_tag_selects_cases_that_carry_every_tag_given(capsys):
    status, out, _ = _verify(capsys, "--list", "--tag", "gqa", "--tag", "causal")
    assert status == 0
    lines = out.splitlines()[:-1]
    manifest = json.loads((paths.FIXTURES / "manifest.json").read_text())["cases"]
    both = [entry["id"] for entry in manifest if {"gqa", "causal"} <= set(entry["tags"])]
    assert [line.split()[0] for line in lines] == both
    assert {"gqa_causal_masked", "everything_at_once", "decode_step_gqa", "layer_gqa"} <= set(both)
    assert all("gqa" in line.split() and "causal" in line.split() for line in lines)
    # Each is at the last level its tags name: grouped-query heads, then scale and softcap, decoding.
    listed = dict(zip(both, lines, strict=True))
    assert "level 10 (grouped-query heads)" in listed["gqa_causal_masked"]
    assert "level 11 (scale and softcap)" in listed["everything_at_once"]
    assert "level 12 (decoding after a cache (query_offset))" in listed["decode_step_gqa"]
    assert out.splitlines()[-1] == f"{len(both)} cases"


def test_an_unknown_tag_or_case_is_one_line_and_exit_2(capsys):
    status, out, err = _verify(capsys, "--tag", "no_such_tag")
    assert status == 2 and out == "" and err.startswith("error: no case has the tag 'no_such_tag'")
    status, _, err = _verify(capsys, "--case", "rank2_square,no_such_case")
    assert status == 2 and len(err.strip().splitlines()) == 1 and "no_such_case" in err


def test_a_missing_fixture_folder_is_named_as_such(tmp_path, capsys):
    missing = tmp_path / "nonexistent"
    status, out, err = _verify(capsys, "--ports", "numpy", "--fixtures", str(missing))
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [f"error: --fixtures {missing}: no such folder"]


def test_dtypes_for_ports_that_take_none_is_refused_in_one_line(capsys):
    # --dtypes sets the torch ports' dtypes; the TypeScript ports compute in their own.
    status, out, err = _verify(capsys, "--ports", "typescript", "--dtypes", "float32")
    assert status == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: --dtypes sets the torch ports' dtypes, and --ports typescript names none (torch,"
        " torch-sdpa); each other port computes in its own dtype"
    ]


def test_budget_formatting():
    assert compare.format_budget(0.108) == "10.8%"
    assert compare.format_budget(9999.0) == "999900.0%"
    assert compare.format_budget(2e4) == "> 1e6 %"
    assert compare.format_budget(float("inf")) == "> 1e6 %"


def test_a_json_report_that_cannot_be_written_is_one_line_and_exit_2_before_any_port_runs(tmp_path, capsys):
    (tmp_path / "a_file").write_text("")
    for target in (tmp_path, tmp_path / "a_file" / "r.json"):
        status, out, err = _verify(
            capsys, "--ports", "numpy", "--case", "rank2_square", "--json", str(target)
        )
        assert status == 2 and out == "", target
        assert len(err.strip().splitlines()) == 1 and err.startswith("error: --json"), err
        assert str(target) in err
    # A missing folder is made, as every other command's output folder is.
    target = tmp_path / "new_folder" / "report.json"
    status, _, _ = _verify(capsys, "--ports", "numpy", "--case", "rank2_square", "--json", str(target))
    assert status == 0 and json.loads(target.read_text())["passed"] == 1


def test_a_json_report_interrupted_midway_leaves_the_old_report_whole(tmp_path, capsys, monkeypatch):
    report = tmp_path / "report.json"
    report.write_text('{"old": "report"}\n')
    real_write_text = Path.write_text

    def write_half_then_fail(self, text, *args, **kwargs):
        real_write_text(self, text[: len(text) // 2], *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Path, "write_text", write_half_then_fail)
    status, _, err = _verify(capsys, "--ports", "numpy", "--case", "rank2_square", "--json", str(report))
    monkeypatch.undo()
    assert status == 2 and err.strip() == "error: interrupted"
    assert report.read_text() == '{"old": "report"}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"], "no scratch file is left behind"
    status, _, _ = _verify(capsys, "--ports", "numpy", "--case", "rank2_square", "--json", str(report))
    assert status == 0 and json.loads(report.read_text())["passed"] == 1


def test_by_level_prints_the_most_budget_used_per_level_of_check(capsys):
    status, out, _ = _verify(capsys, "--ports", "numpy", "--case", "rank2_square,causal_rank2", "--by-level")
    assert status == 0
    rows = [line.split() for line in out.splitlines() if line.startswith("numpy ") and line.endswith("%")]
    # (port, level number, ..., cases, outside, budget): one row per level that has a case.
    assert [(row[1], row[-3], row[-2]) for row in rows] == [("2", "1", "0"), ("7", "1", "0")]
    assert all(0 < float(row[-1].rstrip("%")) <= 100 for row in rows)
