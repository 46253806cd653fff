"""The attention explorer in a real browser: Debian's Chromium, driven by playwright.

Playwright never downloads a browser here: it drives the Chromium found on the machine (apt's
`chromium`, or $CHROMIUM). Without one, or without the playwright package, these tests skip with a
reason (scripts/test says so in one line). One browser for the module; the page is built once.

ATTENTION_PORT_SCREENSHOT=docs/explorer.png also writes the README's screenshot of the built page.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from attention_port.explore import explorer_command
from attention_port.node import find_node
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
        self.page.on("console", lambda m: m.type in ("error", "warning") and self.problems.append(m.text))
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        self.page.goto(url)
        self.page.wait_for_selector("#table-output td.num")

    def values(self, step: str) -> list[list[float]]:
        """The step's heatmap for the viewed head, full precision (each cell's data-value)."""
        rows = self.page.eval_on_selector_all(
            f"#table-{step} tr",
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
    assert "× scale 0.5 = 0.5" in text and "÷ row sum" in text
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
    assert {c: v for c, v in verdicts.items() if c not in valid and "AttentionInputError" not in v} == {}


def test_an_invalid_fixture_case_shows_the_error_it_must_raise(page):
    page.page.select_option("#preset", "case:error_ragged_key_depth")
    expected = "key is ragged: key[1][1] is an array, expected a scalar"
    assert expected in page.page.inner_text("#case-description")
    assert expected in page.page.inner_text("#error-key")


def test_a_bad_option_shows_the_ports_error(page):
    page.page.fill("#softcap", "-1")
    assert "softcap" in page.page.inner_text("#error-options")
    page.page.select_option("#scale-mode", "custom")
    page.page.fill("#scale-custom", "abc")
    assert "AttentionInputError (value): scale must be a finite number" in page.page.inner_text(
        "#error-options"
    )


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


def test_sqrt_dk_panel_unscaled_max_weight_rises_towards_one(page):
    points = page.page.eval_on_selector_all(
        'svg[data-metric="maxWeight"] circle[data-series="unscaled"]',
        "cs => cs.map(c => [Number(c.dataset.dk), Number(c.dataset.value)])",
    )
    curve = dict(points)
    assert sorted(curve) == [2**n for n in range(11)]
    assert curve[1] < 0.5 < curve[64] and curve[1024] > 0.9
    assert curve[1] < curve[16] < curve[256] < curve[1024]
    scaled = page.page.eval_on_selector_all(
        'svg[data-metric="maxWeight"] circle[data-series="scaled"]',
        "cs => cs.map(c => Number(c.dataset.value))",
    )
    assert max(scaled) < 0.3
    page.page.focus("#dk")
    page.page.keyboard.press("End")  # the slider by keyboard, to d_k = 1024
    assert page.page.inner_text("#dk-value") == "1024"
    row = page.page.eval_on_selector_all("#sqrt-dk-values tr", "t => t[2].innerText")
    assert float(row.split()[-1]) > 0.9


def test_recompute_time_at_64(page, capsys):
    for field in ("lq", "lk", "e", "ev"):
        page.page.fill(f"#random-{field}", "64")
    page.page.click("#random-draw")
    compute, total, layout = [], [], []
    for _ in range(6):
        # One click recomputes everything; then the page is laid out (offsetHeight forces it).
        timing = page.page.evaluate(
            """() => { const t0 = performance.now(); document.getElementById('causal').click();
                       const t1 = performance.now(); document.body.offsetHeight;
                       return [t1 - t0, performance.now() - t1]; }"""
        )
        status = page.page.locator("#status")
        compute.append(float(status.get_attribute("data-compute-ms")))
        total.append(timing[0])
        layout.append(timing[1])
    assert len(page.values("weights")) == 64
    with capsys.disabled():
        print(
            f"\nexplorer recompute at Lq = Lk = E = Ev = 64 in Chromium (median of 6): attention.ts"
            f" {statistics.median(compute):.1f} ms; with heatmaps built {statistics.median(total):.1f} ms;"
            f" then layout {statistics.median(layout):.1f} ms"
        )


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
        page.page.select_option("#preset", "tutorial")
        page.page.hover('#table-weights td[data-i="0"][data-j="2"]')
        page.page.screenshot(path=screenshot, full_page=True)


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


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
