"""The explorer's window and sink view in Debian's Chromium (the page and its fixtures as in
test_explorer_browser.py): the band, the sinks and a ragged batch's hidden keys against the oracle,
the off-by-one toggle, the keyboard, and a 400 px screen."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

# The page's fixtures (browser, built_page, page) are test_explorer_browser.py's, imported by name.
from test_explorer_browser import TUTORIAL, _grid, _masked, browser, built_page, page  # noqa: F401

from attention_port import reference
from attention_port.harness.node import find_node
from attention_port.paths import REPO_ROOT

pytestmark = pytest.mark.browser
# ruff: noqa: F811 (the tests take the imported fixtures as arguments)


@pytest.fixture(scope="module")
def example() -> dict[str, np.ndarray]:
    """The view's seeded inputs as window-model.ts draws them (the expected numbers are the oracle's)."""
    module = (REPO_ROOT / "typescript" / "explorer" / "window-model.ts").as_uri()
    script = (
        f"import {{ windowInputs }} from {json.dumps(module)}; console.log(JSON.stringify(windowInputs()));"
    )
    run = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    return {name: np.array(x, dtype=np.float64) for name, x in json.loads(run.stdout).items()}


def _oracle(example, offset=6, keys=3, sinks=1, sink_logit=0.0, seqlen=7, left=None):
    """The oracle's steps for the view's settings: window (w - 1, 0) unless `left` says otherwise."""
    return reference.attention_steps(
        example["query"], example["key"], example["value"],
        is_causal=True, query_offset=offset, window=(keys - 1 if left is None else left, 0),
        sink_tokens=sinks, sink_logits=None if sink_logit is None else [sink_logit], kv_seqlen=[10, seqlen],
    )  # fmt: skip


def _set(tab, control: str, value) -> None:
    """Sets a control and waits for the view to redraw with it (its data-drawn counts the draws)."""
    before = tab.get_attribute("#window-view", "data-drawn")
    if control in ("window-mistake", "window-example"):
        tab.select_option(f"#{control}", value)
    else:
        tab.fill(f"#{control}", str(value))
        tab.dispatch_event(f"#{control}", "input")
    tab.wait_for_function(
        "before => document.getElementById('window-view').dataset.drawn !== before", arg=before
    )


def _changed(tab, grid_id: str) -> np.ndarray:
    rows = tab.eval_on_selector_all(
        f"[id='table-{grid_id}'] tr",
        "trs => trs.map(tr => [...tr.querySelectorAll('td.num')]"
        ".map(td => td.classList.contains('changed')))",
    )
    return np.array([row for row in rows if row])


def _check_against(tab, steps) -> None:
    """Each sequence's weights, hidden keys, sink share and output as the oracle's."""
    close = {"rtol": 1e-12, "atol": 1e-15}
    for b in range(2):
        hidden = steps.logits[b, 0] == -np.inf
        np.testing.assert_array_equal(_masked(tab, f"window-weights-{b}"), hidden)
        np.testing.assert_allclose(_grid(tab, f"window-weights-{b}"), steps.weights[b, 0], **close)
        share = 1 - steps.weights[b, 0].sum(axis=-1)
        np.testing.assert_allclose(_grid(tab, f"window-sink-{b}")[:, 0], share, **close)
        np.testing.assert_allclose(_grid(tab, f"window-output-{b}"), steps.output[b, 0], **close)


def test_the_window_view_renders_the_oracles_band_sinks_and_sink_share(page, example):
    tab = page.page
    tab.wait_for_selector("[id='table-window-weights-1'] td.num")
    steps = _oracle(example)
    _check_against(tab, steps)
    # Row 0 at position 6 with a window of 3 keys sees keys 4, 5, 6 and the sink key 0.
    assert [j for j in range(10) if not _masked(tab, "window-weights-0")[0, j]] == [0, 4, 5, 6]
    assert "window [2, 0]" in tab.inner_text("#window-text")
    assert (_grid(tab, "window-sink-0") > 0).all()  # the sink logit takes a share of every row
    # Without a sink logit every row's weights sum to 1 and the sink's share is 0.
    before = tab.get_attribute("#window-view", "data-drawn")
    tab.uncheck("#window-sink-on")
    tab.wait_for_function("b => document.getElementById('window-view').dataset.drawn !== b", arg=before)
    _check_against(tab, _oracle(example, sink_logit=None))
    np.testing.assert_array_equal(_grid(tab, "window-sink-0"), 0)


def test_the_band_moves_with_the_query_offset(page, example):
    tab = page.page
    tab.wait_for_selector("[id='table-window-weights-0'] td.num")
    _set(tab, "window-sinks", 0)
    starts = []
    for offset in range(7):
        _set(tab, "window-offset", offset)
        steps = _oracle(example, offset=offset, sinks=0)
        _check_against(tab, steps)
        row0 = _masked(tab, "window-weights-0")[0]
        starts.append(int(np.argmin(row0)))  # the first key row 0 sees
        assert (~row0).sum() == min(3, offset + 1)
        headers = tab.eval_on_selector_all(
            "[id='table-window-weights-0'] th[scope=row]",
            "t => t.map(x => x.textContent.replace(/\\D/g, ''))",
        )
        assert headers == [str(offset + i) for i in range(4)]  # rows named by their positions
    assert starts == [0, 0, 0, 1, 2, 3, 4]


@pytest.mark.parametrize(("mistake", "wrong"), [("too-wide", {"left": 3}), ("top-left", {"offset": 0})])
def test_the_off_by_one_toggle_outlines_exactly_the_cells_it_changes(page, example, mistake, wrong):
    tab = page.page
    tab.wait_for_selector("[id='table-window-weights-0'] td.num")
    right = _oracle(example)
    mistaken = _oracle(example, **wrong)
    assert not tab.query_selector("[id='table-window-weights-0'] td.changed")
    _set(tab, "window-mistake", mistake)
    tab.wait_for_selector("[id='table-window-mistaken-weights-1'] td.num")
    difference = 0.0
    for b in range(2):
        expected = (right.logits[b, 0] == -np.inf) != (mistaken.logits[b, 0] == -np.inf)
        assert expected.any() or b == 1
        np.testing.assert_array_equal(_changed(tab, f"window-weights-{b}"), expected)
        np.testing.assert_array_equal(_changed(tab, f"window-mistaken-weights-{b}"), expected)
        np.testing.assert_array_equal(
            _masked(tab, f"window-mistaken-weights-{b}"), mistaken.logits[b, 0] == -np.inf
        )
        np.testing.assert_allclose(
            _grid(tab, f"window-mistaken-output-{b}"), mistaken.output[b, 0], rtol=1e-12, atol=1e-15
        )
        difference = max(difference, float(np.abs(mistaken.output[b, 0] - right.output[b, 0]).max()))
    (said,) = re.findall(r"moves the output by up to (\S+)\.", tab.inner_text("#window-text"))
    full = float(tab.get_attribute("#window-text", "data-difference"))
    assert full == pytest.approx(difference, rel=1e-12, abs=1e-15) and difference > 0
    assert float(said) == pytest.approx(difference, rel=0.01)  # the text rounds it
    count = int(re.findall(r"It sees (\d+) cell", tab.inner_text("#window-text"))[0])
    assert count == sum(
        int(((right.logits[b, 0] == -np.inf) != (mistaken.logits[b, 0] == -np.inf)).sum()) for b in range(2)
    )
    _set(tab, "window-mistake", "none")
    assert not tab.query_selector("td.changed")
    assert not tab.query_selector("[id='table-window-mistaken-weights-0']")


def test_a_ragged_rows_padding_keys_are_hidden(page, example):
    tab = page.page
    tab.wait_for_selector("[id='table-window-weights-1'] td.num")
    _set(tab, "window-keys", 10)  # no window: only causality and kvSeqlen hide keys
    _set(tab, "window-seqlen", 3)
    _check_against(tab, _oracle(example, keys=10, seqlen=3))
    assert _masked(tab, "window-weights-1")[:, 3:].all() and not _masked(tab, "window-weights-1")[:, :3].any()
    # Sequence 0 holds all 10 keys: only the causal rule hides any (rows at positions 6..9).
    np.testing.assert_array_equal(_masked(tab, "window-weights-0"), np.arange(10) > 6 + np.arange(4)[:, None])
    cell = tab.locator("[id='table-window-weights-1'] td[data-i='0'][data-j='5']")
    cell.hover()
    assert tab.inner_text("#window-said") == (
        "weight of sequence 1, query 0 at position 6, on key 5 is 0: sequence 1 holds 3 keys (kvSeqlen),"
        " so key 5 is padding."
    )
    # kvSeqlen 0: every key hidden, all the weight on the sink, and the output exactly +0.0.
    _set(tab, "window-seqlen", 0)
    _check_against(tab, _oracle(example, keys=10, seqlen=0))
    np.testing.assert_array_equal(_grid(tab, "window-sink-1"), 1)
    output = _grid(tab, "window-output-1")
    assert (output == 0).all() and not np.signbit(output).any()


def test_the_window_views_cells_are_named_and_the_keyboard_moves_inside(page):
    tab = page.page
    first = tab.locator("[id='table-window-weights-0'] td[tabindex='0']")
    label = first.get_attribute("aria-label")
    assert label.startswith("weight of sequence 0, query 0 at position 6, on key 0: ")
    first.focus()
    tab.keyboard.press("ArrowRight")
    assert tab.inner_text("#window-said") == (
        "weight of sequence 0, query 0 at position 6, on key 1 is 0: key 1 is before the window's first key 4"
        " (window [2, 0]) and is no sink."
    )
    tab.keyboard.press("End")
    assert tab.inner_text("#window-said").endswith("so the causal rule hides it.")


def test_at_400_px_the_page_is_no_wider_than_the_screen(browser, built_page):  # noqa: F811
    context = browser.new_context(viewport={"width": 400, "height": 800})
    try:
        tab = context.new_page()
        tab.goto(built_page.as_uri())
        tab.wait_for_selector("[id='table-window-weights-1'] td.num")
        tab.select_option("#window-mistake", "too-wide")
        tab.wait_for_selector("[id='table-window-mistaken-weights-1'] td.num")
        width = tab.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 400, f"the page is {width} px wide at 400 px"
        right = tab.eval_on_selector("#window-view", "e => e.getBoundingClientRect().right")
        assert right <= 400
    finally:
        context.close()


def test_the_loaded_preset_shows_its_viewed_head_where_it_fits(page):
    tab = page.page
    tab.wait_for_selector("[id='table-window-weights-1'] td.num")
    _set(tab, "window-mistake", "too-wide")
    _set(tab, "window-example", "preset")
    # The tutorial example: 3 rows over 3 keys, one sequence (no kvSeqlen slider), offsets up to 0.
    assert (
        tab.get_attribute("#window-offset", "max") == "0" and tab.get_attribute("#window-keys", "max") == "3"
    )
    assert tab.is_hidden("#window-seqlen") and not tab.query_selector("[id='table-window-weights-1']")
    query, key, value = (np.array(TUTORIAL[name], dtype=np.float64) for name in ("query", "key", "value"))
    keys, sinks = int(tab.input_value("#window-keys")), int(tab.input_value("#window-sinks"))
    options = {"is_causal": True, "sink_tokens": sinks, "sink_logits": [0.0]}
    right = reference.attention_steps(query, key, value, window=(keys - 1, 0), **options)
    wrong = reference.attention_steps(query, key, value, window=(keys, 0), **options)
    np.testing.assert_array_equal(_masked(tab, "window-weights-0"), right.logits == -np.inf)
    np.testing.assert_allclose(_grid(tab, "window-weights-0"), right.weights, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(_grid(tab, "window-output-0"), right.output, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(
        _changed(tab, "window-weights-0"), (right.logits == -np.inf) != (wrong.logits == -np.inf)
    )
    # Inputs too large for the view: it says so and shows the ragged batch.
    tab.fill("#random-lk", "20")
    tab.click("#random-draw")
    tab.wait_for_function("() => document.getElementById('window-preset-note').textContent !== ''")
    assert "do not fit here" in tab.inner_text("#window-preset-note")
    tab.wait_for_selector("[id='table-window-weights-1'] td.num")
