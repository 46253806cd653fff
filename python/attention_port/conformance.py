"""The conformance kit: the project's fixtures and its tolerance rule for anyone's attention function.

    from attention_port.conformance import run_cases

    for verdict in run_cases(my_attention, dtype="float32"):
        assert verdict.verdict != "fail", f"{verdict.case_id}: {verdict.problem}"

load_cases gives the cases (all, or by level or tag), judge holds one answer to one case, and
run_cases calls a function the way the ports are called, fn(query, key, value, attn_mask,
is_causal=..., scale=..., enable_gqa=..., softcap=..., ...) with the options the case holds, on
every case and judges each answer (each call on fresh copies of the inputs, each bounded by
timeout_seconds).
parametrize_cases is a pytest decorator with one test id per case. The verdict is compare.py's:
"pass", "fail", or "outside" where the contract defines no answer in that dtype (its scores
overflow, or its inputs do not fit). The TypeScript twin is `attention-port/conformance` (loadCases,
judge, runCases), which a test holds to the same rule.

Needs numpy only: the fixtures ship inside the package (attention_port/data/fixtures) and are read
without the JSON Schema (each file is checked against the manifest's sha256; the project's tests
hold the folder to the schema).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from attention_port.contract import CORE_OPTIONS
from attention_port.golden.cases import CORE_LEVELS, level_of
from attention_port.golden.reader import FixtureCase, load_fixtures
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
    # The case's own copy: what a function does to it never reaches the fixture the judge reads.
    inputs = copy.deepcopy(dict(fixture.inputs))
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


def _numbers(value: object, step: str) -> np.ndarray | str:
    """One step's answer as float64, or why it is not a tensor of real numbers: strings, booleans,
    complex numbers and integers past float64's range are refused, never converted (numpy would read
    "0.5" as 0.5 and drop an imaginary part); a torch tensor is read detached, in float64."""
    if hasattr(value, "detach") and hasattr(value, "is_complex"):  # a torch tensor, grad or not
        if value.is_complex():
            return f"{step} holds complex, not a number"
        value = value.detach().cpu().double().numpy()
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as error:  # ragged nested lists
        return f"{step} is not a tensor of numbers ({error})"
    real = (int, float, np.integer, np.floating)
    if array.dtype == object:  # Python objects: numbers numpy could not type, or anything else
        for item in array.flat:
            if isinstance(item, bool) or not isinstance(item, real):
                return f"{step} holds {_kind(item)}, not a number"
            try:
                float(item)
            except OverflowError:
                return f"{step} holds an integer beyond float64's range ({len(str(abs(item)))} digits)"
    elif array.dtype.kind not in "iuf" and array.dtype.name != "bfloat16":
        first = array.reshape(-1)[0] if array.size else array.dtype.type()
        return f"{step} holds {_kind(first)}, not a number"
    try:
        return array.astype(np.float64)
    except (TypeError, ValueError, OverflowError) as error:
        return f"{step} is not a tensor of numbers ({error})"


def _kind(item: object) -> str:
    """What a value is, in the words the TypeScript judge uses (typeof's)."""
    if isinstance(item, str | bytes | np.str_ | np.bytes_):
        return "string"
    if isinstance(item, bool | np.bool_):
        return "boolean"
    if isinstance(item, complex | np.complexfloating):
        return "complex"
    return "None" if item is None else type(item).__name__


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
        array = _numbers(given[step], step)
        if isinstance(array, str):
            return array
        steps[step] = _as_expected_shape(array, getattr(case.fixture.expected, step))
    return steps


def _text(value: object) -> str:
    """Any value as text, even one whose __str__ raises."""
    try:
        return str(value)
    except Exception:  # a broken __str__ is the function's slip, not the kit's crash
        return object.__repr__(value)


def _dtype_name(dtype: object) -> str:
    """The dtype's name: a string, or a numpy or torch dtype (dtype=out.dtype) read as its name."""
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        name = np.dtype(dtype).name
    elif type(dtype).__module__ == "torch":  # torch.float32, without importing torch
        name = str(dtype).removeprefix("torch.")
    else:
        raise TypeError(f"dtype: {dtype!r} is not a dtype name such as 'float32'")
    if name not in DTYPES:
        raise ValueError(f"dtype: {name!r} is not one of {', '.join(DTYPES)}")
    return name


def judge(case: TestCase, actual: object, *, dtype: str = "float64", match_kind: bool = False) -> Verdict:
    """One answer to one case, held to the rule. `actual` is what the function returned (the
    output, or its steps: scores, logits, weights, output, as a dict or attributes), or the
    exception it raised.
    On an invalid case any raised exception passes, as in `attention-port check`; match_kind=True
    demands its `kind` be the case's (the project's ports raise AttentionInputError with a kind).
    `dtype` is a name, or a numpy or torch dtype (its name is read)."""
    if not isinstance(case, TestCase):
        raise TypeError(f"judge: case is {type(case).__name__}, not one of load_cases()'s cases")
    dtype = _dtype_name(dtype)
    if isinstance(actual, BaseException):
        kind = getattr(actual, "kind", None)
        thrown = f"{type(actual).__name__}{'' if kind is None else f' ({_text(kind)})'}: {_text(actual)}"
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
    """fn called the way the ports are, on one case: its answer, or the exception it raised. Each
    call gets fresh copies of the case's inputs: a function that changes them in place changes
    nothing another call (or the judge) sees."""
    inputs = copy.deepcopy(case.inputs)
    try:
        return fn(inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **case.options)
    except Exception as error:  # the answer to judge, not a failure of the kit
        return error


# run_cases's per-case limit, in seconds, unless told otherwise.
TIMEOUT_SECONDS = 60.0


def _call_within(fn: Callable[..., object], case: TestCase, timeout_seconds: float | None) -> list[object]:
    """[call(fn, case)], or [] if it did not return within the limit. With a limit the call runs in
    a thread of its own: a Python function cannot be stopped from outside, so one that never
    returns is left running in that (daemon) thread, which ends with the process."""
    if timeout_seconds is None:
        return [call(fn, case)]
    answer: list[object] = []
    thread = threading.Thread(target=lambda: answer.append(call(fn, case)), daemon=True)
    thread.start()
    thread.join(timeout_seconds)
    return answer


def run_cases(
    fn: Callable[..., object],
    *,
    dtype: str = "float64",
    levels: Iterable[int] | None = None,
    tags: Iterable[str] | None = None,
    match_kind: bool = False,
    timeout_seconds: float | None = TIMEOUT_SECONDS,
) -> Iterator[Verdict]:
    """Calls `fn` on every case asked for, in order, and yields the verdict on each. A call that
    has not returned after `timeout_seconds` (None: no limit) fails its case, and the run goes on;
    the call itself cannot be stopped and runs on in its thread (see _call_within)."""
    if timeout_seconds is not None and not timeout_seconds > 0:
        raise ValueError(f"timeout_seconds: {timeout_seconds!r} is not a positive number of seconds")
    dtype = _dtype_name(dtype)
    for case in load_cases(levels, tags):
        answer = _call_within(fn, case, timeout_seconds)
        if not answer:
            yield Verdict(case.id, "fail", dtype, problem=f"did not return within {timeout_seconds:g} s")
            continue
        yield judge(case, answer[0], dtype=dtype, match_kind=match_kind)


def parametrize_cases(levels: Iterable[int] | None = None, tags: Iterable[str] | None = None):
    """A pytest decorator: the test takes `case`, and runs once per case, with the case's id as
    its test id (pytest -k causal runs the causal ones)."""
    import pytest  # only here: the kit itself needs numpy alone

    cases = load_cases(levels, tags)
    return pytest.mark.parametrize("case", cases, ids=[case.id for case in cases])
