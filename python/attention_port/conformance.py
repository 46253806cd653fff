"""The conformance kit: the project's fixtures and its tolerance rule for anyone's attention function.

    from attention_port.conformance import run_cases

    for verdict in run_cases(my_attention, dtype="float32"):
        assert verdict.verdict != "fail", f"{verdict.case_id}: {verdict.problem}"

load_cases gives the cases (all, or by level or tag), judge holds one answer to one case, and
run_cases calls a function the way the ports are called, fn(query, key, value, attn_mask,
is_causal=..., scale=..., enable_gqa=..., softcap=..., ...) with the options the case holds, on
every case and judges each answer.
parametrize_cases is a pytest decorator with one test id per case. The verdict is compare.py's:
"pass", "fail", or "outside" where the contract defines no answer in that dtype (its scores
overflow, or its inputs do not fit). The TypeScript twin is `attention-port/conformance` (loadCases,
judge, runCases), which a test holds to the same rule.

Needs numpy only: the fixtures ship inside the package (attention_port/data/fixtures) and are read
without the JSON Schema (each file is checked against the manifest's sha256; the project's tests
hold the folder to the schema).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attention_port.contract import CORE_OPTIONS
from attention_port.fixtures.cases import CORE_LEVELS, level_of
from attention_port.fixtures.reader import FixtureCase, load_fixtures
from attention_port.harness import compare
from attention_port.harness.compare import UNIT_ROUNDOFF, PortAnswer, StepCheck
from attention_port.paths import FIXTURES

DTYPES = tuple(UNIT_ROUNDOFF)  # float64, float32, float16, bfloat16
# The options a case's fixture holds among its params (contract/options.json): some in every case,
# query_offset only where a decode case sets it. attn_mask is one of the inputs.
OPTION_NAMES = tuple(option.python for option in CORE_OPTIONS.values() if option.in_params)


@dataclass(frozen=True)
class TestCase:
    """One case of the kit. `inputs` (query, key, value, attn_mask) are numpy arrays for a valid
    case (attn_mask None, bool or float64) and exactly as written for an invalid one (nested lists,
    maybe ragged, maybe strings); `options` are the keyword arguments the ports take."""

    __test__ = False  # a dataclass named Test*, not a pytest test class

    id: str
    level: int  # `attention-port check`'s level (contract/levels.json), 1 the tutorial's
    tags: tuple[str, ...]
    description: str
    inputs: dict[str, Any]
    options: dict[str, Any]
    expected_output: np.ndarray | None  # the oracle's output, float64; None for an invalid case
    expected_error: str | None  # the error kind an invalid case expects (ERROR_KINDS); else None
    fixture: FixtureCase = field(repr=False)  # what the judge reads


@dataclass(frozen=True)
class Worst:
    """The cell where an answer used most of its budget."""

    cell: tuple[int, ...]
    expected: float
    actual: float


@dataclass(frozen=True)
class Verdict:
    """The judge's word on one answer to one case."""

    case_id: str
    verdict: str  # "pass", "fail" or "outside"
    dtype: str
    budget_used: float | None = None  # largest share of the output's budget used, 1.0 = all of it
    worst: Worst | None = None
    problem: str | None = None  # why it failed (or is outside), in one line
    first_divergent_step: str | None = None  # scores, logits or weights, when the output failed
    steps: list[StepCheck] = field(default_factory=list)


def _test_case(fixture: FixtureCase) -> TestCase:
    inputs = dict(fixture.inputs)
    expected = fixture.expected
    return TestCase(
        id=fixture.id,
        level=level_of(fixture.tags),
        tags=fixture.tags,
        description=fixture.description,
        inputs=inputs,
        options={name: fixture.params[name] for name in OPTION_NAMES if name in fixture.params},
        expected_output=None if expected is None else expected.output,
        expected_error=None if fixture.expected_error is None else fixture.expected_error[0],
        fixture=fixture,
    )


def load_cases(
    levels: Iterable[int] | None = None,
    tags: Iterable[str] | None = None,
    *,
    folder: Path | str | None = None,
) -> list[TestCase]:
    """Every case (or those of the `levels` asked for, among the attention core's, and that carry at
    least one of `tags`), in the fixtures' order. `folder` reads another fixture folder (default: the
    package's)."""
    levels = None if levels is None else set(levels)
    tags = None if tags is None else set(tags)
    for level in levels or ():
        if not isinstance(level, int) or not 1 <= level <= len(CORE_LEVELS):
            raise ValueError(f"levels: {level!r} is not a level (1 to {len(CORE_LEVELS)})")
    fixtures = load_fixtures(FIXTURES if folder is None else folder, schema=folder is not None)
    return [
        case
        for case in map(_test_case, fixtures)
        if (levels is None or case.level in levels) and (tags is None or tags & set(case.tags))
    ]


def _as_expected_shape(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Nested lists stop at a zero-size dim ([2, 0, 4] comes back [[], []]): such an answer has the
    expected shape as far as nesting can say it."""
    if actual.shape != expected.shape and 0 in expected.shape:
        cut = expected.shape[: expected.shape.index(0) + 1]
        if actual.shape == cut:
            return np.zeros(expected.shape)
    return actual


def _steps(case: TestCase, actual: object) -> dict[str, np.ndarray] | str:
    """The answer as float64 arrays per step, or why it is not a tensor: a dict of steps, an object
    with them as attributes (reference.attention_steps gives one), or the output alone."""
    if not isinstance(actual, dict):
        given = {step: getattr(actual, step) for step in compare.STEPS if hasattr(actual, step)}
        actual = given if "output" in given and not isinstance(actual, np.ndarray) else {"output": actual}
    given = actual
    steps = {}
    for step in compare.STEPS:
        if step not in given:
            continue
        try:
            array = np.asarray(given[step], dtype=np.float64)
        except (TypeError, ValueError) as error:
            return f"{step} is not a tensor of numbers ({error})"
        steps[step] = _as_expected_shape(array, getattr(case.fixture.expected, step))
    return steps


def judge(case: TestCase, actual: object, *, dtype: str = "float64", match_kind: bool = False) -> Verdict:
    """One answer to one case, held to the rule. `actual` is what the function returned (the
    output, or its steps: scores, logits, weights, output, as a dict or attributes), or the
    exception it raised.
    On an invalid case any raised exception passes, as in `attention-port check`; match_kind=True
    demands its `kind` be the case's (the project's ports raise AttentionInputError with a kind)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    if isinstance(actual, BaseException):
        kind = getattr(actual, "kind", None)
        thrown = f"{type(actual).__name__}{'' if kind is None else f' ({kind})'}: {actual}"
        if case.expected_error is None:
            return Verdict(case.id, "fail", dtype, problem=f"raised {thrown}")
        if match_kind and kind != case.expected_error:
            return Verdict(
                case.id, "fail", dtype, problem=f"raised {thrown}; expected kind {case.expected_error!r}"
            )
        return Verdict(case.id, "pass", dtype)
    if case.expected_error is not None:
        message = case.fixture.expected_error[1]
        problem = f"returned an answer, expected an error of kind {case.expected_error!r} ({message})"
        return Verdict(case.id, "fail", dtype, problem=problem)
    outside = compare.outside_contract(case.fixture, dtype)
    if outside is not None:
        return Verdict(case.id, "outside", dtype, problem=outside)
    steps = _steps(case, actual)
    if isinstance(steps, str):
        return Verdict(case.id, "fail", dtype, problem=steps)
    verdict = compare.judge(case.fixture, "yours", dtype, PortAnswer(steps=steps))
    worst = None
    if verdict.index is not None and verdict.actual is not None:
        worst = Worst(verdict.index, verdict.expected, verdict.actual)
    problem = verdict.problem
    if not verdict.passed and problem is None and worst is not None:
        got, want = compare.distinct_digits(worst.actual, worst.expected)
        used = compare.format_budget(verdict.budget_used)
        problem = (
            f"{compare.cell('output', worst.cell)} is {got}, expected {want} ({used} of the {dtype} budget)"
        )
    if verdict.first_divergent_step is not None:
        problem = f"{problem}; first step that differs: {verdict.first_divergent_step}"
    return Verdict(
        case.id,
        "pass" if verdict.passed else "fail",
        dtype,
        budget_used=verdict.budget_used,
        worst=worst,
        problem=problem,
        first_divergent_step=verdict.first_divergent_step,
        steps=verdict.steps,
    )


def call(fn: Callable[..., object], case: TestCase) -> object:
    """fn called the way the ports are, on one case: its answer, or the exception it raised."""
    inputs = case.inputs
    try:
        return fn(inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **case.options)
    except Exception as error:  # the answer to judge, not a failure of the kit
        return error


def run_cases(
    fn: Callable[..., object],
    *,
    dtype: str = "float64",
    levels: Iterable[int] | None = None,
    tags: Iterable[str] | None = None,
    match_kind: bool = False,
) -> Iterator[Verdict]:
    """Calls `fn` on every case asked for, in order, and yields the verdict on each."""
    for case in load_cases(levels, tags):
        yield judge(case, call(fn, case), dtype=dtype, match_kind=match_kind)


def parametrize_cases(levels: Iterable[int] | None = None, tags: Iterable[str] | None = None):
    """A pytest decorator: the test takes `case`, and runs once per case, with the case's id as
    its test id (pytest -k causal runs the causal ones)."""
    import pytest  # only here: the kit itself needs numpy alone

    cases = load_cases(levels, tags)
    return pytest.mark.parametrize("case", cases, ids=[case.id for case in cases])
