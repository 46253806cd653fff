"""Your attention function against every fixture case, one pytest test per case:

    pytest python/examples/test_conformance.py

Put your function in place of the project's numpy port, and the dtype it computes in.
"""

import pytest

from attention_port import conformance
from attention_port.reference import scaled_dot_product_attention as my_attention


@conformance.parametrize_cases()
def test_my_attention(case):
    verdict = conformance.judge(case, conformance.call(my_attention, case), dtype="float64")
    if verdict.verdict == "outside":
        pytest.skip(verdict.problem)  # the contract defines no answer in this dtype
    assert verdict.verdict != "fail", f"{verdict.problem}\n{case.description}"
