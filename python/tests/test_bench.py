"""`attention-port bench` and the GPU bench, on tiny sizes: what they write, that a wrong answer never
reaches the table, that the check is compare.py's rule with the oracle's error_scale, the peers'
graph, and the targets."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_port import cli, reference
from attention_port.bench import check, gpu, peers, run
from attention_port.golden import reader as fixtures
from attention_port.harness import compare
from attention_port.inputs import resolve_scale
from attention_port.paths import REPO_ROOT

TINY = ["--window-prefill", "none", "--window-decode", "none",
        "--sizes", "16,32", "--repeats", "2", "--max-repeats", "2", "--cell-budget", "0", "--warmup", "0",
        "--decode-keys", "none", "--bandwidth-mib", "0"]  # fmt: skip
NO_EXTRAS = ["--memory-n", "0", "--linear-memory-n", "0", "--odd-shape", "none", "--no-plot"]
OURS = ["numpy", "torch-sdpa", "torch-math", "typescript", "typescript-flash", "typescript-flash-nested"]


def _report(folder) -> dict:
    return json.loads((folder / "bench.json").read_text(encoding="utf-8"))


def test_bench_writes_the_tables_the_json_and_the_plot(tmp_path):
    code = cli.main(["bench", *TINY, "--ports", ",".join(OURS), "--odd-shape", "24x12", "--memory-n", "32",
                     "--linear-memory-n", "48", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    report = _report(tmp_path)
    cells = {(r["port"], r["dtype"], r["causal"], r["n"], r["d"]): r for r in report["results"]}
    expected_cells = {
        (port.name, dtype, causal, n, d)
        for port in run.PORTS
        if port.name in OURS
        for dtype in port.dtypes
        for causal, n, d in [(c, n, 64) for c in (False, True) for n in (16, 32)] + [(False, 24, 12)]
    }
    assert set(cells) == expected_cells
    for cell in cells.values():
        assert cell["status"] == "ok", cell
        assert len(cell["runs_ms"]) == 2 and cell["median_ms"] > 0
        assert cell["gflops"] == pytest.approx(4 * cell["n"] ** 2 * cell["d"] / (cell["median_ms"] * 1e6))
        assert 0 <= cell["budget_used"] <= 1
        if cell["port"] == "torch-sdpa":  # 4-D inputs reach a fused kernel, not the explicit maths
            assert cell["backend"].startswith("_scaled_dot_product_"), cell["backend"]
            assert "math" not in cell["backend"]
        else:
            assert cell["backend"] is None
    assert cells[("numpy", "float64", False, 16, 64)]["vs_numpy"] == 1.0
    memory = {(m["port"], m["n"]): m for m in report["memory"]}
    linear = {p.name for p in run.PORTS if p.linear_memory}
    assert set(memory) == {(p, 32) for p in OURS} | {(p, 48) for p in OURS if p in linear}
    for m in memory.values():  # at these sizes a pass may peak below its idle twin (heap noise)
        assert m["status"] == "ok" and m["peak_mib"] > 0 and m["idle_mib"] > 0, m
        assert m["above_idle_mib"] == pytest.approx(m["peak_mib"] - m["idle_mib"])
    assert report["machine"]["node"] and report["machine"]["cpu"]
    assert report["machine"]["load_average_start"] is not None
    assert {t["status"] for t in report["targets"]} == {"n/a"}  # no n=1024 cell was asked for
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "| numpy | float64 | no | 16 | 64 |" in markdown
    assert "| typescript | float64 | yes | 32 | 64 |" in markdown
    assert "| 24x12 |" in markdown  # the odd shape has its own column at a glance
    assert "Ports: numpy (reference.py); torch-math (torch_port.py); torch-sdpa (" in markdown
    assert "## Peak memory" in markdown and "## Targets" in markdown and "Load average" in markdown
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("port", ["typescript-flash", "numpy"])
def test_a_wrong_answer_is_failed_and_shows_no_time(tmp_path, port):
    # The worker's test hook adds 0.01 to one output element after timing.
    # NO_EXTRAS: no memory pass (--linear-memory-n's default would have flash.ts do one at n = 16384).
    code = cli.main(["bench", *TINY, *NO_EXTRAS, "--ports", "numpy,typescript-flash", "--dtypes", "float64",
                     "--causal", "off", "--corrupt-port", port, "--out", str(tmp_path)])  # fmt: skip
    assert code == 1
    report = _report(tmp_path)
    assert report["failed"] == 2
    for cell in report["results"]:
        if cell["port"] == port:
            assert cell["status"] == "FAILED"
            assert cell["median_ms"] is None and cell["runs_ms"] == [] and cell["gflops"] is None
            assert cell["problem"].startswith("wrong output") and cell["budget_used"] > 1
        else:
            assert cell["status"] == "ok"
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    time_rows = [
        line for line in markdown.split("### GFLOP/s")[0].splitlines() if line.startswith(f"| {port} |")
    ]
    assert len(time_rows) == 2 and all("| FAILED | | | |" in line for line in time_rows)


def test_missing_peers_are_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(peers, "PEERS_FOLDER", tmp_path / "no-peers")
    out = tmp_path / "out"
    code = cli.main(["bench", *TINY, "--ports", "numpy,onnxruntime-web", "--causal", "off",
                     "--odd-shape", "none", "--memory-n", "0", "--no-plot", "--out", str(out)])  # fmt: skip
    assert code == 0
    report = _report(out)
    note = report["skipped"]["onnxruntime-web"]  # names every missing peer package, onnx among them
    assert "onnxruntime-web" in note and "not installed" in note
    assert {r["port"] for r in report["results"]} == {"numpy"}
    assert "## Skipped" in (out / "bench.md").read_text(encoding="utf-8")


def test_without_chromium_the_webgpu_row_is_skipped_with_a_note(tmp_path, monkeypatch):
    monkeypatch.setenv("CHROMIUM", str(tmp_path / "no-chromium"))
    code = cli.main(["bench", *TINY, "--ports", "numpy,webgpu", "--causal", "off", "--odd-shape", "none",
                     "--memory-n", "0", "--no-plot", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    report = _report(tmp_path)
    assert report["skipped"] == {"webgpu": "no Chromium found (apt-get install chromium, or set $CHROMIUM)"}
    assert {r["port"] for r in report["results"]} == {"numpy"}


@pytest.mark.skipif(peers.peers_missing() is not None, reason=f"{peers.peers_missing()}")
def test_the_peers_run_and_are_checked(tmp_path):
    code = cli.main(["bench", *TINY, "--ports", "onnxruntime-node,onnxruntime-web", "--odd-shape", "24x12",
                     "--memory-n", "0", "--no-plot", "--out", str(tmp_path), "--decode-keys", "40",
                     "--decode-shape", "4x2x16"])  # fmt: skip
    assert code == 0
    report = _report(tmp_path)
    # two peers, two dtypes, 4 cells + the odd shape + one decode step on the decode graph
    assert len(report["results"]) == 2 * 2 * (4 + 1 + 1)
    assert all(r["status"] == "ok" and 0 <= r["budget_used"] <= 1 for r in report["results"])
    versions = report["machine"]["versions"]
    assert versions["onnxruntime-node"]["onnxruntime-node"] == versions["onnxruntime-web"]["onnxruntime-web"]


DECODE = ["--decode-keys", "40,70", "--decode-shape", "4x2x16", "--bandwidth-mib", "8"]


def test_decode_rows_and_the_limits_are_measured_checked_and_shared(tmp_path):
    ports = "numpy,torch-sdpa,typescript-flash,typescript-simd,typescript-simd-2w,typescript-simd-copy"
    code = cli.main(["bench", *TINY[:-4], *DECODE, *NO_EXTRAS, "--sizes", "16", "--causal", "off",
                     "--ports", ports, "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    report = _report(tmp_path)
    limits = report["limits"]
    assert limits["native_read_gbps"] > 0 and limits["wasm_read_gbps"] > 0 and limits["wasm_madd_gflops"] > 0
    decode = [r for r in report["results"] if r["kind"] == "decode"]
    expected = {
        (port.name, dtype, keys)
        for port in run.PORTS
        if port.name in ports.split(",")
        for dtype in port.dtypes
        for keys in (40, 70)
    }
    assert {(r["port"], r["dtype"], r["n"]) for r in decode} == expected
    engine = {p.name for p in run.PORTS if p.engine}
    for r in decode:
        assert r["status"] == "ok" and 0 <= r["budget_used"] <= 1, r
        assert (r["hq"], r["hkv"], r["d"]) == (4, 2, 16)
        itemsize = 4 if r["dtype"] == "float32" else 8
        assert r["read_gbps"] == pytest.approx(2 * 2 * r["n"] * 16 * itemsize / (r["median_ms"] * 1e6))
        limit = "wasm_read_gbps" if r["port"] in engine else "native_read_gbps"
        assert (r["limit"], r["share"]) == (limit, pytest.approx(r["read_gbps"] / limits[limit]))
    for r in report["results"]:
        if r["kind"] == "prefill":
            assert r["share"] == pytest.approx(r["gflops"] / limits["wasm_madd_gflops"])
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "## Decode: one step, query [1, 4, 1, 16] against key and value [1, 2, keys, 16]" in markdown
    assert "- 128-bit SIMD multiply-add peak:" in markdown
    targets = {t["name"]: t["status"] for t in report["targets"]}
    share = (
        "typescript-simd float32 decode at 4096 keys >= 60% of the WebAssembly read bandwidth"
        " (its resident cache)"
    )
    assert targets[share] == "n/a"  # measured at 40 and 70 keys only


# A windowed prefill at n = 48 with window (7, 0), beside the plain causal pass at 48, and a decode
# step at position 40 (41 keys) with window (20, 0), beside a step over 20 keys.
WINDOWS = ["--window-prefill", "48x7", "--window-decode", "40x20"]


def test_windowed_rows_are_timed_checked_against_the_oracle_and_set_beside_their_base(tmp_path):
    ports = "numpy,torch-sdpa,typescript-flash,typescript-simd,typescript-simd-2w,typescript-simd-copy"
    code = cli.main(["bench", *TINY[4:-4], *WINDOWS, *NO_EXTRAS, "--decode-keys", "none",
                     "--decode-shape", "4x2x16", "--bandwidth-mib", "0", "--sizes", "16", "--causal", "on",
                     "--ports", ports, "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    results = _report(tmp_path)["results"]
    rows = {(r["port"], r["dtype"], r["kind"], r["n"], tuple(r["window"] or ())): r for r in results}
    expected = {
        (port.name, dtype, kind, n, window)
        for port in run.PORTS
        if port.name in ports.split(",")
        for dtype in port.dtypes
        for kind, n, window in (
            [] if port.decode_only else [("prefill", 48, (7, 0)), ("prefill", 48, ()), ("prefill", 16, ())]
        )
        + ([("decode", 41, (20, 0)), ("decode", 20, ())] if port.decode else [])
    }
    assert set(rows) == expected
    for r in results:
        assert r["status"] == "ok" and 0 <= r["budget_used"] <= 1, r
    step = rows[("typescript-simd", "float32", "decode", 41, (20, 0))]
    # a windowed step reads its window's 21 keys, not the cache's 41
    assert step["read_gbps"] == pytest.approx(2 * 2 * 21 * 16 * 4 / (step["median_ms"] * 1e6))
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "## Windows: each windowed row beside the pass it replaces" in markdown
    line = next(
        x for x in markdown.splitlines() if x.startswith("| typescript-simd | float32 | causal prefill")
    )
    plain = rows[("typescript-simd", "float32", "prefill", 48, ())]
    windowed = rows[("typescript-simd", "float32", "prefill", 48, (7, 0))]
    assert f"{plain['median_ms'] / windowed['median_ms']:.2f}x faster" in line
    line = next(x for x in markdown.splitlines() if x.startswith("| typescript-simd | float32 | decode step"))
    assert "decode step at position 40 | (20, 0) |" in line
    base = rows[("typescript-simd", "float32", "decode", 20, ())]
    assert f"{step['median_ms'] / base['median_ms']:.2f}x the time" in line
    # the plain rows' tables hold no windowed row
    time_table = markdown.split("## Time")[1].split("###")[0]
    assert "| 48 |" in time_table and time_table.count("| typescript-simd | float32 | yes | 48 |") == 1


@pytest.mark.skipif(peers.peers_missing() is not None, reason=f"{peers.peers_missing()}")
def test_the_peers_windowed_rows_run_and_are_checked(tmp_path):
    code = cli.main(["bench", *TINY[4:-4], *WINDOWS, *NO_EXTRAS, "--decode-keys", "none",
                     "--decode-shape", "4x2x16", "--bandwidth-mib", "0", "--sizes", "16", "--causal", "on",
                     "--ports", "onnxruntime-node,onnxruntime-web", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    results = _report(tmp_path)["results"]
    # two peers, two dtypes: the windowed prefill and its base, the windowed step and its base, n = 16
    assert len(results) == 2 * 2 * 5
    assert sum(bool(r["window"]) for r in results) == 2 * 2 * 2
    assert all(r["status"] == "ok" and 0 <= r["budget_used"] <= 1 for r in results)


def test_a_windowed_row_that_ignores_its_window_is_failed(tmp_path):
    # The corrupt hook's 0.01 stands for any wrong answer; here the window itself is checked: the
    # oracle's windowed output differs from the plain causal one the port would give without it.
    rng = np.random.default_rng(5)
    query, key, value = (rng.standard_normal((48, 16)) for _ in range(3))
    windowed = check.expected_output(query, key, value, True, window=(7, 0), query_offset=0)
    plain = check.expected_output(query, key, value, True)
    assert check.check_output(plain.output.reshape(-1), windowed, "float32")[1] is not None
    assert check.check_output(windowed.output.reshape(-1), windowed, "float32")[1] is None
    code = cli.main(["bench", *TINY[4:-4], *WINDOWS, *NO_EXTRAS, "--decode-keys", "none",
                     "--decode-shape", "4x2x16", "--bandwidth-mib", "0", "--sizes", "16", "--causal", "on",
                     "--ports", "typescript-simd", "--dtypes", "float32",
                     "--corrupt-port", "typescript-simd", "--out", str(tmp_path)])  # fmt: skip
    assert code == 1
    windowed_rows = [r for r in _report(tmp_path)["results"] if r["window"]]
    assert len(windowed_rows) == 2
    assert all(r["status"] == "FAILED" and r["median_ms"] is None for r in windowed_rows)


def test_a_long_reference_in_blocks_of_rows_is_the_whole_one():
    rng = np.random.default_rng(6)
    query, key, value = (rng.standard_normal((2 * check.ROWS + 5, 4)) for _ in range(3))
    blocks = check.expected_output(query, key, value, True, window=(300, 0))
    head = check.expected_output(query[:100], key, value, True, window=(300, 0))
    tail = check.expected_output(
        query[-100:], key, value, True, window=(300, 0), query_offset=len(query) - 100
    )
    # the same rows, up to the last bit the matrix products' blocking may change
    np.testing.assert_allclose(blocks.output[:100], head.output, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(blocks.output[-100:], tail.output, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(blocks.error_scale[-100:], tail.error_scale, rtol=1e-13)


def test_window_targets_compare_each_windowed_row_with_its_base():
    simd = "typescript-simd"

    def decode(ms, keys, window=None):
        return run.CellResult(simd, "float32", window is not None, keys, 128, kind="decode", hq=32, hkv=8,
                              window=window, status="ok", median_ms=ms)  # fmt: skip

    results = [
        _cell(simd, 800.0, n=16384, causal=True, dtype="float32"),
        run.CellResult(simd, "float32", True, 16384, 64, window=(1023, 0), status="ok", median_ms=120.0),
        decode(1.0, 4096),
        decode(1.3, 16385, (4096, 0)),
    ]
    status = {t["name"]: (t["status"], t["detail"]) for t in check.check_targets(check.Measured(results, []))}
    prefill = f"{simd} float32 causal prefill with window (1023, 0) >= 6x the causal pass at n=16384"
    assert status[prefill][0] == "met" and status[prefill][1].startswith("6.67x")
    step = f"{simd} float32 decode at position 16384 with window (4096, 0) within 1.25x a step over 4096 keys"
    assert status[step][0] == "not met" and status[step][1].startswith("1.30x")
    assert status[prefill.replace("float32", "float64")][0] == "n/a"


def test_a_wrong_decode_answer_is_failed_and_shows_no_time(tmp_path):
    code = cli.main(["bench", *TINY[:-4], *DECODE, *NO_EXTRAS, "--sizes", "16", "--causal", "off",
                     "--ports", "typescript-simd", "--dtypes", "float32", "--bandwidth-mib", "0",
                     "--corrupt-port", "typescript-simd", "--out", str(tmp_path)])  # fmt: skip
    assert code == 1
    decode = [r for r in _report(tmp_path)["results"] if r["kind"] == "decode"]
    assert len(decode) == 2
    assert all(r["status"] == "FAILED" and r["median_ms"] is None for r in decode)


def test_decode_targets_read_the_limits():
    simd, web = "typescript-simd", "onnxruntime-web"

    def decode(port, ms):
        cell = run.CellResult(port, "float32", False, 4096, 128, kind="decode", hq=32, hkv=8, status="ok")
        cell.median_ms, cell.read_gbps = ms, 2 * 8 * 4096 * 128 * 4 / (ms * 1e6)
        return cell

    prefill = _cell(simd, 2.0, dtype="float32")  # 134 GFLOP/s
    measured = check.Measured(
        results=[decode(simd, 1.0), decode(web, 3.0), prefill, _cell(web, 3.0, dtype="float32")],
        memory=[],
        limits={"wasm_read_gbps": 10.0, "wasm_madd_gflops": 200.0},
    )
    status = {t["name"]: t["status"] for t in check.check_targets(measured)}
    assert status[f"{simd} float32 decode >= 2x {web} at 4096 keys{check.RESIDENT}"] == "met"  # 3x
    share = f"{simd} float32 decode at 4096 keys >= 60% of the WebAssembly read bandwidth"
    share += " (its resident cache)"
    assert status[share] == "met"
    peak = f"{simd} float32 at n=1024, one thread, >= 75% of the 128-bit multiply-add peak"
    assert status[peak] == "not met"  # 67%
    assert status[f"{simd} float32 >= 1.8x {web} at n=1024"] == "not met"  # 1.5x
    without = check.check_targets(check.Measured(measured.results, []))
    assert {t["name"]: t["status"] for t in without}[peak] == "n/a"  # no limits measured


@pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None, reason="onnx (the bench extra) is not installed"
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_peers_decode_graph_is_one_grouped_query_step(dtype):
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(4)
    query, key, value = rng.standard_normal((1, 4, 1, 6)), *rng.standard_normal((2, 1, 2, 9, 6))
    model = peers.decode_model(dtype, 4, 2, 6)
    feeds = {"query": query, "key": key, "value": value, "scale": np.array(1 / np.sqrt(6))}
    (got,) = ReferenceEvaluator(model).run(None, {name: x.astype(dtype) for name, x in feeds.items()})
    expected = check.expected_decode(query, key, value)
    assert check.check_output(got.astype(np.float64), expected, dtype)[1] is None
    tiled = check.expected_output(query, np.tile(key, (1, 2, 1, 1)), np.tile(value, (1, 2, 1, 1)), False)
    assert not np.allclose(got, tiled.output)  # heads grouped consecutively, not tiled


@pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None, reason="onnx (the bench extra) is not installed"
)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_peers_graph_is_attention(dtype, causal):
    # onnx's own reference evaluator runs the graph, so this holds without onnxruntime.
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(3)
    query, key, value = (rng.standard_normal((9, 5)) for _ in range(3))
    model = peers.attention_model(dtype, causal)
    feeds = {"query": query, "key": key, "value": value, "scale": np.array(1 / np.sqrt(5))}
    (got,) = ReferenceEvaluator(model).run(None, {name: x.astype(dtype) for name, x in feeds.items()})
    expected = check.expected_output(query, key, value, causal)
    assert check.check_output(got.astype(np.float64), expected, dtype)[1] is None
    assert not np.allclose(got, check.expected_output(query, key, value, not causal).output)


@pytest.mark.skipif(
    importlib.util.find_spec("onnx") is None, reason="onnx (the bench extra) is not installed"
)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_peers_windowed_graphs_are_the_oracles_window(dtype):
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(7)
    query, key, value = (rng.standard_normal((12, 5)) for _ in range(3))
    feeds = {"query": query, "key": key, "value": value, "scale": np.array(1 / np.sqrt(5))}
    (got,) = ReferenceEvaluator(peers.attention_model(dtype, True, 3)).run(
        None, {name: x.astype(dtype) for name, x in feeds.items()}
    )
    expected = check.expected_output(query, key, value, True, window=(3, 0))
    assert check.check_output(got.astype(np.float64), expected, dtype)[1] is None
    assert not np.allclose(got, check.expected_output(query, key, value, True).output)
    query, key, value = rng.standard_normal((1, 4, 1, 6)), *rng.standard_normal((2, 1, 2, 9, 6))
    feeds = {"query": query, "key": key, "value": value, "scale": np.array(1 / np.sqrt(6))}
    (got,) = ReferenceEvaluator(peers.decode_model(dtype, 4, 2, 6, 4)).run(
        None, {name: x.astype(dtype) for name, x in feeds.items()}
    )
    expected = check.expected_decode(query, key, value, True, window=(4, 0), query_offset=8)
    assert check.check_output(got.astype(np.float64), expected, dtype)[1] is None
    assert not np.allclose(got, check.expected_decode(query, key, value).output)


def test_check_output_holds_each_dtype_to_compares_rule():
    rng = np.random.default_rng(7)
    query, key, value = (rng.standard_normal((24, 8)) for _ in range(3))
    expected = check.expected_output(query, key, value, causal=True)
    assert check.check_output(expected.output.copy(), expected, "float64") == (0.0, None)
    nudged = expected.output + 1e-9 * expected.error_scale  # far over float64's budget, within float32's
    assert check.check_output(nudged, expected, "float64")[1].startswith("wrong output")
    assert check.check_output(nudged, expected, "float32")[1] is None
    off = expected.output.copy()
    off[3, 2] += 1e-2
    assert "output[3, 2]" in check.check_output(off, expected, "float32")[1]
    broken = expected.output.copy()
    broken[0, 0] = np.nan
    assert "is nan where" in check.check_output(broken, expected, "float64")[1]
    assert "numbers" in check.check_output(expected.output[:3], expected, "float64")[1]


def test_float64_error_scale_is_the_oracles_on_every_fixture_it_applies_to():
    # The oracle's error_scale, recomputed from the fixture's inputs and (float64) weights: the
    # same numbers up to float64 rounding, wherever there is no float mask and no NaN.
    checked = 0
    for case in fixtures.load_fixtures(REPO_ROOT / "fixtures"):
        inputs, params = case.inputs, case.params if not case.expects_error else {}
        mask = None if case.expects_error else inputs["attn_mask"]
        if case.expects_error or (mask is not None and mask.dtype != bool):
            continue
        query, key, value = inputs["query"], inputs["key"], inputs["value"]
        if "extreme" in case.tags or not all(np.isfinite(x).all() for x in (query, key, value)):
            continue  # float64 arithmetic is no oracle at float64's edges; the benches never go there
        if params.get("sink_logits") is not None:
            continue  # a sink logit widens the oracle's yardstick; no bench row has one
        if params["enable_gqa"] and query.ndim > 2:
            group = query.shape[-3] // key.shape[-3]
            key, value = np.repeat(key, group, axis=-3), np.repeat(value, group, axis=-3)
        scale = resolve_scale(params["scale"], query.shape[-1])
        allowed = case.expected.logits > -np.inf  # finite inputs, no float mask: the mask and causality
        got = compare.float64_error_scale(query, key, value, case.expected.weights, scale, allowed)
        np.testing.assert_allclose(got, case.expected.error_scale, rtol=1e-13, atol=0, err_msg=case.id)
        checked += 1
    assert checked >= 30


def test_float64_error_scale_takes_torch_tensors_as_the_gpu_bench_passes_them():
    rng = np.random.default_rng(11)
    query, key, value = (rng.standard_normal((6, 4)) for _ in range(3))
    weights = reference.attention_steps(query, key, value).weights
    from_numpy = compare.float64_error_scale(query, key, value, weights, 0.5)
    tensors = (torch.from_numpy(x) for x in (query, key, value, weights))
    np.testing.assert_allclose(compare.float64_error_scale(*tensors, 0.5).numpy(), from_numpy, rtol=1e-14)


def _cell(port, ms, n=1024, d=64, causal=False, dtype="float64"):
    return run.CellResult(
        port, dtype, causal, n, d, status="ok", median_ms=ms, gflops=4 * n * n * d / (ms * 1e6)
    )


def test_targets_are_met_not_met_or_not_measured():
    flash, readable = "typescript-flash", "typescript"
    measured = check.Measured(
        results=[
            _cell(flash, 60.0),
            _cell(readable, 400.0),
            _cell(f"{flash}-nested", 70.0),
            _cell(flash, 1000.0, n=4096),
            _cell(flash, 700.0, n=4096, causal=True),
        ],  # fmt: skip
        memory=[run.MemoryResult(flash, "ok", 4096, peak_mib=100.0, idle_mib=80.0, above_idle_mib=20.0)],
    )
    status = {t["name"]: t["status"] for t in check.check_targets(measured)}
    expected = {
        f"{flash} float64 >= 3.5x {readable} at n=1024": "met",  # 6.7x
        f"{flash} float64 >= 3.5 GFLOP/s at n=1024": "met",  # 4.5
        f"{flash} one float64 pass at n=4096 within 32 MiB of an idle process": "met",
        f"{flash} float64 causal >= 1.7x faster than not causal at n=4096": "not met",  # 1.43x
        f"{flash} one float64 pass at n=16384 within 64 MiB of an idle process": "n/a",
        f"flash.ts's nested-array entry at n=1024: float64 within 10% of {flash}": "not met",  # 86%
        f"{flash} at n=1000, E = Ev = 80: float64 within 25% of the aligned rate": "n/a",
    }
    assert {name: status[name] for name in expected} == expected
    assert {status[name] for name in status if name not in expected} <= {"n/a"}  # other ports' targets


def test_gpu_bench_smoke_on_the_cpu(tmp_path):
    out = tmp_path / "gpu-bench.md"
    code = gpu.main(["--device", "cpu", "--sizes", "64", "--heads", "2", "--head-dims", "16",
                     "--repeats", "2", "--causal", "both", "--out", str(out)])  # fmt: skip
    assert code == 0
    text = out.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| float32 |")]
    assert [row.split(" | ")[:4] for row in rows] == [
        ["| float32", "16", "64", "no"],
        ["| float32", "16", "64", "yes"],
    ]
    assert all("FAILED" not in row and "skipped" not in row for row in rows)
    assert all(row.rstrip(" |").endswith("_cpu") for row in rows)  # the fused kernel torch ran


@pytest.mark.parametrize("option", ["--heads", "--repeats", "--max-repeats", "--budget"])
@pytest.mark.parametrize("value", ["0", "-2"])
def test_gpu_bench_refuses_counts_and_a_budget_that_are_not_positive(tmp_path, capsys, option, value):
    out = tmp_path / "gpu-bench.md"
    with pytest.raises(SystemExit) as exit_info:
        gpu.main(["--device", "cpu", "--sizes", "64", option, value, "--out", str(out)])
    assert exit_info.value.code == 2
    assert f"argument {option}: must be > 0, not {value}" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message; there is a GPU")
def test_gpu_bench_without_a_gpu_says_so_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "gpu-bench.md"
    assert gpu.main(["--sizes", "64", "--out", str(out)]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
    assert not out.exists()


def test_the_cli_imports_the_bench_only_when_it_runs():
    code = "import sys, attention_port.cli; print(sorted(m for m in sys.modules if '.bench' in m))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--seed", "-1"),
        ("--cell-budget", "nan"),
        ("--cell-budget", "inf"),
        ("--cell-budget", "-1"),
        ("--warmup", "inf"),
        ("--warmup", "-0.5"),
        ("--memory-n", "-3"),
        ("--linear-memory-n", "-3"),
        ("--memory-timeout", "nan"),
        ("--worker-timeout", "nan"),
        ("--sizes", "0"),
        ("--d", "x"),
    ],
)
def test_bench_refuses_a_wrong_option_value_in_one_line_before_it_runs(tmp_path, capsys, option, value):
    out = tmp_path / "results"
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["bench", "--ports", "numpy", *TINY, *NO_EXTRAS, "--out", str(out), option, value])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: argument {option}: "), lines
    assert "parse" not in lines[0]  # argparse names the type: int or float, not the helper
    assert not out.exists()


@pytest.mark.parametrize(
    ("option", "value"), [("--cell-budget", "nan"), ("--cell-budget", "-1"), ("--budget", "inf")]
)
def test_gpu_bench_refuses_a_time_that_is_not_finite_or_negative(tmp_path, capsys, option, value):
    out = tmp_path / "gpu-bench.md"
    with pytest.raises(SystemExit) as exit_info:
        gpu.main(["--device", "cpu", "--sizes", "64", option, value, "--out", str(out)])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: argument {option}: "), lines
    assert not out.exists()


def test_bench_and_gpu_bench_refuse_an_output_path_they_cannot_write_before_they_run(tmp_path, capsys):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for out in (a_file, a_file / "results"):
        assert cli.main(["bench", "--ports", "numpy", *TINY, *NO_EXTRAS, "--out", str(out)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --out ") and str(a_file) in lines[0], lines
    for out in (tmp_path, a_file / "gpu-bench.md"):
        assert gpu.main(["--device", "cpu", "--sizes", "64", "--heads", "2", "--head-dims", "16",
                         "--repeats", "1", "--out", str(out)]) == 2  # fmt: skip
        err = capsys.readouterr().err
        assert "gpu-bench: float32" not in err, "refused before anything is measured"
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: --out ") and str(out.parent) in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"] and a_file.read_text() == "mine"
