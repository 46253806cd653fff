"""Every fixture through the numpy and torch ports, held to the tolerance rule of compare.py."""

from __future__ import annotations

import pytest
from conftest import ALL_CASES, INVALID_CASES, VALID_CASES, case_params

from attention_port.harness import compare
from attention_port.harness import runners as ports

NUMPY = ports.numpy_port()
TORCH_PORTS = [ports.torch_port("cpu", "float64"), ports.torch_port("cpu", "float32")]


def _verdict(port, case):
    answer = port.run([case]).answers[case.id]
    return compare.judge(case, port.name, port.dtype, answer)


@pytest.mark.parametrize("case", case_params(VALID_CASES))
@pytest.mark.parametrize("port", [NUMPY, *TORCH_PORTS], ids=lambda p: p.name)
def test_valid_case_within_budget(port, case):
    verdict = _verdict(port, case)
    assert not compare.failed(verdict), compare.format_verdict(verdict)  # a pass, or outside the contract


@pytest.mark.parametrize("case", case_params(INVALID_CASES))
@pytest.mark.parametrize("port", [NUMPY, TORCH_PORTS[0]], ids=lambda p: p.name)
def test_invalid_case_raises_its_kind_and_message(port, case):
    answer = port.run([case]).answers[case.id]
    assert answer.error == case.expected_error, answer


def test_numpy_float64_uses_a_small_share_of_its_budget():
    # float64 numpy should sit far inside the budget; a port near 100% would hide real trouble.
    verdicts = [_verdict(NUMPY, case) for case in VALID_CASES]
    assert max(v.budget_used for v in verdicts if v.outside is None) < 0.25


def test_torch_sdpa_matches_the_truth_where_semantics_are_shared():
    port = ports.torch_sdpa_port("cpu", "float64")
    answers = port.run(ALL_CASES).answers
    assert len(answers) >= 20, "too few cases share torch's semantics to say anything"
    by_id = {case.id: case for case in ALL_CASES}
    failures = [
        compare.format_verdict(v)
        for v in (compare.judge(by_id[i], port.name, port.dtype, a) for i, a in answers.items())
        if not v.passed
    ]
    assert not failures, "\n".join(failures)
