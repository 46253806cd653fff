"""The TypeScript tests' copy of the tolerance rule (typescript/test/helpers.ts) is held to
compare.py on every fixture: the same answers, right and wrong in every way the rule knows, must
get the same verdicts from both."""

from __future__ import annotations

import json
import subprocess

import numpy as np
from conftest import VALID_CASES

from attention_port import compare, generate
from attention_port.node import REPO_ROOT, find_node


def _answers(case) -> list[np.ndarray]:
    """The oracle's output, and versions of it nudged to just inside and just beyond the budget,
    made NaN, infinite, or -0.0, one element at a time."""
    expected = case.expected.output
    if expected.size == 0:
        return [expected]
    budget = compare.output_budget(case.expected, "float64")
    answers = [expected]
    finite = np.isfinite(expected) & np.isfinite(budget)
    for share in (0.5, 0.99, 1.01, 3.0):
        answers.append(np.where(finite, expected + share * budget, expected))
    for flat in {0, expected.size // 2, expected.size - 1}:
        index = np.unravel_index(flat, expected.shape)
        for replacement in (np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, 1e308):
            changed = expected.copy()
            changed[index] = replacement
            answers.append(changed)
    return answers


def test_the_typescript_twin_gives_compare_pys_verdict_on_every_fixture(tmp_path):
    cases = [case for case in VALID_CASES if compare.outside_contract(case, "float64") is None]
    answers = {case.id: _answers(case) for case in cases}
    request = tmp_path / "answers.json"
    document = {i: [generate.encode_numbers(a.ravel()) for a in given] for i, given in answers.items()}
    request.write_text(json.dumps(document), encoding="utf-8")
    run = subprocess.run(
        [str(find_node()), "typescript/test/rule-twin.ts", str(request)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    twin = json.loads(run.stdout)
    disagreements = []
    checked = 0
    for case in cases:
        for number, answer in enumerate(answers[case.id]):
            verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps={"output": answer}))
            checked += 1
            if verdict.passed != twin[case.id][number]:
                disagreements.append((case.id, number, verdict.passed, verdict.problem))
    assert not disagreements, disagreements[:5]
    assert checked > 1000
