"""The WebGPU port (typescript/src/webgpu.ts) in headless Chromium, on SwiftShader's WebGPU.

`verify --ports webgpu` runs every fixture case in one page load and holds the outputs to
compare.py's rule in float32; the other tests call the port in the page on the fixtures' inputs:
split dispatches give what one dispatch gives, what does not fit is refused with kind "size", and
a Chromium without WebGPU gives an error of its own kind. Without a Chromium (or playwright) the
module skips with a reason (scripts/test says so in one line).
"""

from __future__ import annotations

import json

import conftest
import numpy as np
import pytest

from attention_port import cli, reference
from attention_port.harness import browser, compare, runners

pytestmark = pytest.mark.browser

if (reason := browser.unavailable_reason()) is not None:
    pytest.skip(f"the WebGPU port cannot run: {reason}", allow_module_level=True)

CASES = {case.id: case for case in conftest.ALL_CASES}
# The layer's and RoPE's cases, which the page runs through the shared layer over the port's core.
LAYER_CASES = {case.id: case for case in conftest.LAYER_CASES}


@pytest.fixture(scope="module")
def page():
    with browser.open_page(None, [], timeout=120) as port_page:
        yield port_page


def test_verify_runs_every_fixture_case_and_each_in_the_contract_passes(tmp_path, capsys):
    report_path = tmp_path / "report.json"
    assert cli.main(["verify", "--ports", "webgpu", "--json", str(report_path)]) == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    results = {r["case_id"]: r for r in report["results"] if r["port"] == "webgpu"}
    assert set(results) == set(CASES) | set(LAYER_CASES)  # all of them, from one page load
    assert report["ports"]["webgpu"]["dtype"] == "float32"
    assert "swiftshader" in report["ports"]["webgpu"]["adapter"]
    for case_id in LAYER_CASES:
        assert results.pop(case_id)["passed"], case_id
    for case_id, result in results.items():
        case = CASES[case_id]
        if case.expects_error:
            assert result["passed"], result
            continue
        outside = compare.outside_contract(case, "float32")  # what float32 cannot hold
        assert (result["outside"] is not None) == (outside is not None), case_id
        if outside is None:
            assert result["passed"], result
            assert result["budget_used"] <= 0.5, result  # comfortably inside (measured: under 10%)
    assert report["failed"] == 0
    assert "ms inside Chromium on google swiftshader (CPU emulation)" in capsys.readouterr().out


# A few cases of each sort: clean passes, special values, an empty dim, a refusal, a case outside
# float32's contract, and a layer case (whose answer always crosses: the kit has no layer rule).
SORTS = ["tutorial_seq3_dk4", "gqa_causal_masked", "nan_in_value", "empty_keys", "error_ragged_mask",
         "error_gqa_not_multiple", "score_overflow", "layer_gqa"]  # fmt: skip


def test_the_page_judges_its_port_as_compare_py_does_and_sends_only_what_python_needs():
    """The page judges the port with the conformance kit, as cli.ts judges the Node ports: what it
    passed cleanly, refused rightly or found outside the contract comes back as its verdict, which
    is compare.py's on the same answer; only the layer's answers cross, unless every answer is asked
    for (verify's webgpu~torch cross-check)."""
    cases = [{**CASES, **LAYER_CASES}[case_id] for case_id in SORTS]
    lean = runners.webgpu_port(conftest.FIXTURES_DIR, 120).run(cases)
    every = runners.webgpu_port(conftest.FIXTURES_DIR, 120, every_answer=True).run(cases)
    assert set(lean.answers) == {"layer_gqa"}, lean.answers
    assert set(lean.verdicts) == set(SORTS) - {"layer_gqa"}
    assert set(every.answers) == set(SORTS) and set(every.verdicts) == set(lean.verdicts)
    assert lean.verdicts["score_overflow"].outside is not None
    for case_id, verdict in every.verdicts.items():
        ours = compare.judge(CASES[case_id], "webgpu", "float32", every.answers[case_id])
        assert conftest.same_figures(verdict.to_json(), ours.to_json()), (verdict, ours)
        assert conftest.same_figures(lean.verdicts[case_id].to_json(), verdict.to_json())


def _nested(case_id: str) -> dict:
    """A fixture case's inputs and options as the nested entry takes them."""
    case = CASES[case_id]
    mask = case.inputs["attn_mask"]
    params = case.params
    return {
        "query": case.inputs["query"].tolist(),
        "key": case.inputs["key"].tolist(),
        "value": case.inputs["value"].tolist(),
        "options": {
            "attnMask": None if mask is None else mask.tolist(),
            "isCausal": params["is_causal"],
            "scale": params["scale"],
            "enableGqa": params["enable_gqa"],
            "softcap": params["softcap"],
        },
    }


def _within_budget(case_id: str, output) -> float:
    case = CASES[case_id]
    budget = case.expected.budgets["float32"].output
    error = np.abs(np.asarray(output, dtype=np.float64) - case.expected.output)
    return float(np.max(error / budget))


SPLIT_CASES = [
    "gqa_causal_masked",
    "rank5_two_batch_dims",
    "long_sequence_causal_masked",
    "mask_broadcast_rank3",
]


@pytest.mark.parametrize("case_id", SPLIT_CASES)
def test_dispatches_split_at_lowered_limits_give_what_one_dispatch_gives(page, case_id):
    call = _nested(case_id)
    whole = page.call("attend", call)
    assert "output" in whole, whole
    assert _within_budget(case_id, whole["output"]) <= 1
    # Two workgroups along each dimension: at most two slices, or two blocks of 16 query rows, per
    # dispatch; and buffers just large enough for one key/value slice or one block of rows.
    query, key, value = (CASES[case_id].inputs[name] for name in ("query", "key", "value"))
    width = max(query.shape[-1], value.shape[-1])
    room = max(4 * key.shape[-2] * width, 4 * 16 * width, 4 * 16 * key.shape[-2])
    limits = {"maxStorageBufferBindingSize": room, "maxComputeWorkgroupsPerDimension": 2}
    split = page.call("attend", {**call, "setup": {"limits": limits}})
    assert split["output"] == whole["output"]  # the same workgroups compute the same rows


def test_what_cannot_be_split_is_refused_with_kind_size(page):
    call = _nested("long_sequence")  # key [67, 24]: 6432 bytes that one dispatch must hold
    answer = page.call("attend", {**call, "setup": {"limits": {"maxStorageBufferBindingSize": 4096}}})
    error = answer["error"]
    assert (error["name"], error["kind"]) == ("AttentionInputError", "size")
    assert error["message"] == (
        "the WebGPU port cannot fit one key slice [67, 24] in one dispatch: it needs 6432, more than"
        " this device's maxStorageBufferBindingSize = 4096 bytes; the output is [67, 16]"
    )


@pytest.mark.parametrize("case_id", ["error_ragged_query", "error_mask_not_broadcastable", "error_scale_nan"])
def test_bad_input_is_the_ports_own_error_in_the_browser_too(page, case_id):
    answer = page.call("attend", _raw_call(case_id))
    kind, message = CASES[case_id].expected_error
    assert (answer["error"]["name"], answer["error"]["kind"]) == ("AttentionInputError", kind)
    assert compare.normalize_message(answer["error"]["message"]) == message


def _raw_call(case_id: str) -> dict:
    """An invalid case's inputs and options exactly as the fixture file writes them."""
    case = CASES[case_id]
    inputs, params = case.inputs, case.params
    return {
        "query": inputs["query"],
        "key": inputs["key"],
        "value": inputs["value"],
        "options": {
            "attnMask": inputs["attn_mask"],
            "isCausal": params["is_causal"],
            "scale": params["scale"],
            "enableGqa": params["enable_gqa"],
            "softcap": params["softcap"],
        },
    }


def test_values_near_float32s_largest_give_the_exact_output_not_an_overflow(page):
    # acc = sum of p * value overflows float32 here (p = 1 for the largest logit, and the others
    # are close), while every exact output is below the largest float32: the kernel computes such
    # cells again with the weights divided first.
    query = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    key = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
    value = 2.0**127 * np.array([[1.5, -1.0], [1.25, 1.0], [1.75, 1.875], [1.0, 1.5]])  # float32 holds them
    answer = page.call("attend", {"query": query.tolist(), "key": key.tolist(), "value": value.tolist()})
    expected = reference.scaled_dot_product_attention(query, key, value)  # float64: no overflow
    assert np.all(np.abs(expected) < np.finfo(np.float32).max)
    assert np.all(np.isfinite(answer["output"]))
    np.testing.assert_allclose(answer["output"], expected, rtol=1e-5)


def test_the_bench_row_is_checked_and_names_the_adapter_as_an_emulation(tmp_path):
    code = cli.main(["bench", "--ports", "webgpu", "--sizes", "16,40", "--repeats", "2", "--max-repeats", "2",
                     "--cell-budget", "0", "--warmup", "0", "--odd-shape", "none", "--memory-n", "32",
                     "--decode-keys", "70", "--decode-shape", "4x2x16", "--bandwidth-mib", "0",
                     "--no-plot", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    report = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    cells = report["results"]
    assert {(c["kind"], c["dtype"], c["causal"], c["n"]) for c in cells} == {
        ("prefill", "float32", causal, n) for causal in (False, True) for n in (16, 40)
    } | {("decode", "float32", False, 70)}  # one decode step: 4 query heads on 2 of 70 keys
    for cell in cells:
        assert cell["status"] == "ok" and len(cell["runs_ms"]) == 2, cell
        assert 0 <= cell["budget_used"] <= 1  # checked against numpy float64 at float32's budget
        assert cell["backend"] == "google swiftshader (CPU emulation)"
    assert report["memory"] == []  # Chromium's GPU process is not the worker's: no memory pass
    markdown = (tmp_path / "bench.md").read_text(encoding="utf-8")
    assert "| webgpu | float32 | no | 16 | 64 |" in markdown
    assert "| google swiftshader (CPU emulation) |" in markdown


def test_the_adapter_is_named_and_swiftshader_is_an_emulation(page):
    adapter = page.call("adapter")
    assert adapter["architecture"] == "swiftshader" and adapter["emulated"] is True
    assert adapter["summary"].endswith("(CPU emulation)")


def test_a_chromium_without_webgpu_gives_webgpu_unavailable_error(page, tmp_path):
    html = browser.build_page(tmp_path, None, [], timeout=120)
    # The module's playwright starts it (one playwright per thread). No --enable-unsafe-webgpu and
    # no SwiftShader adapter: Chromium then finds no adapter on a machine without a GPU.
    chromium_type = page.page.context.browser.browser_type
    chromium = chromium_type.launch(executable_path=browser.find_chromium(), args=["--no-sandbox"])
    try:
        tab = chromium.new_page()
        tab.goto(html.as_uri())
        with pytest.raises(browser.BrowserError, match="WebGpuUnavailableError: WebGPU has no adapter"):
            browser.PortPage(tab, 60).call("attend", _nested("tutorial_seq3_dk4"))
    finally:
        chromium.close()


def test_a_prefill_and_decode_steps_give_the_rows_of_one_causal_pass(page):
    """test_decode.py's prefill and decode steps through the WebGPU port: each block, with
    queryOffset at its first row, within float32's budget of the oracle's whole causal pass."""
    from test_decode import BLOCKS, KEY, QUERY, VALUE, exact_pass

    truth = exact_pass()
    budget = truth.budgets["float32"].output
    for start, rows in BLOCKS:
        end = start + rows
        answer = page.call("attend", {
            "query": QUERY[..., start:end, :].tolist(), "key": KEY[..., :end, :].tolist(),
            "value": VALUE[..., :end, :].tolist(),
            "options": {"isCausal": True, "enableGqa": True, "queryOffset": start},
        })  # fmt: skip
        assert "output" in answer, answer
        error = np.abs(np.asarray(answer["output"], dtype=np.float64) - truth.output[..., start:end, :])
        used = float(np.max(error / budget[..., start:end, :]))
        assert used <= 1, f"rows {start}..{end - 1}: {used:.1%} of the budget"


def test_a_windowed_prefill_and_decode_steps_with_sinks_give_the_rows_of_one_pass(page):
    """The same blocks with a sliding window shorter than the prefill, sink tokens and a sink logit
    per head: each block, with queryOffset at its first row, within float32's budget of the
    oracle's whole windowed pass (the shader skips the tiles outside each block's sinks and band)."""
    from test_decode import BLOCKS, HQ, KEY, QUERY, VALUE

    from attention_port.golden import oracle

    extra = {"window": (9, 0), "sink_tokens": 2, "sink_logits": [0.5, -1.0, 2.0, 0.0][:HQ]}
    truth = oracle.attention(QUERY, KEY, VALUE, is_causal=True, enable_gqa=True, **extra)
    budget = truth.budgets["float32"].output
    options = {"window": [9, 0], "sinkTokens": 2, "sinkLogits": extra["sink_logits"]}
    for start, rows in BLOCKS:
        end = start + rows
        answer = page.call("attend", {
            "query": QUERY[..., start:end, :].tolist(), "key": KEY[..., :end, :].tolist(),
            "value": VALUE[..., :end, :].tolist(),
            "options": {"isCausal": True, "enableGqa": True, "queryOffset": start, **options},
        })  # fmt: skip
        assert "output" in answer, answer
        error = np.abs(np.asarray(answer["output"], dtype=np.float64) - truth.output[..., start:end, :])
        used = float(np.max(error / budget[..., start:end, :]))
        assert used <= 1, f"rows {start}..{end - 1}: {used:.1%} of the budget"


def test_a_layer_prefill_and_decode_steps_with_the_cache_give_one_causal_pass(page):
    """test_layer_cache.py's prefill and decode steps through the shared layer over the WebGPU
    port's core: each block's output and the final cache within float32's budget of the oracle's
    whole pass."""
    from test_layer_cache import BLOCKS, OPTIONS, TRUTH, WEIGHTS, X

    params = {"wQ": WEIGHTS["w_q"], "wK": WEIGHTS["w_k"], "wV": WEIGHTS["w_v"], "wO": WEIGHTS["w_o"],
              "bO": WEIGHTS["b_o"]}  # fmt: skip
    params = {name: w.tolist() for name, w in params.items()}
    options = {"numHeads": OPTIONS["num_heads"], "numKvHeads": OPTIONS["num_kv_heads"], "isCausal": True,
               "rope": OPTIONS["rope"]}  # fmt: skip
    budget = TRUTH.budgets["float32"].output  # the rule's, as the oracle wrote it
    cache: dict = {}
    for start, rows in BLOCKS:
        answer = page.call("layer", {"xQ": X[..., start : start + rows, :].tolist(), "params": params,
                                     "options": {**options, **cache}})  # fmt: skip
        cache = {"pastKey": answer["presentKey"], "pastValue": answer["presentValue"]}
        error = np.abs(
            np.asarray(answer["output"], dtype=np.float64) - TRUTH.output[..., start : start + rows, :]
        )
        used = float(np.max(error / budget[..., start : start + rows, :]))
        assert used <= 1, f"rows {start}..{start + rows - 1}: {used:.1%} of the budget"
    key_budget = TRUTH.budgets["float32"].present_key
    assert np.all(np.abs(np.asarray(cache["pastKey"]) - TRUTH.present_key) <= key_budget)
