"""The whole chain at the edges of float64: on random inputs of every size from subnormal to
1e307, with NaN and infinities written in, every mask rank, GQA and empty dims, the oracle
answers (it never raises on valid input), and every port passes against it under compare.py's
rule or the case is reported outside the contract. (flash.test.ts holds the two TypeScript ports
to each other on such inputs too, with fast-check.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import attention_inputs

from attention_port import reference, torch_port
from attention_port.golden import generate, oracle
from attention_port.golden.cases import Case
from attention_port.golden.reader import ExpectedValues, FixtureCase, load_fixtures
from attention_port.harness import compare
from attention_port.harness import runners as ports
from attention_port.harness.node import TYPESCRIPT_PORTS
from attention_port.harness.runners import PortAnswer

STEPS = ("scores", "logits", "weights", "output")


def _case(query, key, value, mask, options) -> FixtureCase:
    """The oracle's answer as a fixture case, as generate would write it."""
    truth = oracle.attention(query, key, value, mask, **options)
    expected = ExpectedValues(
        **{name: getattr(truth, name) for name in ("scores", "logits", "weights", "output")},
        error_scale=truth.error_scale,
        spread=truth.spread,
        score_bound=truth.score_bound,
        budgets=truth.budgets,
    )
    inputs = {"query": query, "key": key, "value": value, "attn_mask": mask}
    return FixtureCase("drawn", "a drawn case", (), Path("drawn"), inputs, options, expected, None)


def _numpy(*args, **options):
    steps = reference.attention_steps(*args, **options)
    return {name: getattr(steps, name) for name in STEPS}


def _torch(dtype):
    def run(*args, **options):
        steps = torch_port.attention_steps(*args, **options, device="cpu", dtype=dtype)
        return {name: getattr(steps, name).to(dtype=torch_port.torch.float64).numpy() for name in STEPS}

    return run


PORTS = [
    ("numpy", "float64", _numpy),
    ("torch-cpu-float64", "float64", _torch(torch_port.torch.float64)),
    ("torch-cpu-float32", "float32", _torch(torch_port.torch.float32)),
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=attention_inputs(extreme=True))
def test_every_port_passes_or_the_case_is_outside_the_contract(inputs):
    query, key, value, mask, options = inputs
    case = _case(query, key, value, mask, options)  # the oracle never raises on valid input
    for name, dtype, run in PORTS:
        with np.errstate(all="ignore"):
            answer = PortAnswer(steps=run(query, key, value, mask, **options))
        verdict = compare.judge(case, name, dtype, answer)
        assert verdict.passed or verdict.outside, compare.format_verdict(verdict)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=st.lists(attention_inputs(extreme=True), min_size=25, max_size=25))
def test_the_typescript_ports_pass_or_the_case_is_outside_the_contract(tmp_path_factory, drawn):
    """The same, for the TypeScript ports: the draws written as a fixture folder (through the
    oracle, as `generate` writes any case), then each port run on it in one Node process."""
    table = [
        Case(id=f"drawn_{n}", seed=n, tags=("extreme",), description="a drawn case",
             query=query, key=key, value=value, attn_mask=mask, **options)
        for n, (query, key, value, mask, options) in enumerate(drawn)
    ]  # fmt: skip
    folder = tmp_path_factory.mktemp("drawn") / "fixtures"
    generate.write_fixtures(folder, table)
    cases = load_fixtures(folder)
    for name in TYPESCRIPT_PORTS:
        port = ports.typescript_port(folder, name)  # float64, or float32 for simd.ts's float32 port
        for verdict in ports.judged(port, port.run(cases), {case.id: case for case in cases}):
            assert verdict.passed or verdict.outside, compare.format_verdict(verdict)
