"""`attention-port check PATH`: check a learner's own attention implementation against the fixtures.

PATH is a .ts/.mts/.js/.mjs module exporting `scaledDotProductAttention(query, key, value,
options?)` (and maybe `attentionSteps`), or a .py file defining `scaled_dot_product_attention(query,
key, value, ...)` (and maybe `attention_steps`). Its code runs in a process of its own (learner.py).

The cases run in levels, easiest first (cases.LEVELS: a case's tags decide its level). By default
check stops after the first level with a failure; --all runs every level. A case that needs options
the learner's function does not take is "not attempted", not failed. Whether a case passes is
compare.judge's decision, as for every port; check only words the verdict for a learner: the worst
cell (expected vs got), the first step that differs when the learner returns steps, and the known
mistake (mistakes.py) the output matches, if any. On the invalid-input level any thrown error passes.

Exit codes: 0 every attempted level passes; 1 a level fails; 2 the file could not be run at all.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import cases, compare, mistakes
from .fixtures import FixtureCase, load_fixtures
from .inputs import format_number, format_shape
from .learner import DEFAULT_MEMORY, Hello, LearnerError, LearnerProcess, Reply
from .learner_protocol import OPTION_NAMES, options_set
from .ports import PortAnswer

DEFAULT_TIMEOUT = 10.0  # seconds one case may take
WATCH_POLL = 0.25  # seconds between looks at the file's modification time in --watch
CLEAR_SCREEN = "\033[2J\033[H"
LEARNER = "your code"


@dataclass
class CaseResult:
    case: FixtureCase
    status: str  # "pass", "fail" or "skip"
    lines: list[str] = field(default_factory=list)  # what to print under the level (maybe nothing)
    reason: str = ""  # why it was not attempted


def number(x: float | None) -> str:
    """A number as a learner reads it: JavaScript's words for the special values."""
    if x is None:
        return "nothing"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    return f"{x:.6g}" if math.isfinite(x) else format_number(x)


def _nested_form(shape: tuple[int, ...]) -> str:
    """How nested arrays write a shape with a zero dim: [2, 0, 4] is [[], []]."""
    cut = shape[: shape.index(0)]
    text = "[]"
    for n in reversed(cut):
        text = "[" + ", ".join([text] * n) + "]" if n <= 3 else f"[{text}, ... ({n} of them)]"
    return text


def skip_reason(case: FixtureCase, hello: Hello) -> str | None:
    """Why the learner's function cannot attempt this case, or None."""
    wanted = options_set(case)
    if wanted and not hello.takes_options:
        return "your function takes no options"
    if hello.option_names is not None:
        missing = [name for name in wanted if name not in hello.option_names]
        if missing:
            return f"your function takes no {missing[0]} argument"
    if case.expected is not None and not hello.shaped:
        for name in ("key", "value"):
            shape = case.inputs[name].shape
            if 0 in shape[:-1]:
                flag = "acceptsShapedTensors" if hello.language == "JavaScript" else "ACCEPTS_SHAPED_TENSORS"
                return (
                    f"nested arrays cannot carry its shapes ({name} {format_shape(shape)} is written"
                    f" {_nested_form(shape)}); set {flag} = true to be given it with its shape"
                )
    return None


def _as_expected_shape(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Nested arrays stop at a zero-size dim ([2, 0, 4] comes back [[], []]): such an answer has
    the expected shape as far as nesting can say it."""
    if actual.shape != expected.shape and 0 in expected.shape:
        cut = expected.shape[: expected.shape.index(0) + 1]
        if actual.shape == cut:
            return np.zeros(expected.shape)
    return actual


def _result(case: FixtureCase, verdict: compare.CaseVerdict, lines: list[str]) -> CaseResult:
    """compare.judge decided; the lines are said only for a failure."""
    return CaseResult(case, "pass") if verdict.passed else CaseResult(case, "fail", lines)


def judge_valid(case: FixtureCase, reply: Reply, timeout: float) -> CaseResult:
    """A case with expected values: compare.judge decides; the lines say what went wrong."""
    prefix = f"{case.id}:"
    if reply.how != "steps":
        problem = {
            "hang": f"no answer within {timeout:g} s (an endless loop?); the next case gets a fresh process",
            "died": reply.message,
            "bad": reply.message,
            "threw": f"your function threw {reply.error_name}: {reply.message}",
        }[reply.how]
        verdict = compare.judge(case, LEARNER, "float64", PortAnswer(crash=problem))
        lines = [f"{prefix} {problem}", f"    {case.description}"]
        return _result(case, verdict, lines)
    expected = case.expected
    steps = {name: _as_expected_shape(a, getattr(expected, name)) for name, a in reply.steps.items()}
    verdict = compare.judge(case, LEARNER, "float64", PortAnswer(steps=steps))
    output = steps.get("output")
    if output is not None and output.shape != expected.output.shape:
        want = expected.output.shape
        line = f"{prefix} output has shape {format_shape(output.shape)}, expected {format_shape(want)}"
        if 0 in expected.output.shape:
            line += f" (as nested arrays: {_nested_form(expected.output.shape)})"
        elif output.ndim != expected.output.ndim:
            line += (
                f" — this case is rank {expected.output.ndim}: every dim before the last two is a batch"
                " or head dim, and each [L, E] matrix inside gets the same steps"
            )
        return _result(case, verdict, [line, f"    {case.description}"])
    if verdict.passed:
        return CaseResult(case, "pass")
    if verdict.index is not None:
        line = (
            f"{prefix} {compare.cell('output', verdict.index)} is {number(verdict.actual)},"
            f" expected {number(verdict.expected)}"
        )
    else:
        line = f"{prefix} {verdict.problem or 'output differs'}"
    mistake = mistakes.identify(case.inputs, case.params, expected.output, steps["output"])
    if mistake is not None:
        line += f" — looks like {mistake.explain(int(case.inputs['query'].shape[-1]))}"
    elif verdict.problem and verdict.index is not None:
        line += f" ({verdict.problem})"
    lines = [line, f"    {case.description}"]
    first = verdict.first_divergent_step
    if first is not None and first != "output" and len(reply.steps) > 1:
        check = next(c for c in verdict.steps if c.step == first)
        if check.index is not None:
            lines.append(
                f"    first step that differs: {compare.cell(first, check.index)} is {number(check.actual)},"
                f" expected {number(check.expected)}"
            )
        else:
            lines.append(f"    first step that differs: {check.problem or first}")
    return CaseResult(case, "fail", lines)


def judge_invalid(case: FixtureCase, reply: Reply, timeout: float) -> CaseResult:
    """A case with invalid input: any thrown error passes (the project's kind is noted, not needed)."""
    kind, message = case.expected_error
    if reply.how == "threw":
        line = f"{case.id}: threw {reply.error_name}: {reply.message}"
        if reply.error_kind == kind:
            line += f" (kind {kind!r}, as the project's ports)"
        return CaseResult(case, "pass", [line])
    if reply.how == "steps":
        got = f"returned an output of shape {format_shape(reply.steps['output'].shape)} instead of throwing"
    elif reply.how == "hang":
        got = f"no answer within {timeout:g} s (an endless loop?) instead of an error"
    else:
        got = f"{reply.message}, instead of throwing an error"
    return CaseResult(
        case,
        "fail",
        [f"{case.id}: {got}", f"    {case.description}; the project's ports say: {message}"],
    )


def run_case(learner: LearnerProcess, case: FixtureCase, timeout: float) -> CaseResult:
    hello = learner.hello
    reason = skip_reason(case, hello)
    if reason is not None:
        return CaseResult(case, "skip", reason=reason)
    reply = learner.ask(case, shaped=hello.shaped)
    if case.expects_error:
        return judge_invalid(case, reply, timeout)
    return judge_valid(case, reply, timeout)


def level_line(n: int, total: int, name: str, results: list[CaseResult]) -> str:
    attempted = [r for r in results if r.status != "skip"]
    failed = [r for r in attempted if r.status == "fail"]
    skipped = [r for r in results if r.status == "skip"]
    head = f"level {n} of {total}: {name}"
    if not results:
        return f"{head} — no cases in this fixture folder"
    if not attempted:
        return f"{head} — not attempted: {skipped[0].reason}"
    if failed:
        text = f"{head} — {len(failed)} of {len(attempted)} cases fail"
    else:
        text = f"{head} — {len(attempted)} of {len(attempted)} cases pass"
    if skipped:
        text += f" ({len(skipped)} not attempted: {skipped[0].reason})"
    return text


def describe_function(path: Path, hello: Hello) -> str:
    if hello.language == "JavaScript":
        args = "(query, key, value, options)" if hello.takes_options else "(query, key, value), no options"
    elif hello.option_names:
        args = f"(query, key, value, {', '.join(n for n in OPTION_NAMES if n in hello.option_names)})"
    else:
        args = "(query, key, value), no options"
    shaped = "; zero-size tensors given with their shape" if hello.shaped else ""
    return f"Checking {path} ({hello.language}): {hello.function} takes {args}{shaped}."


def check(
    path: Path,
    fixtures_dir: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory: int = DEFAULT_MEMORY,
    run_all: bool = False,
    say: Callable[[str], None] = print,
    failure_first: bool = False,
) -> int:
    """Run the levels and say how they went; the exit code. With `failure_first` (--watch) the
    lines of the first failing level come first, before the levels that pass."""
    try:
        learner = LearnerProcess(path, fixtures_dir, timeout, memory)
        hello = learner.start()
    except LearnerError as error:
        say(f"error: {error}")
        return 2
    held: list[str] = []  # with failure_first: the lines of the levels before the first failure

    def say_level(lines: list[str], failed: bool) -> None:
        if not failure_first:
            for line in lines:
                say(line)
        elif failed:
            for line in [*lines, "", *held]:
                say(line)
            held.clear()
        else:
            held.extend(lines)

    try:
        by_level: dict[int, list[FixtureCase]] = {}
        for case in load_fixtures(fixtures_dir):
            if "outside_contract" in case.tags:
                continue  # the contract defines no answer there: nothing for a learner to match
            by_level.setdefault(cases.level_of(case.tags), []).append(case)
        total = len(cases.LEVELS)
        say(describe_function(path, hello))
        say("")
        failed_levels = []
        for n, level in enumerate(cases.LEVELS, start=1):
            results = [run_case(learner, case, timeout) for case in by_level.get(n, [])]
            lines = [level_line(n, total, level.name, results)]
            # a failure's lines, and the message of each error thrown on purpose
            lines += [f"  {line}" for result in results for line in result.lines]
            failed = any(r.status == "fail" for r in results)
            say_level(lines, failed and not failed_levels)
            if failed:
                failed_levels.append(n)
                if not run_all:
                    say("")
                    say(f"Stopped at {level_line(n, total, level.name, results)}.")
                    if n < total:
                        say(f"Levels {n + 1}-{total} were not run: fix this level first, or add --all.")
                    return 1
        say_level([], True)  # the levels held back, when none failed
        say("")
        if failed_levels:
            numbers = ", ".join(map(str, failed_levels))
            say(f"{len(failed_levels)} of {total} levels fail (level {numbers}).")
            return 1
        say(f"Every level you attempted passes ({total} levels).")
        return 0
    finally:
        learner.close()


def _saved(path: Path) -> tuple[int, int] | None:
    """When the file was last saved, and its size; None while it is missing (an editor's save)."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def watch(
    path: Path,
    fixtures_dir: Path,
    *,
    say: Callable[[str], None] = print,
    clear: Callable[[], None] = lambda: print(CLEAR_SCREEN, end="", flush=True),
    **options,
) -> int:
    """--watch, as Rustlings does: check, then check again each time the file is saved, on a
    cleared screen with the first failing level first. Ctrl-C ends it, exit code 0."""
    try:
        while True:
            saved = _saved(path)
            clear()
            check(path, fixtures_dir, say=say, failure_first=True, **options)
            say("")
            say(f"Watching {path}: save it to check again; Ctrl-C stops.")
            while _saved(path) == saved:
                time.sleep(WATCH_POLL)
    except KeyboardInterrupt:  # the learner's process is in a session of its own: check closed it
        say("")
        return 0
