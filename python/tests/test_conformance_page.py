"""docs/conformance.md's generator on a fake peer: each failure under its most specific rule, the
conventions said as such, the cases no rule names still counted. (The real peers are heavy and
stay out of the tests: scripts/conformance runs them.)"""

from __future__ import annotations

import json

from conftest import ALL_CASES, FIXTURES_DIR

from attention_port import cli
from attention_port.pages import conformance

CASES = ALL_CASES
FAILING = {
    "fully_masked_row_bool": "output[2, 0] is NaN where 0 was expected",
    "scale_zero": "threw Error: attention.cc:233 scale_ > 0 was false. scale must be greater than 0",
    "empty_heads": "the process died (SIGFPE)",
}
OUTSIDE = {"large_scale"}
# A peer with no sink tokens: every case that sets sink_tokens is not expressible for it.
SINK_TOKENS = {c.id for c in CASES if not c.expects_error and c.params.get("sink_tokens")}
NO_SINK_TOKENS = "sink_tokens: no parameter keeps the first keys visible"


def _results() -> dict:
    def verdict(case_id: str) -> str:
        if case_id in SINK_TOKENS:
            return "not expressible"
        return "fail" if case_id in FAILING else "outside" if case_id in OUTSIDE else "pass"

    verdicts = [
        {
            "caseId": c.id,
            "verdict": verdict(c.id),
            "problem": NO_SINK_TOKENS if c.id in SINK_TOKENS else FAILING.get(c.id),
            "budgetUsed": None,
        }
        for c in CASES
        if not c.expects_error
    ]
    peer = {"name": "fake", "version": "1.0", "dtype": "float32", "about": "a fake", "seconds": 1.5}
    return {"node": "24", "peers": [{**peer, "verdicts": verdicts}]}


def _row(page: str, start: str) -> str:
    return next(line for line in page.splitlines() if line.startswith(f"| {start}"))


def test_each_failure_is_counted_under_its_most_specific_rule():
    page = conformance.conformance_page(_results(), CASES)
    valid = sum(not c.expects_error for c in CASES)
    n = len(SINK_TOKENS)
    assert n >= 3  # the fixtures' sink-token cases
    assert _row(page, "fake |") == f"| fake | 1.0 | float32 | a fake | {valid - 4 - n} | 3 | 1 | {n} | 1.5 |"
    fully_masked = _row(page, "a row whose logits are all -inf")
    assert fully_masked.endswith("| breaks (1): `fully_masked_row_bool` |"), fully_masked
    # Step 1 carries the tags of the fully-masked case too, but is not the rule it says most about.
    assert _row(page, "Step 1: scores").endswith("| keeps |")
    assert _row(page, "a scale given is used as it is").endswith("| breaks (1): `scale_zero` |")
    assert _row(page, "any other case").endswith("| breaks (1): `empty_heads` |")
    assert _row(page, "softcap > 0").endswith("| keeps |")


def test_the_details_say_what_the_peer_gave_and_which_rules_are_conventions():
    page = conformance.conformance_page(_results(), CASES)
    details = page.split("## fake (float32): the rules it breaks", 1)[1]
    line = next(x for x in details.splitlines() if "`fully_masked_row_bool`" in x)
    assert "output[2, 0] is NaN where 0 was expected" in line
    assert "*A convention, ours and torch's: plain softmax of an all -inf row is 0/0, NaN.*" in line
    scale = next(x for x in details.splitlines() if "`scale_zero`" in x)
    assert "threw: scale must be greater than 0" in scale and "attention.cc" not in scale
    assert "`empty_heads`: the process died (SIGFPE)" in details


def test_the_command_writes_the_page(tmp_path):
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_results()), encoding="utf-8")
    out = tmp_path / "conformance.md"
    code = cli.main(
        ["conformance-page", "--results", str(results), "--out", str(out), "--fixtures", str(FIXTURES_DIR)]
    )
    assert code == 0
    assert out.read_text(encoding="utf-8") == conformance.conformance_page(_results(), CASES)


def test_a_case_a_peer_cannot_express_counts_neither_way_and_says_why():
    page = conformance.conformance_page(_results(), CASES)
    sinks = {c.id for c in CASES if not c.expects_error and "sinks" in c.tags}
    windows = {c.id for c in CASES if not c.expects_error and "window" in c.tags}
    row = _row(page, "attention sinks (`sinks`)")
    counts = f"{len(sinks - SINK_TOKENS)} / 0 / {len(SINK_TOKENS)}"
    assert row == f"| attention sinks (`sinks`) | {len(sinks)} | {counts} |"
    row = _row(page, "sliding windows (`window`)")
    expressible = windows - SINK_TOKENS
    counts = f"{len(expressible)} / 0 / {len(windows & SINK_TOKENS)}"
    assert row == f"| sliding windows (`window`) | {len(windows)} | {counts} |"
    reason = next(x for x in page.splitlines() if NO_SINK_TOKENS in x)
    assert reason.startswith(f"- fake (float32), {len(SINK_TOKENS)} cases (")
    # no rule breaks for it: the rules whose cases are all inexpressible say so
    assert "breaks" not in "".join(x for x in page.splitlines() if "sink" in x.lower() and x.startswith("| "))
    assert "| GroupQueryAttention" not in page and "`local_window_size`" in page  # the conventions table
