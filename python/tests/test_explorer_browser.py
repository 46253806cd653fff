"""The attention explorer in a real browser: Debian's Chromium, driven by playwright.

Playwright never downloads a browser here: it drives the Chromium found on the machine (apt's
`chromium`, or $CHROMIUM). Without one, or without the playwright package, these tests skip with a
reason (scripts/test says so in one line). One browser for the module; the page is built once.

ATTENTION_PORT_SCREENSHOT=docs/explorer.png also writes the README's screenshot of the built page
(step by step) and docs/explorer-heads.png beside it (every head side by side), and
docs/explorer-layer.png (the layer view at its second step, the heads split) and
docs/explorer-decode.png (the decode view at step 6, three new tokens after three cached).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from attention_port.harness.node import find_node
from attention_port.pages.explore import explorer_command
from attention_port.paths import REPO_ROOT

pytestmark = pytest.mark.browser


def find_chromium() -> str | None:
    """$CHROMIUM, else Debian's chromium (or chromium-browser) on PATH."""
    override = os.environ.get("CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHROMIUM = find_chromium()
if CHROMIUM is None:
    pytest.skip("no Chromium found (apt-get install chromium, or set $CHROMIUM)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")


@pytest.fixture(scope="module")
def built_page(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explorer")
    subprocess.run(explorer_command(build=out), check=True, capture_output=True, timeout=120, cwd=REPO_ROOT)
    return out / "index.html"


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


# Chromium's own console line when the page asks for a WebGPU adapter and there is none (the page
# asks once at start, to show the backend disabled): the browser's warning, not the page's.
NO_ADAPTER = "No available adapters."


class Page:
    """One tab on the page, with the console watched and every network request refused."""

    def __init__(self, browser, url: str, allow_http: bool = False):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.problems: list[str] = []
        self.requests: list[str] = []

        def route(request_route):
            url = request_route.request.url
            if url.startswith("file:") or (allow_http and url.startswith("http://127.0.0.1")):
                request_route.continue_()
            else:
                self.requests.append(url)
                request_route.abort()

        self.context.route("**/*", route)
        self.page = self.context.new_page()
        self.page.on(
            "console",
            lambda m: (
                m.type in ("error", "warning") and m.text != NO_ADAPTER and self.problems.append(m.text)
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        self.page.goto(url)
        self.page.wait_for_selector("#table-output td.num")

    def values(self, step: str) -> list[list[float]]:
        """The step's heatmap for the viewed head, full precision (each cell's data-value)."""
        rows = self.page.eval_on_selector_all(
            f"[id='table-{step}'] tr",
            "trs => trs.map(tr => [...tr.querySelectorAll('td.num')].map(td => td.dataset.value))",
        )
        return [[float(x) for x in row] for row in rows if row]

    def row_sums(self) -> list[float]:
        return [
            float(x) for x in self.page.eval_on_selector_all("td.rowsum", "t => t.map(x => x.dataset.rowSum)")
        ]

    def close(self) -> None:
        self.context.close()


@pytest.fixture
def page(browser, built_page):
    tab = Page(browser, built_page.as_uri())
    yield tab
    tab.close()
    assert tab.problems == [], "the console reported problems"
    assert tab.requests == [], "the page asked for something over the network"


def node_output(query, key, value, options=None) -> list[list[float]]:
    """attention.ts's output in Node, for comparing with the page's."""
    module = (REPO_ROOT / "typescript" / "src" / "attention.ts").as_uri()
    script = (
        f"import {{ scaledDotProductAttention }} from {json.dumps(module)};"
        f"console.log(JSON.stringify(scaledDotProductAttention({json.dumps(query)}, {json.dumps(key)},"
        f" {json.dumps(value)}, {json.dumps(options or {})})));"
    )
    run = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


TUTORIAL = {
    "query": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
    "key": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]],
    "value": [[1, 2], [3, 4], [5, 6]],
}


def test_opens_on_the_tutorial_example_with_the_output_nodes_attention_ts_gives(page):
    assert page.page.input_value("#preset") == "tutorial"
    # Exactly the same doubles as attention.ts in Node: the page runs that very file.
    assert page.values("output") == node_output(TUTORIAL["query"], TUTORIAL["key"], TUTORIAL["value"])
    assert len(page.values("scores")) == len(page.values("logits")) == len(page.values("weights")) == 3
    assert page.row_sums() == pytest.approx([1, 1, 1], abs=1e-15)


def oracle_output(case_id: str) -> list[float]:
    """The oracle's output of a fixture case, flat: the expected values of every backend."""
    from attention_port.cli import DEFAULT_FIXTURES
    from attention_port.golden.reader import load_fixtures

    (case,) = load_fixtures(DEFAULT_FIXTURES, [case_id])
    return [float(x) for x in case.expected.output.ravel()]


def wait_idle(page) -> None:
    """Until the newest recompute has been drawn (a backend may answer asynchronously)."""
    page.page.wait_for_function("() => document.body.dataset.busy === undefined")


@pytest.mark.parametrize("backend", ["readable", "flash", "simd"])
def test_every_backend_gives_the_oracles_numbers_on_the_tutorial_and_a_fixture_case(page, backend):
    assert page.page.is_enabled(f'#backend option[value="{backend}"]'), page.page.inner_text("#backend-note")
    page.page.select_option("#backend", backend)
    wait_idle(page)
    assert page.page.get_attribute("#status", "data-backend") == backend
    # The tutorial example is the fixture case tutorial_seq3_dk4: the oracle's output, to 1e-15.
    flat = [x for row in page.values("output") for x in row]
    assert flat == pytest.approx(oracle_output("tutorial_seq3_dk4"), abs=1e-15, rel=0)
    assert page.row_sums() == pytest.approx([1, 1, 1], abs=1e-15)
    # A fixture case with grouped-query heads, causal and a mask, held to the tolerance rule.
    page.page.select_option("#preset", "case:gqa_causal_masked")
    wait_idle(page)
    verdict = page.page.locator("#fixture-verdict")
    assert verdict.inner_text().startswith("within budget"), verdict.inner_text()
    # Switching backend keeps the case loaded and judges the new backend's output.
    other = "readable" if backend != "readable" else "flash"
    page.page.select_option("#backend", other)
    wait_idle(page)
    assert page.page.get_attribute("#status", "data-backend") == other
    assert page.page.locator("#fixture-verdict").inner_text().startswith("within budget")


@pytest.fixture(scope="module")
def webgpu_browser(browser):
    """A second Chromium with WebGPU on SwiftShader (the flags verify's WebGPU port runs with)."""
    from attention_port.harness.browser import ADAPTER_ARGS, CHROMIUM_ARGS

    args = CHROMIUM_ARGS + ADAPTER_ARGS["swiftshader"]
    chromium = browser.browser_type.launch(executable_path=CHROMIUM, args=args)
    yield chromium
    chromium.close()


def test_the_webgpu_backend_gives_the_oracles_numbers_within_float32s_budget(webgpu_browser, built_page):
    from attention_port.cli import DEFAULT_FIXTURES
    from attention_port.golden.reader import load_fixtures

    tab = Page(webgpu_browser, built_page.as_uri())
    try:
        assert tab.page.is_enabled('#backend option[value="webgpu"]'), tab.page.inner_text("#backend-note")
        tab.page.select_option("#backend", "webgpu")
        wait_idle(tab)
        assert tab.page.get_attribute("#status", "data-backend") == "webgpu"
        # The tutorial example: the oracle's output within float32's budget (compare.py's rule).
        (case,) = load_fixtures(DEFAULT_FIXTURES, ["tutorial_seq3_dk4"])
        output = np.array(tab.values("output"))
        budget = case.expected.budgets["float32"].output
        assert output.shape == case.expected.output.shape
        assert np.all(np.abs(output - case.expected.output) <= budget)
        assert not np.array_equal(output, case.expected.output)  # float32's numbers, not float64's
        # A fixture case with grouped-query heads, causal and a mask: the page's verdict, in float32.
        tab.page.select_option("#preset", "case:gqa_causal_masked")
        wait_idle(tab)
        verdict = tab.page.locator("#fixture-verdict")
        assert verdict.inner_text().startswith("within budget"), verdict.inner_text()
        assert "u = 2⁻²⁴ (float32)" in tab.page.inner_text("#fixture-panel")
        # Back to the readable port on the same case: float64's budget, and within it too.
        tab.page.select_option("#backend", "readable")
        wait_idle(tab)
        assert tab.page.locator("#fixture-verdict").inner_text().startswith("within budget")
        assert "u = 2⁻⁵³ (float64)" in tab.page.inner_text("#fixture-panel")
    finally:
        tab.close()
    assert tab.problems == [], "the console reported problems"
    assert tab.requests == [], "the page asked for something over the network"


def test_without_a_webgpu_adapter_the_backend_is_disabled_with_the_reason(page):
    # This Chromium runs without WebGPU's flags: navigator.gpu is there, but no adapter on a machine
    # without a GPU. The page asks for one at start and offers the backend disabled, saying why.
    option = page.page.locator('#backend option[value="webgpu"]')
    assert option.is_disabled()
    assert option.get_attribute("title") == "no WebGPU adapter in this browser"
    assert "(not here: see beside)" in option.inner_text()
    assert "webgpu: no WebGPU adapter in this browser" in page.page.inner_text("#backend-note")


def test_a_backend_that_fails_is_said_beside_the_picker_not_as_an_input_error(page):
    # A backend that passed the check at start but fails when it computes (here: WebGPU chosen by
    # force, in a browser with no adapter) is the backend's failure: the inputs are fine.
    before = page.values("output")
    page.page.evaluate(
        """() => {
          const picker = document.getElementById('backend');
          picker.querySelector('option[value="webgpu"]').disabled = false;
          picker.value = 'webgpu';
          picker.dispatchEvent(new Event('change'));
        }"""
    )
    wait_idle(page)
    said = page.page.inner_text("#error-backend")
    assert "webgpu.ts could not compute these inputs: WebGpuUnavailableError" in said
    assert "The inputs are fine" in said
    # No input is blamed; the window view, drawn by the same backend, says it could not draw.
    errors = page.page.eval_on_selector_all(
        ".error:not(#error-backend):not(#window-error)", "e => e.map(x => x.textContent).join('')"
    )
    assert errors == ""
    assert page.page.inner_text("#window-error").startswith("WebGPU compute shader")
    assert "inputs or options have an error" not in page.page.inner_text("body")
    assert "webgpu.ts failed" in page.page.inner_text("#arithmetic")
    assert page.values("output") == before
    assert "stale" in page.page.get_attribute("#steps", "class")
    # Another backend computes the same inputs: the line goes.
    page.page.select_option("#backend", "flash")
    wait_idle(page)
    assert page.page.inner_text("#error-backend") == ""
    assert "stale" not in page.page.get_attribute("#steps", "class")


def test_causal_makes_the_weights_lower_triangular(page):
    page.page.check("#causal")
    weights = page.values("weights")
    assert all(weights[i][j] == 0 for i in range(3) for j in range(3) if j > i)
    assert all(weights[i][j] > 0 for i in range(3) for j in range(3) if j <= i)
    assert weights[0][0] == 1
    assert page.row_sums() == pytest.approx([1, 1, 1], abs=1e-15)


def test_clicking_a_logits_cell_masks_it_and_the_row_renormalises(page):
    before = page.values("weights")
    page.page.click('#table-logits td[data-i="0"][data-j="2"]')
    after = page.values("weights")
    assert after[0][2] == 0
    for j in (0, 1):  # the rest of row 0 shares the mass the masked key had
        assert after[0][j] == pytest.approx(before[0][j] / (1 - before[0][2]), rel=1e-14)
    assert after[1:] == before[1:]
    assert json.loads(page.page.input_value("#text-attnMask").replace("\n", "")) == [
        [True, True, False], [True, True, True], [True, True, True],
    ]  # fmt: skip
    # The keyboard does the same: Enter on a focused logits cell unmasks it again.
    page.page.focus('#table-logits td[data-i="0"][data-j="2"]')
    page.page.keyboard.press("Enter")
    assert page.values("weights") == before


def test_a_float_mask_value_is_added_not_a_mask(page):
    page.page.select_option("#mask-mode", "float")
    page.page.fill("#mask-value", "-1e30")
    page.page.click('#table-logits td[data-i="1"][data-j="0"]')
    expected = node_output(
        TUTORIAL["query"], TUTORIAL["key"], TUTORIAL["value"],
        {"attnMask": [[0, 0, 0], [-1e30, 0, 0], [0, 0, 0]]},
    )  # fmt: skip
    assert page.values("output") == expected


def test_hovering_a_weight_shows_its_arithmetic(page):
    page.page.hover('#table-weights td[data-i="0"][data-j="2"]')
    text = page.page.inner_text("#arithmetic")
    assert "q0·k2 = 1×1 + 0×1 + 1×0 + 0×0 = 1" in text
    assert "× scale 0.5 = 0.5" in text
    # Full precision, the subtraction of the row max written out, a negative in parentheses.
    logits_row = [0.5 * x for x in (2, 0, 1)]  # scores row 0 of the tutorial are [2, 0, 1]
    assert "row max = 1" in text and "x − row max = 0.5 − 1 = -0.5" in text
    total = sum(math.exp(x - 1) for x in logits_row)
    assert f"row sum Σ exp(logit − row max) = {total!r}" in text
    lit = page.page.eval_on_selector_all(".lit-cell", "t => t.map(x => x.closest('table').dataset.step)")
    assert lit == ["weights"]
    assert page.page.is_visible('table.cells-edit[data-input="query"] tr.lit[data-row="0"]')
    assert page.page.is_visible('table.cells-edit[data-input="key"] tr.lit[data-row="2"]')


def test_a_fixture_case_shows_the_oracle_and_within_budget(page):
    page.page.select_option("#preset", "case:gqa_causal_masked")
    verdict = page.page.locator("#fixture-verdict")
    assert verdict.inner_text().startswith("within budget")
    assert 0 <= float(verdict.get_attribute("data-used")) < 1
    assert page.page.is_visible("#table-expected")
    heads = page.page.eval_on_selector_all("#head option", "o => o.length")
    assert heads > 1
    page.page.select_option("#head", str(heads - 1))
    expected = [x for row in page.values("expected") for x in row]
    assert expected == pytest.approx([x for row in page.values("output") for x in row], rel=1e-13, abs=1e-300)
    # Changing anything leaves the fixture's inputs: the oracle's values no longer apply.
    page.page.check("#causal") if not page.page.is_checked("#causal") else page.page.uncheck("#causal")
    assert page.page.locator("#fixture-verdict").count() == 0


@pytest.mark.parametrize(
    ("box", "text", "target", "words"),
    [
        ("query", "[[1, 0, 1, 0], [0, 1]]", "query", "AttentionInputError (ragged): query is ragged"),
        ("key", '[[1, 0, 1, 0], [0, 1, 0, "x"], [1, 1, 0, 0]]', "key", "AttentionInputError (type): key"),
        ("value", "[[1, 2], [3, 4]]", "value", "AttentionInputError (shape)"),
        ("attnMask", "[[true, false], [true, true]]", "attnMask", "AttentionInputError (mask): attnMask"),
        ("query", "[[1, 0, 1, 0]", "query", "query is not JSON"),
    ],
)
def test_bad_input_shows_the_ports_error_and_keeps_the_last_result(page, box, text, target, words):
    before = page.values("output")
    page.page.fill(f"#text-{box}", text)
    assert words in page.page.inner_text(f"#error-{target}")
    assert page.values("output") == before
    assert "stale" in page.page.get_attribute("#steps", "class")
    page.page.fill(f"#text-{box}", json.dumps(TUTORIAL.get(box)) if box in TUTORIAL else "")
    assert page.page.inner_text(f"#error-{target}") == ""


def test_editing_a_cell_recomputes_and_a_word_there_meets_the_ports_check(page):
    page.page.fill('input[aria-label="value[2][1]"]', "10")
    page.page.keyboard.press("Tab")
    value = [[1, 2], [3, 4], [5, 10]]
    assert page.values("output") == node_output(TUTORIAL["query"], TUTORIAL["key"], value)
    assert json.loads(page.page.input_value("#text-value").replace("\n", "")) == value
    page.page.fill('input[aria-label="query[0][1]"]', "two")
    page.page.keyboard.press("Tab")
    assert "AttentionInputError (type): query[0][1]" in page.page.inner_text("#error-query")


def test_every_bundled_fixture_case_loads_and_is_within_budget(page):
    cases = page.page.eval_on_selector_all("#preset option[value^='case:']", "o => o.map(x => x.value)")
    verdicts = {}
    for case in cases:
        page.page.select_option("#preset", case)
        verdict = page.page.locator("#fixture-verdict")
        errors = page.page.eval_on_selector_all(".error", "e => e.map(x => x.textContent).join('')")
        verdicts[case] = verdict.inner_text() if verdict.count() else errors
    valid = [c for c in cases if not c.startswith("case:error_")]
    assert len(valid) > 30
    judged = {c: v for c, v in verdicts.items() if c in valid and not v.startswith("outside the contract")}
    assert len(judged) == len(valid) - 1  # score_overflow: no answer to judge
    assert {c: v for c, v in judged.items() if not v.startswith("within budget")} == {}
    # An invalid case's verdict: the page's error against the expected one, in camelCase.
    assert {
        c: v for c, v in verdicts.items() if c not in valid and not v.startswith("the expected error")
    } == {}


def test_an_invalid_fixture_case_shows_the_error_it_must_raise(page):
    page.page.select_option("#preset", "case:error_ragged_key_depth")
    expected = "key is ragged: key[1][1] is an array, expected a scalar"
    assert expected in page.page.inner_text("#case-description")
    assert expected in page.page.inner_text("#error-key")


def test_a_bad_option_shows_the_ports_error_under_that_option(page):
    page.page.fill("#softcap", "-1")
    assert "softcap" in page.page.inner_text("#error-softcap")
    assert page.page.inner_text("#error-options") == ""
    page.page.fill("#softcap", "0")
    page.page.select_option("#scale-mode", "custom")
    page.page.fill("#scale-custom", "abc")
    assert "AttentionInputError (value): scale must be a finite number" in page.page.inner_text(
        "#error-scale"
    )
    # An empty custom scale is an error beside its box, not a silent 1/√d_k.
    page.page.fill("#scale-custom", "")
    assert "scale is custom but its box is empty" in page.page.inner_text("#error-scale")
    assert "stale" in page.page.get_attribute("#steps", "class")
    page.page.fill("#scale-custom", "0.25")
    assert page.page.inner_text("#error-scale") == ""
    expected = node_output(TUTORIAL["query"], TUTORIAL["key"], TUTORIAL["value"], {"scale": 0.25})
    assert page.values("output") == expected


def test_the_arithmetic_panel_follows_every_change(page):
    page.page.hover('#table-weights td[data-i="0"][data-j="2"]')
    assert "weight (the port's) = 0.3071958857184984" in page.page.inner_text("#arithmetic")
    page.page.check("#causal")  # key 2 is after query 0: masked, weight 0
    text = page.page.inner_text("#arithmetic")
    assert "causal: key 2 > query 0 → −∞" in text and "weight (the port's) = 0" in text
    assert "0.3071958857184984" not in text
    page.page.select_option("#preset", "case:gqa_causal_masked")
    assert "scale 0.5" not in page.page.inner_text("#arithmetic")


def tabs_to_weights(page) -> int:
    tabs = 0
    while tabs < 200 and not page.page.evaluate("() => !!document.activeElement.closest('#table-weights')"):
        page.page.keyboard.press("Tab")
        tabs += 1
    return tabs


def test_one_tab_stop_per_heatmap_and_arrow_keys_inside(page):
    # The first Tab reaches "Skip to the heatmaps"; Enter there, then one stop per heatmap.
    page.page.keyboard.press("Tab")
    assert page.page.evaluate("() => document.activeElement.textContent") == "Skip to the heatmaps"
    page.page.keyboard.press("Enter")
    assert tabs_to_weights(page) == 3  # scores, logits, weights
    page.page.keyboard.press("ArrowRight")
    page.page.keyboard.press("ArrowRight")
    page.page.keyboard.press("ArrowDown")
    focused = page.page.evaluate("() => [document.activeElement.dataset.i, document.activeElement.dataset.j]")
    assert focused == ["1", "2"]
    assert "q1·k2" in page.page.inner_text("#arithmetic")
    assert page.page.eval_on_selector_all('#table-weights td[tabindex="0"]', "t => t.length") == 1
    # Captions a screen reader can read, and a label naming the keys.
    assert "4. weights" in page.page.inner_text("#table-weights caption")


def test_a_mask_click_acts_on_the_viewed_head_only(page):
    for field, value in (("lq", "3"), ("lk", "3"), ("e", "2"), ("ev", "2"), ("hq", "2"), ("hkv", "2")):
        page.page.fill(f"#random-{field}", value)  # sizes draw at once, no button needed
    assert page.page.eval_on_selector_all("#head option", "o => o.length") == 2
    page.page.select_option("#head", "1")
    page.page.click('#table-logits td[data-i="0"][data-j="1"]')
    mask = json.loads(page.page.input_value("#text-attnMask").replace("\n", ""))
    assert mask == [[[True] * 3] * 3, [[True, False, True], [True] * 3, [True] * 3]]
    assert "head 1 only" in page.page.inner_text("#mask-note")
    # The float mode turns the boolean mask into numbers and adds the value where clicked.
    page.page.select_option("#mask-mode", "float")
    page.page.fill("#mask-value", "-2")
    page.page.click('#table-logits td[data-i="2"][data-j="0"]')
    mask = json.loads(
        page.page.input_value("#text-attnMask").replace("\n", "").replace("-Infinity", '"-inf"')
    )
    assert mask[1][0] == [0, "-inf", 0] and mask[1][2] == [-2, 0, 0] and mask[0] == [[0] * 3] * 3


def test_every_head_side_by_side_names_the_key_value_head_it_reads(page):
    for field, value in (("lq", "3"), ("lk", "4"), ("e", "2"), ("ev", "2"), ("hq", "4"), ("hkv", "2")):
        page.page.fill(f"#random-{field}", value)
    page.page.check("#all-heads")
    captions = page.page.eval_on_selector_all(
        "#multi-head figcaption", "c => c.map(x => x.firstChild.textContent)"
    )
    assert captions == [f"weights, head {h}, reads key/value head {h // 2}" for h in range(4)]
    page.page.select_option("#head", "3")
    assert page.values("weights@3") == page.values("weights")


REAL_TOKENS = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]


def test_the_real_model_preset_shows_its_12_heads_with_the_tokens_as_labels(page):
    fixture = json.loads((REPO_ROOT / "fixtures" / "cases" / "real_model_heads.json").read_text())
    assert f"({' '.join(REAL_TOKENS)})" in fixture["description"]  # the tokens the labels say
    oracle = np.array(fixture["expected"]["weights"]["data"])  # [12, 8, 8]
    page.page.select_option("#preset", "real-model")
    assert "all-MiniLM-L6-v2" in page.page.inner_text("#case-description")
    assert "Apache License 2.0" in page.page.inner_text("#case-description")
    assert page.page.inner_text("#fixture-verdict").startswith("within budget")
    captions = page.page.eval_on_selector_all(
        "#multi-head figcaption", "c => c.map(x => x.firstChild.textContent)"
    )
    assert captions == [f"weights, head {h}, reads key/value head {h}" for h in range(12)]
    for h in range(12):  # every head's weights are the oracle's, each row labelled with its token
        table = f"[id='table-weights@{h}']"
        shown = np.array(page.values(f"weights@{h}"))
        assert shown.shape == (8, 8) and np.allclose(shown, oracle[h], rtol=1e-12, atol=0), h
        columns = page.page.eval_on_selector_all(
            f"{table} tr:first-child th", "t => t.map(x => x.textContent)"
        )
        assert columns[:8] == [f"key {j} {token}" for j, token in enumerate(REAL_TOKENS)]
        rows = page.page.eval_on_selector_all(f"{table} tr th[scope=row]", "t => t.map(x => x.textContent)")
        assert rows == [f"query {i} {token}" for i, token in enumerate(REAL_TOKENS)]
    assert accessibility(page, "#table-weights tr:nth-child(3) th")["name"] == "query 1 the"
    # The tutorial's numbers are no tokens: its headers are indices again.
    page.page.select_option("#preset", "tutorial")
    rows = page.page.eval_on_selector_all("#table-weights tr th[scope=row]", "t => t.map(x => x.textContent)")
    assert rows == ["query 0", "query 1", "query 2"]


def test_guided_mode_walks_the_five_steps_with_the_real_source_lines(page):
    from attention_port.pages.side_by_side import (
        PYTHON_SOURCE,
        TYPESCRIPT_SOURCE,
        function_source,
        step_blocks,
    )

    python_text = PYTHON_SOURCE.read_text(encoding="utf-8")
    typescript_text = TYPESCRIPT_SOURCE.read_text(encoding="utf-8")
    python = step_blocks(python_text, "#", PYTHON_SOURCE)
    typescript = step_blocks(typescript_text, "//", TYPESCRIPT_SOURCE)
    # Step 4 shows the softmax it calls, where the row max is subtracted.
    python[4] += "\n\n" + function_source(python_text, "def softmax(", PYTHON_SOURCE)
    typescript[4] += "\n\n" + function_source(typescript_text, "export function softmax(", TYPESCRIPT_SOURCE)
    page.page.click("#guide-start")
    seen = []
    for step in range(1, 6):
        seen.append(page.page.get_attribute("body", "data-guide-step"))
        assert page.page.inner_text("#guide-typescript") == typescript[step]
        assert page.page.inner_text("#guide-python") == python[step]
        if step < 5:
            page.page.keyboard.press("ArrowRight")  # the focus is on Next: the arrow steps too
    assert seen == ["scores", "scale", "mask", "weights", "output"]
    text = page.page.inner_text("#guide-text")
    assert "= [2.6014309893256886, 3.6014309893256886]" in text  # the tutorial's output row 0
    page.page.click("#guide-prev")
    text = page.page.inner_text("#guide-text")
    assert "row max m = 1" in text and "x − m = [0, -1, -0.5]" in text
    # The guide follows a change made while it is open: at the mask step, causal hides key 2.
    page.page.click("#guide-prev")
    assert "causal is off" in page.page.inner_text("#guide-text")
    page.page.check("#causal")
    text = page.page.inner_text("#guide-text")
    assert "causal is on" in text and "logits[0][2] = −∞" in text


def run_copied_call(source: str, tmp_path: Path) -> object:
    """The copy box's text run in Node, its repository path made absolute."""
    script = tmp_path / "call.ts"
    src = (REPO_ROOT / "typescript" / "src").as_uri()
    script.write_text(
        source.replace('"./typescript/src/', f'"{src}/').replace(
            "console.log(output);", "console.log(JSON.stringify(output));"
        )
    )
    run = subprocess.run([str(find_node()), str(script)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize(
    ("backend", "module"),
    [("readable", "attention-port"), ("flash", "attention-port/flash"), ("simd", "attention-port/simd")],
)
def test_copy_as_a_typescript_call_runs_in_node_to_the_pages_output(page, tmp_path, backend, module):
    page.page.select_option("#backend", backend)
    wait_idle(page)
    page.page.check("#causal")
    page.page.click("#copy-call")
    source = page.page.input_value("#copy-text")
    assert "isCausal: true" in source
    # The chosen backend's module: its file in the repository (simd.ts's Node entry, which reads
    # its kernel from disk, for simd), and the package's name for it.
    file = {"readable": "attention.ts", "simd": "simd-node.ts"}.get(backend, f"{backend}.ts")
    assert f'import {{ scaledDotProductAttention }} from "./typescript/src/{file}";' in source
    assert f'import from "{module}"' in source
    assert run_copied_call(source, tmp_path) == page.values("output")


def test_the_copy_box_follows_every_change_or_says_why_it_is_empty(page, tmp_path):
    page.page.click("#copy-call")
    first = page.page.input_value("#copy-text")
    # A preset: the box is rewritten for its inputs, and the note no longer says "Copied".
    page.page.select_option("#preset", "case:gqa_causal_masked")
    wait_idle(page)
    rewritten = page.page.input_value("#copy-text")
    assert rewritten != first
    assert "Rewritten for the current inputs" in page.page.inner_text("#copy-note")
    assert json.loads(page.page.input_value("#text-query").replace("\n", "")) == json.loads(
        rewritten.split("const query = ")[1].split(";")[0].replace("\n", "")
    )
    # Run in Node, the call gives the oracle's output of the case (to well within its budget).
    flat = np.ravel(run_copied_call(rewritten, tmp_path)).tolist()
    assert flat == pytest.approx(oracle_output("gqa_causal_masked"), rel=1e-12, abs=1e-12)
    # A backend: the import follows it.
    page.page.select_option("#backend", "simd")
    wait_idle(page)
    # (simd.ts's Node entry: run with node at the repository's root, it reads its kernel from disk)
    assert '"./typescript/src/simd-node.ts"' in page.page.input_value("#copy-text")
    assert '"attention-port/simd"' in page.page.input_value("#copy-text")
    # An option.
    page.page.select_option("#preset", "tutorial")
    wait_idle(page)
    page.page.select_option("#scale-mode", "custom")
    page.page.fill("#scale-custom", "0.25")
    wait_idle(page)
    assert "scale: 0.25" in page.page.input_value("#copy-text")
    # An input: a cell edited.
    page.page.fill('input[aria-label="value[2][1]"]', "10")
    page.page.keyboard.press("Tab")
    wait_idle(page)
    assert "[5, 10]" in page.page.input_value("#copy-text")
    # An input with an error: nothing to copy, and the note says why.
    page.page.fill("#text-query", "[[1, 0, 1, 0], [0, 1]]")
    wait_idle(page)
    assert page.page.input_value("#copy-text") == ""
    assert page.page.inner_text("#copy-note").startswith(
        "Nothing to copy: the inputs or options have an error"
    )
    page.page.fill("#text-query", json.dumps(TUTORIAL["query"]))
    wait_idle(page)
    assert "const query = " in page.page.input_value("#copy-text")


def test_at_480_px_the_heatmaps_follow_the_input_being_edited(browser, built_page):
    context = browser.new_context(viewport={"width": 400, "height": 800}, has_touch=True)
    tab = context.new_page()
    tab.goto(built_page.as_uri())
    tab.wait_for_selector("#table-output td.num")
    tab.focus("#text-value")
    box = tab.eval_on_selector("#box-value", "e => e.getBoundingClientRect().bottom + window.scrollY")
    steps = tab.eval_on_selector("#steps", "e => e.getBoundingClientRect().top + window.scrollY")
    assert 0 <= steps - box < 50
    # On touch, a tap on a logits cell explains it and masks nothing.
    tab.tap('#table-logits td[data-i="0"][data-j="1"]')
    assert "q0·k1" in tab.inner_text("#arithmetic")
    assert tab.input_value("#text-attnMask") == ""
    # A long press masks it.
    cell = '#table-logits td[data-i="0"][data-j="1"]'
    tab.dispatch_event(cell, "pointerdown", {"pointerType": "touch", "bubbles": True})
    tab.wait_for_timeout(800)
    tab.dispatch_event(cell, "pointerup", {"pointerType": "touch", "bubbles": True})
    assert json.loads(tab.input_value("#text-attnMask").replace("\n", "")) == [
        [True, False, True], [True, True, True], [True, True, True],
    ]  # fmt: skip
    context.close()


def test_a_backends_first_call_is_a_warm_up_off_the_clock_and_the_label_says_what_it_timed(page):
    page.page.select_option("#backend", "flash")
    wait_idle(page)
    status = page.page.locator("#status")
    first = status.inner_text()
    # The first call of flash is its warm-up: timed apart, and said to be left out.
    assert "after a warm-up (the backend's first call," in first and "ms, not counted)" in first, first
    assert float(status.get_attribute("data-warm-up-ms")) >= 0
    runs = int(status.get_attribute("data-runs"))
    assert 1 <= runs <= 5
    assert (f"median of {runs} runs" if runs > 1 else "1 run") in first
    assert first.startswith("flash.ts ")  # flash computes every step itself
    # The next compute of the same backend has no warm-up to leave out.
    page.page.check("#causal")
    wait_idle(page)
    second = status.inner_text()
    assert status.get_attribute("data-warm-up-ms") is None
    assert "after a warm-up;" in second and "not counted" not in second, second
    runs = int(status.get_attribute("data-runs"))
    assert (f"median of {runs} runs" if runs > 1 else "1 run") in second
    # simd computes the output only: its time includes the readable port's other steps, and says so.
    page.page.select_option("#backend", "simd")
    wait_idle(page)
    assert status.inner_text().startswith("simd.ts's output and attention.ts's other steps ")


def open_guide_at(page, step: int) -> None:
    page.page.click("#guide-start")
    for _ in range(step - 1):
        page.page.click("#guide-next")


def test_the_guides_code_panes_wrap_inside_their_box(page):
    open_guide_at(page, 1)
    for step in range(1, 6):
        for pane in ("#guide-typescript", "#guide-python"):
            sizes = page.page.eval_on_selector(
                pane,
                """e => {
                  const r = e.getBoundingClientRect(), f = e.closest('section').getBoundingClientRect();
                  return [e.scrollWidth, e.clientWidth, r.left, r.right, f.left, f.right];
                }""",
            )
            scroll_width, client_width, left, right, box_left, box_right = sizes
            assert scroll_width <= client_width, (
                f"step {step}, {pane}: {scroll_width} px of code in {client_width}"
            )
            assert box_left <= left and right <= box_right, f"step {step}, {pane} leaves its section"
        if step < 5:
            page.page.click("#guide-next")


def lit_steps(page) -> list[str]:
    """The step heatmaps that have an outlined row or cell."""
    return page.page.eval_on_selector_all(
        "#steps table.heat",
        "ts => ts.filter(t => t.querySelector('.lit-row, .lit-col, .lit-cell')).map(t => t.dataset.step)",
    )


def test_the_guide_outlines_only_its_steps_cells_and_shows_only_the_choosers_it_uses(page):
    open_guide_at(page, 1)
    outlined = []
    key_chooser = []
    for step in range(1, 6):
        outlined.append(lit_steps(page))
        key_chooser.append(page.page.is_visible("#guide-key"))
        assert page.page.is_visible("#guide-row")  # every step is about one query row
        if step < 5:
            page.page.click("#guide-next")
    assert outlined == [["scores"], ["logits"], ["logits"], ["weights"], ["output"]]
    # The output step takes every key of the row: no key row to choose there.
    assert key_chooser == [True, True, True, True, False]
    # Outside the guide, a hovered cell still outlines its row in every step.
    page.page.click("#guide-close")
    page.page.hover('#table-weights td[data-i="1"][data-j="0"]')
    assert lit_steps(page) == ["scores", "logits", "weights", "output"]


def accessibility(page, selector: str) -> dict[str, str]:
    """Chromium's own accessible role, name and description of the element (DevTools protocol)."""
    cdp = page.context.new_cdp_session(page.page)
    try:
        root = cdp.send("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
        node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": selector})["nodeId"]
        (ax, *_) = cdp.send("Accessibility.getPartialAXTree", {"nodeId": node, "fetchRelatives": False})[
            "nodes"
        ]
    finally:
        cdp.detach()
    return {key: ax.get(key, {}).get("value", "") for key in ("role", "name", "description")}


def test_screen_readers_hear_cells_and_headers_in_words_and_one_sentence_per_move(page):
    weights = "#table-weights"
    page.page.focus(f'{weights} td[data-i="0"][data-j="0"]')
    page.page.keyboard.press("ArrowRight")
    page.page.keyboard.press("ArrowRight")
    cell = accessibility(page, f'{weights} td[data-i="0"][data-j="2"]')
    assert cell == {**cell, "role": "gridcell", "name": "weight of query 0 on key 2: 0.307"}
    assert page.page.evaluate("() => document.activeElement.getAttribute('aria-label')") == cell["name"]
    # Headers in words; the shape its own text; the row sums' column has a header.
    assert accessibility(page, f"{weights} tr:first-child th:nth-of-type(3)")["name"] == "key 2"
    assert accessibility(page, f"{weights} tr:nth-child(2) th")["name"] == "query 0"
    assert accessibility(page, "#table-output tr:first-child th:nth-of-type(2)")["name"] == "feature 1"
    table = accessibility(page, weights)
    assert table["role"] == "grid"
    assert table["name"] == "4. weights = softmax(logits)"
    assert table["description"].startswith("shape [3, 3]")
    headers = page.page.eval_on_selector_all(f"{weights} tr:first-child th", "t => t.map(x => x.textContent)")
    assert headers[-1] == "Σ (row sum)"
    assert len(headers) == 4  # key 0-2 and Σ, over the 3 key columns and the sums
    # The arithmetic panel is not read out on every move; one short sentence is.
    assert page.page.get_attribute("#arithmetic", "aria-live") is None
    said = page.page.inner_text("#cell-said")
    assert (
        said
        == "weight of query 0 on key 2 is 0.307: row 0 of the logits through softmax, so row 0 sums to 1."
    )
    assert page.page.get_attribute("#cell-said", "role") == "status"
    page.page.keyboard.press("ArrowDown")
    said = page.page.inner_text("#cell-said")
    assert said.startswith("weight of query 1 on key 2 is ") and said.count(": ") == 1 and len(said) < 120
    assert "\n" not in said
    # One Tab stop per grid: Tab leaves the weights for the output.
    page.page.keyboard.press("Tab")
    assert page.page.evaluate("() => document.activeElement.closest('table').id") == "table-output"


def test_at_400_px_the_steps_explanation_and_its_heatmap_are_on_screen_together(browser, built_page):
    context = browser.new_context(viewport={"width": 400, "height": 800}, has_touch=True)
    try:
        tab = context.new_page()
        tab.goto(built_page.as_uri())
        tab.wait_for_selector("#table-output td.num")
        tab.click("#guide-start")
        for step, heatmap in enumerate(("scores", "logits", "logits", "weights", "output"), start=1):
            text = tab.eval_on_selector("#guide-text", "e => e.getBoundingClientRect().toJSON()")
            figure = tab.eval_on_selector(f"#table-{heatmap}", "e => e.getBoundingClientRect().toJSON()")
            guide = tab.eval_on_selector("#guide", "e => e.getBoundingClientRect().toJSON()")
            assert 0 <= text["top"] < 800 and text["bottom"] > 0, (
                f"step {step}: the text is off screen: {text}"
            )
            # The whole heatmap on screen, below the explanation (not under it).
            assert guide["bottom"] <= figure["top"] and figure["bottom"] <= 800, f"step {step}: {figure}"
            if step < 5:
                tab.click("#guide-next")
        # A change made while the guide is open redraws it but leaves the page where it is.
        tab.evaluate("() => window.scrollTo(0, 0)")
        tab.evaluate("() => document.getElementById('causal').click()")
        tab.wait_for_function("() => document.body.dataset.busy === undefined")
        assert tab.is_checked("#causal")
        assert tab.evaluate("() => window.scrollY") == 0
    finally:
        context.close()


def test_seeded_random_with_grouped_query_heads(page):
    for field, value in (("lq", "5"), ("lk", "7"), ("e", "3"), ("ev", "2"), ("hq", "4"), ("hkv", "2")):
        page.page.fill(f"#random-{field}", value)
    page.page.click("#random-draw")
    assert page.page.is_checked("#gqa")
    assert page.page.eval_on_selector_all("#head option", "o => o.length") == 4
    page.page.select_option("#head", "3")
    query = json.loads(page.page.input_value("#text-query"))
    key = json.loads(page.page.input_value("#text-key"))
    value = json.loads(page.page.input_value("#text-value"))
    output = node_output(query, key, value, {"enableGqa": True})
    # Within a few ulps, not exactly: Chromium's V8 and Node's may round Math.exp differently.
    expected = [x for row in output[3] for x in row]
    assert [x for row in page.values("output") for x in row] == pytest.approx(expected, rel=1e-14, abs=0)
    page.page.fill("#random-lq", "65")
    page.page.click("#random-draw")
    assert "lq must be a whole number from 1 to 64" in page.page.inner_text("#error-random")


def sqrt_dk_curve(page, metric: str, series: str) -> dict[int, float]:
    page.page.wait_for_selector(f'svg[data-metric="{metric}"] circle')
    points = page.page.eval_on_selector_all(
        f'svg[data-metric="{metric}"] circle[data-series="{series}"]',
        "cs => cs.map(c => [Number(c.dataset.dk), Number(c.dataset.value)])",
    )
    return dict(points)


def test_sqrt_dk_panel_unscaled_max_weight_rises_towards_one(page):
    curve = sqrt_dk_curve(page, "maxWeight", "unscaled")
    assert sorted(curve) == [2**n for n in range(11)]
    assert curve[1] < 0.5 < curve[64] and curve[1024] > 0.9
    assert max(sqrt_dk_curve(page, "maxWeight", "scaled").values()) < 0.3
    page.page.focus("#dk")
    page.page.keyboard.press("End")  # the slider by keyboard, to d_k = 1024
    assert page.page.inner_text("#dk-value") == "1024"
    row = page.page.eval_on_selector_all("#sqrt-dk-values tr", "t => t[2].innerText")
    assert float(row.split()[-1]) > 0.9


def test_sqrt_dk_panel_is_monotone_where_its_text_says_and_says_how_many_draws(page):
    text = page.page.inner_text("#sqrt-dk-text")
    assert "the mean over 8 independent draws" in text
    assert "the largest weight per row rises towards 1 and the row entropy falls, at every step" in text
    # Every stop of the slider, by keyboard: the table's numbers, which are the charts' points.
    page.page.focus("#dk")
    page.page.keyboard.press("Home")
    seen: dict[int, list[float]] = {}
    while True:
        dk = int(page.page.inner_text("#dk-value"))
        rows = page.page.eval_on_selector_all(
            "#sqrt-dk-values tr",
            "t => t.slice(1).map(r => [...r.querySelectorAll('td')].map(d => Number(d.textContent)))",
        )
        seen[dk] = [value for row in rows for value in row]
        if dk == 1024:
            break
        page.page.keyboard.press("ArrowRight")
    assert sorted(seen) == [2**n for n in range(11)]
    dks = sorted(seen)
    # rows: spread, largest weight, entropy, Jacobian; columns: with 1/√d_k, without
    unscaled_max = [seen[d][3] for d in dks]
    unscaled_entropy = [seen[d][5] for d in dks]
    assert all(a < b for a, b in zip(unscaled_max, unscaled_max[1:], strict=False)), unscaled_max
    assert all(a > b for a, b in zip(unscaled_entropy, unscaled_entropy[1:], strict=False)), unscaled_entropy
    assert all(0.85 < seen[d][0] < 1.15 for d in dks)  # with the scale the spread stays near 1
    # The Jacobian: the unscaled one above the scaled for d_k 2-32, below it from 64 on.
    assert all(seen[d][7] > seen[d][6] for d in dks if 2 <= d <= 32)
    assert all(seen[d][7] < seen[d][6] for d in dks if d >= 64)
    assert seen[1024][7] < 0.1
    # The charts plot the very numbers the table shows (to its 3 digits).
    chart = sqrt_dk_curve(page, "maxWeight", "unscaled")
    assert [float(f"{chart[d]:.3g}") for d in dks] == unscaled_max


def test_at_64_the_heatmaps_are_canvases_that_hover_and_arrow_keys_explain(page):
    # Speed is measured by python -m attention_port.bench.explorer, not asserted here.
    for field in ("lq", "lk", "e", "ev"):
        page.page.fill(f"#random-{field}", "64")
    assert page.page.locator("#canvas-weights").count() == 1
    assert page.page.locator("#table-weights").count() == 0
    box = page.page.locator("#canvas-weights").bounding_box()
    assert box["width"] == 64 * 7 and box["height"] == 64 * 7
    page.page.mouse.move(box["x"] + 5 * 7 + 3, box["y"] + 9 * 7 + 3)  # row 9, column 5
    assert "q9·k5" in page.page.inner_text("#arithmetic")
    page.page.focus("#canvas-weights")
    page.page.keyboard.press("ArrowDown")
    assert "q10·k5" in page.page.inner_text("#arithmetic")
    weights = page.page.evaluate("() => document.getElementById('canvas-weights').getAttribute('aria-label')")
    assert weights.startswith("4. weights = softmax(logits): 64 by 64")


def test_built_file_works_from_disk_with_the_network_blocked(page):
    # The fixture `page` opens file://…/index.html, refuses every request that is not a file, and
    # checks after the test that none was made and the console stayed quiet.
    assert page.page.url.startswith("file://")
    page.page.select_option("#preset", "case:tutorial_seq3_dk4")
    assert page.page.inner_text("#fixture-verdict").startswith("within budget")
    options = page.page.eval_on_selector_all("#preset option", "o => o.map(x => x.value)")
    assert "case:long_sequence" not in options  # the built file leaves the largest cases out
    assert len(options) > 40
    screenshot = os.environ.get("ATTENTION_PORT_SCREENSHOT")
    if screenshot:
        # docs/explorer.png: step by step on the tutorial example, at the softmax (step 4).
        page.page.select_option("#preset", "tutorial")
        page.page.click("#guide-start")
        for _ in range(3):
            page.page.click("#guide-next")
        bottom = (
            page.page.eval_on_selector("#guide-code", "e => e.getBoundingClientRect().top + window.scrollY")
            + 260
        )
        page.page.screenshot(
            path=screenshot, full_page=True, clip={"x": 0, "y": 0, "width": 1400, "height": bottom}
        )
        # docs/explorer-heads.png beside it: four query heads over two key/value heads.
        page.page.click("#guide-close")
        for field, value in (("lq", "6"), ("lk", "6"), ("e", "4"), ("ev", "3"), ("hq", "4"), ("hkv", "2")):
            page.page.fill(f"#random-{field}", value)
        page.page.check("#all-heads")
        page.page.hover('[id="table-weights@2"] td[data-i="3"][data-j="1"]')
        heads = Path(screenshot).with_name("explorer-heads.png")
        top = page.page.eval_on_selector(
            "#inputs-panel", "e => e.getBoundingClientRect().top + window.scrollY"
        )
        bottom = page.page.eval_on_selector(
            "#arithmetic", "e => e.getBoundingClientRect().bottom + window.scrollY"
        )
        page.page.screenshot(
            path=str(heads),
            full_page=True,
            clip={"x": 0, "y": top - 8, "width": 1400, "height": bottom - top + 16},
        )


def test_served_page_has_every_fixture_and_a_quiet_console(browser):
    process = subprocess.Popen(explorer_command(), stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=60)
        url = lines[0].split(" at ")[1].split()[0]
        tab = Page(browser, url, allow_http=True)
        options = tab.page.eval_on_selector_all("#preset option", "o => o.map(x => x.value)")
        assert "case:long_sequence" in options
        tab.page.select_option("#preset", "case:long_sequence_causal_masked")
        assert tab.page.inner_text("#fixture-verdict").startswith("within budget")
        tab.close()
        assert tab.problems == [] and tab.requests == []
    finally:
        process.terminate()
        process.wait(timeout=30)


# ---- the layer view and the RoPE view --------------------------------------------------------------


def _grid(page, grid_id: str) -> np.ndarray:
    """A layer or RoPE grid's numbers at full precision (each cell's data-value)."""
    rows = page.eval_on_selector_all(
        f"[id='table-{grid_id}'] tr",
        "trs => trs.map(tr => [...tr.querySelectorAll('td.num')].map(td => td.dataset.value))",
    )
    return np.array([[float(x) for x in row] for row in rows if row])


def _layer_grids(page) -> list[str]:
    return page.eval_on_selector_all("#layer-maps table[role=grid]", "t => t.map(x => x.id.slice(6))")


@pytest.mark.parametrize(
    ("rope", "option"), [(None, "off"), ({"theta": 10000.0, "interleaved": False}, "half")]
)
def test_the_layer_view_walks_the_six_steps_with_the_lessons_lines_and_the_oracles_output(page, rope, option):
    from attention_port.golden import oracle
    from attention_port.pages import side_by_side

    tab = page.page
    tab.select_option("#layer-rope", option)
    lessons = {
        language: side_by_side.step_blocks(path.read_text(encoding="utf-8"), comment, path, 6)
        for language, path, comment in (
            ("typescript", side_by_side.TYPESCRIPT_LAYER, "//"),
            ("python", side_by_side.PYTHON_LAYER, "#"),
        )
    }
    shown = {}
    for step in range(1, 7):
        name = tab.inner_text("#layer-step-name")
        assert name.startswith(f"Step {step}: "), name
        assert tab.inner_text("#layer-count").startswith(f"step {step} of 6")
        for language, blocks in lessons.items():
            assert tab.inner_text(f"#layer-{language}") == blocks[step], (language, step)
        shown[step] = _layer_grids(tab)
        screenshot = os.environ.get("ATTENTION_PORT_SCREENSHOT")
        if screenshot and step == 2 and rope is None:  # docs/explorer-layer.png: the heads, split
            tab.locator("#layer-view").screenshot(path=str(Path(screenshot).with_name("explorer-layer.png")))
        if step == 1:
            inputs = {name: _grid(tab, f"layer-{key}") for name, key in
                      (("x_q", "x"), ("w_q", "wQ"), ("w_k", "wK"), ("w_v", "wV"))}  # fmt: skip
        if step == 6:
            inputs["w_o"] = _grid(tab, "layer-wO")
            output = _grid(tab, "layer-output")
        assert tab.is_disabled("#layer-next") == (step == 6)
        if step < 6:
            tab.click("#layer-next")
    assert shown[1] == ["layer-x", "layer-wQ", "layer-wK", "layer-wV", "layer-q", "layer-k", "layer-v"]
    assert shown[2] == [f"layer-{n}-{h}" for n in "QKV" for h in (0, 1)]
    assert shown[3] == [f"layer-rotated-{n}-{h}" for n in "QK" for h in (0, 1)]
    assert shown[4] == ["layer-weights-0", "layer-head-output-0", "layer-weights-1", "layer-head-output-1"]
    assert shown[5] == ["layer-merged"] and shown[6] == ["layer-wO", "layer-output"]
    # The page's output is the oracle's for the inputs it shows, to float64's last bits.
    expected = oracle.layer(
        {**inputs, "x_kv": None, "b_q": None, "b_k": None, "b_v": None, "b_o": None, "attn_mask": None},
        num_heads=2,
        rope=rope,
    ).output
    assert output.shape == (4, 5) and inputs["w_q"].shape == (8, 6)
    np.testing.assert_allclose(output, expected, rtol=1e-12, atol=1e-12)


def test_the_layer_views_heads_are_grids_named_in_words_with_one_sentence_per_move(page):
    tab = page.page
    tab.click("#layer-next")  # split heads
    for grid_id in _layer_grids(tab):
        assert tab.eval_on_selector_all(f"[id='table-{grid_id}'] td[tabindex='0']", "t => t.length") == 1
    first = tab.locator("[id='table-layer-Q-1'] td[tabindex='0']")
    assert first.get_attribute("aria-label").startswith("Q head 1 of token 0, feature 0: ")
    first.focus()
    tab.keyboard.press("ArrowDown")
    tab.keyboard.press("End")
    focused = tab.evaluate("document.activeElement.getAttribute('aria-label')")
    assert focused.startswith("Q head 1 of token 1, feature 3: "), focused
    said = tab.inner_text("#layer-said")
    assert said.startswith("Q head 1 of token 1, feature 3 is ") and said.endswith("features 4 to 7 of Q"), (
        said
    )
    assert tab.eval_on_selector_all("[id='table-layer-Q-1'] td[tabindex='0']", "t => t.length") == 1


def test_the_rope_view_turns_pairs_by_position_and_its_dot_products_depend_on_the_distance(page):
    from attention_port.golden import oracle

    tab = page.page
    dots = _grid(tab, "rope-dots")
    assert dots.shape == (8, 8)
    for distance in range(-7, 8):  # every diagonal holds one number
        diagonal = np.diagonal(dots, offset=distance)
        assert np.ptp(diagonal) < 1e-12, (distance, diagonal)
    label = tab.get_attribute("#rope-circle svg", "aria-label")
    assert label.startswith("pair 0 of the query at position 3 is ("), label
    tab.fill("#rope-query", "0")
    tab.fill("#rope-key", "0")
    tab.dispatch_event("#rope-query", "input")
    at_zero = tab.get_attribute("#rope-circle svg", "aria-label")
    text = tab.inner_text("#rope-text")
    assert "the query at position 0 by 0" in text and "query 0 · key 0 = " in text, text
    # Moving both positions by the same step changes the pair's angles but not the dot product.
    said = []
    for m, n in ((2, 0), (5, 3)):
        tab.fill("#rope-query", str(m))
        tab.fill("#rope-key", str(n))
        tab.dispatch_event("#rope-key", "input")
        said.append(tab.inner_text("#rope-said").split(" is ")[1])
        assert tab.get_attribute("#rope-circle svg", "aria-label") != at_zero
    assert said[0] == said[1], said
    positions = np.arange(8.0)
    np.testing.assert_array_equal(_grid(tab, "rope-dots"), dots)  # the sliders change no dot product
    first = tab.locator("[id='table-rope-dots'] td[tabindex='0']")
    assert first.get_attribute("aria-label").startswith(
        "query at position 0 dot key at position 0, distance 0: "
    )
    first.focus()
    tab.keyboard.press("ArrowDown")
    assert tab.inner_text("#rope-said").startswith("query at position 1 dot key at position 0 is ")
    # The dot products are those of the oracle's rotation of the query and the key the view turns.
    circle = tab.locator("#rope-circle")
    query, key = (np.array(json.loads(circle.get_attribute(f"data-{n}"))) for n in ("query", "key"))
    turned = {
        name: oracle.rotary(np.tile(vector, (8, 1)), positions).output
        for name, vector in (("q", query), ("k", key))
    }
    np.testing.assert_allclose(dots, turned["q"] @ turned["k"].T, rtol=1e-12, atol=1e-12)


# ---- the decode view ---------------------------------------------------------------------------


def _real_model_head(head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Head `head` of the real model's case, [8, 32] queries, keys and values, from the fixture."""
    fixture = json.loads((REPO_ROOT / "fixtures" / "cases" / "real_model_heads.json").read_text())
    inputs = fixture["inputs"]
    return tuple(
        np.array(inputs[n]["data"]).reshape(inputs[n]["shape"])[head] for n in ("query", "key", "value")
    )


def _decode_at(tab, step: int, new_tokens: int | None = None) -> None:
    tab.fill("#decode-step", str(step))
    tab.dispatch_event("#decode-step", "input")
    if new_tokens is not None:
        tab.select_option("#decode-new", str(new_tokens))


def _lit_rows(tab, grid_id: str) -> list[int]:
    return tab.eval_on_selector_all(
        f"[id='table-{grid_id}'] tr",
        "trs => trs.flatMap((tr, i) => tr.classList.contains('lit') ? [i - 1] : [])",
    )


def _decode_difference(tab) -> float:
    """The largest difference the decode view says between its rows and the causal pass's."""
    (said,) = re.findall(r"largest difference (\S+)\. ", tab.inner_text("#decode-text"))
    return float(said)


def _masked(tab, grid_id: str) -> np.ndarray:
    rows = tab.eval_on_selector_all(
        f"[id='table-{grid_id}'] tr",
        "trs => trs.map(tr => [...tr.querySelectorAll('td.num')].map(td => td.classList.contains('masked')))",
    )
    return np.array([row for row in rows if row])


def test_the_decode_view_generates_the_sentence_token_by_token_with_the_oracles_causal_rows(page):
    from attention_port import reference

    tab = page.page
    tokens = REAL_TOKENS
    head = int(tab.input_value("#decode-head"))
    query, key, value = _real_model_head(head)
    causal = reference.attention_steps(query, key, value, is_causal=True).weights  # [8, 8], the oracle's
    assert tab.inner_text("#decode-offset") == "0" and tab.is_disabled("#decode-prev")
    for t in range(1, 9):
        assert tab.inner_text("#decode-count").startswith(f"step {t} of 8: 1 new, queryOffset {t - 1}")
        assert tab.inner_text("#decode-offset") == str(t - 1)
        # The cache: t rows, the sentence's own keys and values, the last one this step's.
        for grid_id, rows in (("decode-key-cache", key), ("decode-value-cache", value)):
            np.testing.assert_array_equal(_grid(tab, grid_id), rows[:t])
            assert _lit_rows(tab, grid_id) == [t - 1], grid_id
        np.testing.assert_array_equal(_grid(tab, "decode-query"), query[t - 1 : t])
        # The new query's weights over every earlier key, labelled by token: row t of one causal pass.
        weights = _grid(tab, "decode-weights")
        assert weights.shape == (1, t)
        np.testing.assert_allclose(weights[0], causal[t - 1, :t], rtol=1e-12, atol=1e-15)
        headers = tab.eval_on_selector_all(
            "[id='table-decode-weights'] th[scope=col] .token", "t => t.map(x => x.textContent.trim())"
        )
        assert headers == tokens[:t], headers
        # Beside it the whole causal pass, this step's row outlined.
        np.testing.assert_allclose(_grid(tab, "decode-causal"), causal, rtol=1e-12, atol=1e-15)
        assert _lit_rows(tab, "decode-causal") == [t - 1]
        assert _decode_difference(tab) == 0
        assert tab.is_disabled("#decode-next") == (t == 8)
        if t < 8:
            tab.click("#decode-next")
    tab.click("#decode-prev")
    assert tab.inner_text("#decode-offset") == "6" and _grid(tab, "decode-key-cache").shape == (7, 32)


def test_the_decode_views_causal_boundary_moves_with_the_offset(page):
    from attention_port import reference

    tab = page.page
    tab.select_option("#decode-head", "5")
    query, key, value = _real_model_head(5)
    causal = reference.attention_steps(query, key, value, is_causal=True).weights  # [8, 8]
    t = 6
    _decode_at(tab, t)
    boundaries = {}
    for new_tokens in range(1, t + 1):
        tab.select_option("#decode-new", str(new_tokens))
        offset = int(tab.inner_text("#decode-offset"))
        assert offset == t - new_tokens
        # The oracle's decode step with this offset: which keys it hides, and its weights.
        step = reference.attention_steps(
            query[offset:t], key[:t], value[:t], is_causal=True, query_offset=offset
        )
        np.testing.assert_array_equal(_masked(tab, "decode-weights"), step.logits == -np.inf)
        weights = _grid(tab, "decode-weights")
        np.testing.assert_allclose(weights, step.weights, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(weights, causal[offset:t, :t], rtol=1e-12, atol=1e-15)
        boundaries[offset] = [
            int(b)
            for b in tab.eval_on_selector_all(
                "[id='table-decode-weights'] tr[data-boundary]", "t => t.map(x => x.dataset.boundary)"
            )
        ]
        assert boundaries[offset] == [i + offset for i in range(new_tokens)]  # j <= i + query_offset
        assert _lit_rows(tab, "decode-key-cache") == list(range(offset, t))
        assert _lit_rows(tab, "decode-causal") == list(range(offset, t))
        screenshot = os.environ.get("ATTENTION_PORT_SCREENSHOT")
        if screenshot and new_tokens == 3:  # docs/explorer-decode.png: three new tokens after three
            tab.evaluate("document.activeElement.blur()")  # no focus ring on the picture
            tab.locator("#decode-view").screenshot(
                path=str(Path(screenshot).with_name("explorer-decode.png"))
            )
    assert boundaries[5] == [5] and boundaries[0][0] == 0  # row 0's boundary moved with the offset
    # The mistake: queryOffset 0 with 3 cached tokens, torch's top-left is_causal. The boundary
    # goes back to j <= i, as the oracle's top-left rule hides, and the rows leave the causal pass.
    tab.select_option("#decode-new", "3")
    tab.check("#decode-top-left")
    assert tab.inner_text("#decode-offset") == "0" and tab.inner_text("#decode-cached") == "3"
    wrong = reference.attention_steps(query[3:t], key[:t], value[:t], is_causal=True)
    np.testing.assert_array_equal(_masked(tab, "decode-weights"), wrong.logits == -np.inf)
    np.testing.assert_allclose(_grid(tab, "decode-weights"), wrong.weights, rtol=1e-12, atol=1e-15)
    edges = tab.eval_on_selector_all(
        "[id='table-decode-weights'] tr[data-boundary]", "t => t.map(x => x.dataset.boundary)"
    )
    assert edges == ["0", "1", "2"]
    assert _decode_difference(tab) > 0.1
    assert "The mistake: queryOffset 0" in tab.inner_text("#decode-text")
    tab.uncheck("#decode-top-left")
    assert tab.inner_text("#decode-offset") == "3" and _decode_difference(tab) == 0
    # Fewer tokens so far than new ones: the count of new tokens comes down to the step's.
    _decode_at(tab, 2)
    assert tab.input_value("#decode-new") == "2" and tab.inner_text("#decode-offset") == "0"
    first = tab.locator("[id='table-decode-weights'] td[tabindex='0']")
    assert first.get_attribute("aria-label").startswith(
        "weight of query token 0, [CLS] on key token 0, [CLS]: "
    )
    first.focus()
    tab.keyboard.press("End")
    assert tab.inner_text("#decode-said") == (
        "weight of query token 0, [CLS] on key token 1, the is 0: key 1 comes after position 0, so the causal"
        " rule hides it."
    )


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
