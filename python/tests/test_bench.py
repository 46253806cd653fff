"""`attention-port bench` and the GPU bench, on tiny sizes: what they write, and that a wrong
answer never reaches the table."""

from __future__ import annotations

import importlib.util
import json
import shutil

import numpy as np
import pytest
import torch

from attention_port import bench, cli, gpu_bench

TINY = ["--sizes", "16,32", "--repeats", "2", "--max-repeats", "2", "--cell-budget", "0", "--warmup", "0"]


def test_bench_writes_the_tables_the_json_and_the_plot(tmp_path):
    code = cli.main(["bench", *TINY, "--ports", "numpy,torch-math,typescript", "--memory-n", "32",
                     "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    cells = {(r["port"], r["dtype"], r["causal"], r["n"]): r for r in report["results"]}
    expected_cells = {
        (port, dtype, causal, n)
        for port, dtypes in (
            ("numpy", ["float64"]),
            ("torch-math", ["float64", "float32"]),
            ("typescript", ["float64"]),
        )  # fmt: skip
        for dtype in dtypes
        for causal in (False, True)
        for n in (16, 32)
    }
    assert set(cells) == expected_cells
    for cell in cells.values():
        assert cell["status"] == "ok", cell
        assert len(cell["runs_ms"]) == 2 and cell["median_ms"] > 0
        assert cell["gflops"] == pytest.approx(4 * cell["n"] ** 2 * 64 / (cell["median_ms"] * 1e6))
        assert 0 <= cell["error_ratio"] <= bench.TOLERANCE[cell["dtype"]]
    assert cells[("numpy", "float64", False, 16)]["vs_numpy"] == 1.0
    assert {m["port"]: m["status"] for m in report["memory"]} == dict.fromkeys(
        ["numpy", "torch-math", "typescript"], "ok"
    )
    assert all(m["peak_mib"] >= m["idle_mib"] > 0 for m in report["memory"])
    assert report["machine"]["node"] and report["machine"]["cpu"]
    assert [t["status"] for t in report["targets"]] == ["n/a"] * 4  # no flash cells were asked for
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "| numpy | float64 | no | 16 |" in markdown
    assert "| typescript | float64 | yes | 32 |" in markdown
    assert "## Peak memory" in markdown and "## Targets" in markdown
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("port", ["typescript", "numpy"])
def test_a_wrong_answer_is_failed_and_shows_no_time(tmp_path, port):
    # The worker's test hook adds 0.01 to one output element after timing.
    code = cli.main(["bench", *TINY, "--ports", "numpy,typescript", "--causal", "off", "--memory-n", "0",
                     "--no-plot", "--corrupt-port", port, "--out", str(tmp_path)])  # fmt: skip
    assert code == 1
    report = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert report["failed"] == 2
    for cell in report["results"]:
        if cell["port"] == port:
            assert cell["status"] == "FAILED"
            assert cell["median_ms"] is None and cell["runs_ms"] == [] and cell["gflops"] is None
            assert cell["problem"].startswith("wrong output")
        else:
            assert cell["status"] == "ok"
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    time_rows = [
        line for line in markdown.split("### GFLOP/s")[0].splitlines() if line.startswith(f"| {port} |")
    ]
    assert len(time_rows) == 2 and all("| FAILED | | | |" in line for line in time_rows)


def test_a_missing_flash_port_is_skipped_with_a_note(tmp_path, monkeypatch):
    # The Node worker from a copy of typescript/src without flash.ts: the fast port not written yet.
    source = tmp_path / "src"
    source.mkdir()
    for path in (bench.REPO_ROOT / "typescript" / "src").glob("*.ts"):
        if path.name != "flash.ts":
            shutil.copy(path, source / path.name)
    monkeypatch.setattr(bench, "BENCH_TS", source / "bench.ts")
    out = tmp_path / "out"
    code = cli.main(["bench", *TINY, "--ports", "typescript,typescript-flash", "--causal", "off",
                     "--memory-n", "16", "--no-plot", "--out", str(out)])  # fmt: skip
    assert code == 0
    report = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert "flash.ts does not exist yet" in report["skipped"]["typescript-flash"]
    assert {r["port"] for r in report["results"]} == {"typescript"}
    assert [m["port"] for m in report["memory"]] == ["typescript"]
    assert all(t["detail"].startswith("typescript-flash not run") for t in report["targets"])
    assert "## Skipped" in (out / "bench.md").read_text(encoding="utf-8")


def test_check_output_holds_each_dtype_to_its_tolerance():
    rng = np.random.default_rng(7)
    query, key, value = (rng.standard_normal((24, 8)) for _ in range(3))
    expected = bench.expected_output(query, key, value, causal=True)
    assert bench.check_output(expected.output.copy(), expected, "float64") == (0.0, None)
    nudged = expected.output * (1 + 1e-9)
    assert bench.check_output(nudged, expected, "float64")[1].startswith("wrong output")
    assert bench.check_output(nudged, expected, "float32")[1] is None
    off = expected.output.copy()
    off[3, 2] += 1e-2
    assert "output[3, 2]" in bench.check_output(off, expected, "float32")[1]
    broken = expected.output.copy()
    broken[0, 0] = np.nan
    assert "not finite" in bench.check_output(broken, expected, "float64")[1]
    assert "numbers" in bench.check_output(expected.output[:3], expected, "float64")[1]


def test_gpu_bench_smoke_on_the_cpu(tmp_path):
    out = tmp_path / "gpu-bench.md"
    code = gpu_bench.main(["--device", "cpu", "--sizes", "64", "--heads", "2", "--head-dims", "16",
                           "--repeats", "2", "--causal", "both", "--out", str(out)])  # fmt: skip
    assert code == 0
    text = out.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| float32 |")]
    assert [row.split(" | ")[:4] for row in rows] == [
        ["| float32", "16", "64", "no"],
        ["| float32", "16", "64", "yes"],
    ]
    assert all("FAILED" not in row and "skipped" not in row for row in rows)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message; there is a GPU")
def test_gpu_bench_without_a_gpu_says_so_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "gpu-bench.md"
    assert gpu_bench.main(["--sizes", "64", "--out", str(out)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not out.exists()
