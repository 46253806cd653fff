"""`attention-port check PATH`: check a learner's own attention implementation against the fixtures.

PATH is a .ts/.mts/.js/.mjs module exporting `scaledDotProductAttention(query, key, value,
options?)` (and maybe `attentionSteps`), or a .py file defining `scaled_dot_product_attention(query,
key, value, ...)` (and maybe `attention_steps`). Its code runs in a process of its own, within
limits of time, memory, processes and output (runner.py); check is not a security sandbox.

The cases run in levels, easiest first (cases.LEVELS: a case's tags decide its level). By default
check stops after the first level with a failure; --all runs every level. A case that needs options
the learner's function does not take is "not attempted", not failed. Whether a case passes is
compare.judge's decision, as for every port; check only words the verdict for a learner: the worst
cell (expected vs got), the first step that differs when the learner returns steps, and the known
mistake (mistakes.py) the output matches, if any. On the invalid-input level any thrown error passes.
What the learner's code prints is shown under the case that printed it, its control characters made
visible, at most PRINTED_LINES lines and runner.PRINTED_LIMIT bytes a case (the report says what was
cut). An error that stops the run (the file cannot be run at all) goes to stderr.

Exit codes: 0 every case attempted passes (those not attempted are counted); 1 a level fails; 2 the
file could not be run at all.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention_port import vocabulary
from attention_port.golden import cases
from attention_port.golden.reader import KINDS, FixtureCase, load_fixtures
from attention_port.harness import compare
from attention_port.harness.compare import PortAnswer
from attention_port.inputs import format_number, format_shape
from attention_port.learner import layer_mistakes, lesson, mistakes
from attention_port.learner.protocol import OPTION_NAMES, layer_options_set, options_set
from attention_port.learner.runner import (
    DEFAULT_MEMORY,
    PRINTED_LIMIT,
    Hello,
    LearnerError,
    LearnerProcess,
    Printed,
    Reply,
)

DEFAULT_TIMEOUT = 10.0  # seconds one case may take
WATCH_POLL = 0.25  # seconds between looks at the file's modification time in --watch
CLEAR_SCREEN = "\033[2J\033[H"
LEARNER = "your code"
PRINTED_LINES = 40  # lines of what the learner's code printed shown for one case
# Terminal control characters (C0 but tab and newline, DEL, C1): shown as \x1b, never sent as they are.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass
class CaseResult:
    case: FixtureCase
    status: str  # "pass", "fail" or "skip"
    lines: list[str] = field(default_factory=list)  # the case's line, then details (maybe nothing)
    reason: str = ""  # why it was not attempted
    crashed: bool = False  # an invalid case refused by a crash in the learner's code, not on purpose
    note: str | None = None  # what the case's line adds after " — " (a named mistake, a hint)
    printed: Printed | None = None  # what the learner's code printed while the case ran


# ---- the learner's language ---------------------------------------------------------------------


def spoken(text: str, language: str) -> str:
    """The harness's text in the learner's language (its case descriptions, the project's messages,
    the named mistakes mix the two spellings): isCausal, true, NaN, Infinity for JavaScript;
    is_causal, True, nan, inf for Python. Only whole words change ("-inf" is "-Infinity")."""
    return vocabulary.spelled(text, "javascript" if language == "JavaScript" else "python", literals=True)


def number(x: float | None, language: str = "JavaScript") -> str:
    """A number as a learner reads it: NaN and Infinity in JavaScript, nan and inf in Python."""
    if x is None:
        return "nothing"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    return f"{x:.6g}" if math.isfinite(x) else spoken(format_number(x), language)


def numbers_apart(actual: float | None, expected: float | None, language: str) -> tuple[str, str]:
    """Two numbers as a learner reads them, with the digits that tell them apart."""
    if actual is None or expected is None:
        return number(actual, language), number(expected, language)
    got, want = compare.distinct_digits(actual, expected)
    return spoken(got, language), spoken(want, language)


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
    return None


def _as_expected_shape(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Nested arrays stop at a zero-size dim ([2, 0, 4] comes back [[], []]): such an answer has
    the expected shape as far as nesting can say it."""
    if actual.shape != expected.shape and 0 in expected.shape:
        cut = expected.shape[: expected.shape.index(0) + 1]
        if actual.shape == cut:
            return np.zeros(expected.shape)
    return actual


# ---- what to add to a failing case's line ---------------------------------------------------------


def _shaped_hint(case: FixtureCase, language: str) -> str | None:
    """An error on a case whose tensors come with their shape: say so, in the learner's terms."""
    for name in ("query", "key", "value", "attn_mask"):
        tensor = case.inputs[name]
        if tensor is not None and 0 in tensor.shape:
            name = spoken(name, language)
            if language == "JavaScript":
                given = f"{{shape: {format_shape(tensor.shape)}, data: []}}"
            else:
                given = f"a numpy array of shape {tuple(tensor.shape)}"
            return (
                f"this case gives {name} as {given}: a tensor with a zero-size dim comes with its"
                " shape, since nested arrays cannot carry it"
            )
    return None


def _gqa_hint(case: FixtureCase, language: str) -> str | None:
    """An error on grouped-query heads: how query heads map to key/value heads."""
    query, key = case.inputs["query"].shape, case.inputs["key"].shape
    if case.params["enable_gqa"] is not True or len(query) < 3 or query[-3] == key[-3]:
        return None
    return spoken(
        f"with enable_gqa, Hq = {query[-3]} query heads share Hkv = {key[-3]} key/value heads in"
        f" consecutive groups of {query[-3] // max(key[-3], 1)}: query head h reads key/value head"
        " floor(h / (Hq / Hkv))",
        language,
    )


def _rank_hint(case: FixtureCase) -> str | None:
    rank = case.inputs["query"].ndim
    if rank <= 2:
        return None
    return (
        f"this case is rank {rank}: every dim before the last two is a batch or head dim, and each"
        " [L, E] matrix inside gets the same steps"
    )


def _transpose_hint(case: FixtureCase, reply: Reply, language: str) -> str | None:
    """numpy's .T on a rank > 2 array reverses every axis, and the matmul after it fails."""
    rank = case.inputs["key"].ndim
    if language != "Python" or rank <= 2 or "matmul" not in reply.message:
        return None
    shape = ", ".join(
        ["B", "H", "Lk", "E"][-rank:] if rank <= 4 else [*(f"B{n}" for n in range(rank - 2)), "Lk", "E"]
    )
    reverse = ", ".join(reversed(shape.split(", ")))
    return (
        f"this case is rank {rank}: if you transposed the key with .T, on a rank-{rank} array .T"
        f" reverses every axis ([{shape}] becomes [{reverse}]), not just the last two;"
        " np.swapaxes(key, -1, -2) swaps only those" + lesson.pointer("scores", language)
    )


def _lengths_hint(case: FixtureCase) -> str | None:
    """A crash where Lq != Lk: a loop bound taken from the other tensor reads past its end."""
    queries, keys = case.inputs["query"].shape[-2], case.inputs["key"].shape[-2]
    if case.inputs["query"].ndim < 2 or queries == keys:
        return None
    return (
        f"this case has Lq = {queries} query rows and Lk = {keys} key rows: a loop over the keys runs"
        " to key.length, one over the queries to query.length"
    )


def _case_hint(case: FixtureCase, language: str, reply: Reply | None = None) -> str | None:
    """What about this case most likely tripped code that passed the earlier levels, said after an
    error on a valid case (a crash, or a throw of the learner's own that refused valid input)."""
    return (
        _shaped_hint(case, language)
        or _gqa_hint(case, language)
        or (reply is not None and _transpose_hint(case, reply, language))
        or _rank_hint(case)
        or _lengths_hint(case)
    )


def _mistake_named(case: FixtureCase, output: np.ndarray, language: str) -> str | None:
    """ "looks like ..." when the output matches a known wrong variant (mistakes.py)."""
    mistake = mistakes.identify(case.inputs, case.params, case.expected.output, output)
    if mistake is None:
        return None
    said = spoken(mistake.explain(int(case.inputs["query"].shape[-1]), case.params), language)
    return "looks like " + said + lesson.pointer(mistake.topic, language)


def _has_fully_masked_row(case: FixtureCase) -> bool:
    logits = case.expected.logits
    return logits is not None and (logits.shape[-1] == 0 or bool(np.all(logits == -np.inf, axis=-1).any()))


# What each step returned by attentionSteps holds, and where the lesson makes it.
STEP_TOPICS = {
    "scores": ("step 1, the scores", "scores"),
    "logits": ("steps 2-3, the scale, softcap and mask", "scale"),
    "weights": ("step 4, softmax", "weights"),
    "output": ("step 5, weights · value", "output"),
}


def _axis_names(rank: int) -> list[str]:
    return [*(["batch"] * max(rank - 3, 0)), "head", "query row", "feature"][-rank:]


# How far a cell may be from the expected one and still count as right, for wrong_cells, by dtype:
# about a hundred units in the last place of each (a pattern, not a verdict: compare.judge decides).
CELL_TOLERANCE = {"float64": 1e-6, "float32": 1e-4, "float16": 1e-1, "bfloat16": 1e-1}


def wrong_cells(output: np.ndarray, expected: np.ndarray, dtype: str = "float64") -> str | None:
    """What the wrong cells have in common, when no known mistake explains them: a whole row, a
    whole column (the last feature, say), one head; None when they share nothing to say."""
    if output.shape != expected.shape or output.ndim < 2 or output.size == 0:
        return None
    with np.errstate(all="ignore"):
        tolerance = CELL_TOLERANCE.get(dtype, 1e-1)
        bad = ~np.isclose(output, expected, rtol=tolerance, atol=tolerance * 1e-3, equal_nan=True)
    count, total = int(bad.sum()), bad.size
    if count == 0:
        return None
    if count == total:
        return "every output cell is wrong: look at a step every cell goes through (scores, scale, softmax)"
    names = _axis_names(output.ndim)
    for axis in range(output.ndim - 2):
        touched = np.flatnonzero(bad.any(axis=tuple(a for a in range(output.ndim) if a != axis)))
        if len(touched) == 1 and output.shape[axis] > 1:
            return (
                f"only {names[axis]} {touched[0]} (index {touched[0]} of dim {axis}) is wrong; the others"
                f" are right: look at what differs for that {names[axis]}"
            )
    rows = bad.any(axis=-1)
    if (bad == rows[..., None]).all():
        which = sorted({int(i) for i in np.nonzero(rows)[-1]})
        last = output.shape[-2] - 1
        said = (
            "the last query row"
            if which == [last]
            else f"query row{'s' if len(which) > 1 else ''} " + ", ".join(map(str, which))
        )
        return (
            f"the wrong cells are whole rows ({said}, every feature): look at that query's mask and weights"
        )
    columns = bad.reshape(-1, output.shape[-1]).any(axis=0)
    if (bad == np.broadcast_to(columns, bad.shape)).all():
        which = [int(c) for c in np.flatnonzero(columns)]
        if which == [output.shape[-1] - 1]:
            return (
                "only the last feature of every row is wrong: a loop over the features that stops one short?"
            )
        return f"the wrong cells are whole columns (feature {', '.join(map(str, which))} of every row)"
    return f"{count} of {total} output cells are wrong"


def _verdict_note(verdict: compare.CaseVerdict) -> str | None:
    """What the rule's own problem adds to "cell is x, expected y" (NaN and infinities say themselves)."""
    problem = verdict.problem or ""
    if "+0.0 is required" in problem:
        return "a fully-masked row must give exactly +0"
    if "beyond every value the row averages" in problem:
        return "beyond every value the row averages (each output is a weighted average of values)"
    return None


def _joined(line: str, *notes: str | None) -> str:
    return " — ".join([line, *(n for n in notes if n)])


# ---- judging one case ---------------------------------------------------------------------------


def _threw(reply: Reply) -> str:
    """The learner's error as said on its case's line: on purpose or a crash, and where."""
    what = f"{reply.error_name}: {reply.message}"
    if reply.deliberate:
        return f"your function threw {what}" + (f" ({reply.where})" if reply.where else "")
    return f"your code crashed{f' at {reply.where}' if reply.where else ''}: {what}"


def _no_steps_problem(reply: Reply, timeout: float) -> str:
    """What went wrong when the learner's process gave no steps: it hung, died, answered something
    unreadable or threw."""
    return {
        "hang": f"no answer within {timeout:g} s (an endless loop?); the next case gets a fresh process",
        "died": reply.message,
        "bad": reply.message,
        "threw": _threw(reply) if reply.how == "threw" else "",
    }[reply.how]


def judge_valid(
    case: FixtureCase, reply: Reply, timeout: float, language: str = "JavaScript", dtype: str = "float64"
) -> CaseResult:
    """A case with expected values: compare.judge decides, with the budget of the dtype the
    learner's function computes in; the lines say what went wrong."""
    prefix = f"{case.id}:"
    description = f"    {spoken(case.description, language)}"
    if reply.how != "steps":
        problem = _no_steps_problem(reply, timeout)
        verdict = compare.judge(case, LEARNER, dtype, PortAnswer(crash=problem))
        hint = _case_hint(case, language, reply) if reply.how == "threw" else None
        return _result(case, verdict, [f"{prefix} {problem}", description], hint)
    expected = case.expected
    if reply.changed:
        changed = " and ".join(spoken(name, language) for name in reply.changed)
        copy = "query.map((row) => [...row])" if language == "JavaScript" else "np.array(query)"
        note = f"the caller's arrays must be left as they were (work on a copy, {copy}, or build new arrays)"
        return CaseResult(
            case, "fail", [f"{prefix} your function changed the caller's {changed}", description], note=note
        )
    steps = {name: _as_expected_shape(a, getattr(expected, name)) for name, a in reply.steps.items()}
    verdict = compare.judge(case, LEARNER, dtype, PortAnswer(steps=steps))
    output = steps.get("output")
    if output is not None and output.shape != expected.output.shape:
        want = expected.output.shape
        line = f"{prefix} output has shape {format_shape(output.shape)}, expected {format_shape(want)}"
        if 0 in want:
            line += f" (as nested arrays: {_nested_form(want)})"
        named = _mistake_named(case, output, language)
        rank = _rank_hint(case) if output.ndim != expected.output.ndim else None
        return _result(case, verdict, [line, description], named or rank)
    if verdict.passed:
        return CaseResult(case, "pass")
    if verdict.index is not None:
        got, want = numbers_apart(verdict.actual, verdict.expected, language)
        line = f"{prefix} {compare.cell('output', verdict.index)} is {got}, expected {want}"
    else:
        line = f"{prefix} {verdict.problem or 'output differs'}"
    named = _mistake_named(case, steps["output"], language)
    note = _verdict_note(verdict)
    if note is not None and "fully-masked" in note and not _has_fully_masked_row(case):
        note = None  # no row of this case is fully masked: the note would blame the wrong thing
    lines = [line, description]
    first = verdict.first_divergent_step
    if first is not None and first != "output" and len(reply.steps) > 1:
        check = next(c for c in verdict.steps if c.step == first)
        what, topic = STEP_TOPICS.get(first, (first, None))
        if check.index is not None:
            got, want = numbers_apart(check.actual, check.expected, language)
            said = f"{compare.cell(first, check.index)} is {got}, expected {want}"
        else:
            said = check.problem or first
        lines.append(f"    first step that differs: {said} ({what}){lesson.pointer(topic, language)}")
    elif named is None:
        common = wrong_cells(steps["output"], expected.output, dtype)
        if common is not None:
            lines.append(f"    {common}")
    return CaseResult(case, "fail", lines, note=named or note)


def _result(
    case: FixtureCase, verdict: compare.CaseVerdict, lines: list[str], note: str | None = None
) -> CaseResult:
    """compare.judge decided; the lines are said only for a failure."""
    return CaseResult(case, "pass") if verdict.passed else CaseResult(case, "fail", lines, note=note)


def judge_invalid(
    case: FixtureCase, reply: Reply, timeout: float, language: str = "JavaScript"
) -> CaseResult:
    """A case with invalid input: any thrown error passes (the project's kind is noted, not needed).
    A crash in the learner's own code passes too, but is said as a crash and counted as one."""
    kind, message = case.expected_error
    ports_say = (
        f"    {spoken(case.description, language)}; the project's ports say: {spoken(message, language)}"
    )
    if reply.how == "threw" and reply.deliberate:
        line = f"{case.id}: threw {reply.error_name}: {reply.message}"
        if reply.error_kind == kind:
            line += f" (kind {kind!r}, as the project's ports)"
        return CaseResult(case, "pass", [line])
    if reply.how == "threw":
        at = f" at {reply.where}" if reply.where else ""
        line = f"{case.id}: refused by a crash (counts as refusing){at}: {reply.error_name}: {reply.message}"
        return CaseResult(case, "pass", [line, ports_say], crashed=True)
    if reply.how == "steps":
        got = f"returned an output of shape {format_shape(reply.steps['output'].shape)} instead of throwing"
    elif reply.how == "hang":
        got = f"no answer within {timeout:g} s (an endless loop?) instead of an error"
    else:
        got = f"{reply.message}, instead of throwing an error"
    return CaseResult(case, "fail", [f"{case.id}: {got}", ports_say])


# ---- the layer's and RoPE's levels --------------------------------------------------------------


def _layer_skip_reason(case: FixtureCase, hello: Hello) -> str | None:
    """Why the learner's file cannot attempt this layer or RoPE case, or None."""
    if case.kind == "rope" and hello.rotary is None:
        return spoken("your file has no apply_rotary", hello.language)
    if case.kind == "layer" and hello.layer is None:
        return spoken("your file has no multi_head_attention", hello.language)
    if "cache" in case.tags and not hello.layer_past:
        return spoken(
            "your multi_head_attention takes no past_key and past_value: it exports no KV cache",
            hello.language,
        )
    # A Python layer says by its parameters which options it takes (a window, say, or sinks: the
    # core's, which the layer passes on); a JavaScript options object has no names to read.
    names = hello.layer_option_names
    missing = (
        []
        if case.kind != "layer" or names is None
        else [n for n in layer_options_set(case) if n not in names]
    )
    if missing:
        return spoken(f"your multi_head_attention takes no {missing[0]} argument", hello.language)
    return None


def _transposed(case: FixtureCase) -> FixtureCase:
    """The case with every weight given transposed, [in, out]: what code computing x·W needs to
    give the right output."""
    inputs = {n: x.T if n.startswith("w_") and x is not None else x for n, x in case.inputs.items()}
    return dataclasses.replace(case, inputs=inputs)


def _layer_mistake(
    case: FixtureCase,
    output: np.ndarray | None,
    language: str,
    ask_again: Callable[[FixtureCase], Reply],
    dtype: str = "float64",
    steps: dict[str, np.ndarray] | None = None,
) -> str | None:
    """ "looks like ..." for a known layer or RoPE mistake: a variant the output matches
    (layer_mistakes.py), or right answers once the weights are given transposed."""
    mistake = None
    if output is not None:
        present = (steps or {}).get("present_key")
        rows = present.shape[-2] if present is not None and present.ndim >= 2 else None
        expected = case.expected.output
        cache = tuple((steps or {}).get(n) for n in ("present_key", "present_value"))
        held = (case.expected.present_key, case.expected.present_value)
        mistake = layer_mistakes.identify(
            case.kind, case.inputs, case.params, expected, output, rows,
            present=None if any(x is None for x in cache) else cache,
            expected_present=None if held[0] is None else held,
        )  # fmt: skip
    if mistake is None and case.kind == "layer":
        again = ask_again(_transposed(case))
        steps = again.steps if again.how == "steps" else None
        if steps is not None and compare.judge(case, LEARNER, dtype, PortAnswer(steps=steps)).passed:
            mistake = layer_mistakes.WEIGHTS_NOT_TRANSPOSED
    if mistake is None:
        return None
    return "looks like " + spoken(mistake.says, language) + mistake.pointer(language)


def judge_layer_valid(
    case: FixtureCase,
    reply: Reply,
    timeout: float,
    language: str,
    ask_again: Callable[[FixtureCase], Reply],
    dtype: str = "float64",
) -> CaseResult:
    """A layer or RoPE case with expected values: compare.judge decides, as for every port; the
    lines say the worst cell and the known mistake it matches, pointing at the lesson's line."""
    prefix = f"{case.id}:"
    description = f"    {spoken(case.description, language)}"
    if reply.how != "steps":
        problem = _no_steps_problem(reply, timeout)
        named = (
            _layer_mistake(case, None, language, ask_again, dtype) if reply.how in ("threw", "bad") else None
        )
        return CaseResult(case, "fail", [_joined(f"{prefix} {problem}", named), description])
    verdict = compare.judge(case, LEARNER, dtype, PortAnswer(steps=reply.steps))
    if verdict.passed:
        return CaseResult(case, "pass")
    output = reply.steps.get("output")
    want = case.expected.output.shape
    failing = next((c for c in verdict.steps if not c.passed), None)
    if output is not None and output.shape != want:
        line = f"{prefix} output has shape {format_shape(output.shape)}, expected {format_shape(want)}"
    elif failing is not None and failing.index is not None:
        cell = spoken(compare.cell(failing.step, failing.index), language)
        line = (
            f"{prefix} {cell} is {number(failing.actual, language)},"
            f" expected {number(failing.expected, language)}"
        )
    else:
        line = f"{prefix} {spoken(verdict.problem or 'output differs', language)}"
    named = _layer_mistake(case, output, language, ask_again, dtype, reply.steps)
    return CaseResult(case, "fail", [_joined(line, named), description])


def run_case(
    learner: LearnerProcess, case: FixtureCase, timeout: float, dtype: str = "float64"
) -> CaseResult:
    hello = learner.hello
    if case.kind != "attention":
        reason = _layer_skip_reason(case, hello)
        if reason is not None:
            return CaseResult(case, "skip", reason=reason)
        reply = learner.ask(case)
        if case.expects_error:
            return judge_invalid(case, reply, timeout, hello.language)
        return judge_layer_valid(case, reply, timeout, hello.language, learner.ask, dtype)
    reason = skip_reason(case, hello)
    if reason is not None:
        return CaseResult(case, "skip", reason=reason)
    reply = learner.ask(case)
    if case.expects_error:
        result = judge_invalid(case, reply, timeout, hello.language)
    else:
        result = judge_valid(case, reply, timeout, hello.language, dtype)
    result.printed = reply.printed
    return result


def run_aliased(
    learner: LearnerProcess, results: list[CaseResult], timeout: float, dtype: str = "float64"
) -> CaseResult | None:
    """The first passing case whose query and key hold the same values, run again with one array
    as both (as the starter's demo calls scaledDotProductAttention(Q, Q, V)): a failure there, when
    separate arrays pass, is a function that writes into an argument it reads. None when it passes."""
    case = next(
        (
            r.case
            for r in results
            if r.status == "pass"
            and not r.case.expects_error
            and r.case.inputs["query"].shape == r.case.inputs["key"].shape
            and np.array_equal(r.case.inputs["query"], r.case.inputs["key"])
        ),
        None,
    )
    if case is None:
        return None
    language = learner.hello.language
    result = judge_valid(case, learner.ask(case, same_query_key=True), timeout, language, dtype)
    if result.status == "pass":
        return None
    call = spoken("scaled_dot_product_attention(Q, Q, V)", language)
    said = (
        f"{case.id} with one array as both query and key, as {call} in the starter's demo:"
        f" it passes with separate arrays but not with the same one"
    )
    detail = result.lines[0].removeprefix(f"{case.id}:").strip()
    lines = [said, f"    {detail}", *result.lines[1:]]
    note = (
        "your function writes into an argument it also reads: here key is query, so a write to one"
        " changes the other; build new arrays instead"
    )
    return CaseResult(case, "fail", lines, note=note)


# ---- the report ---------------------------------------------------------------------------------


def runs_on(level: cases.Level, hello: Hello) -> bool:
    """Whether check runs `level` on this file: it has one of the functions the level needs."""
    has = {"function": hello.function, "layer": hello.layer, "rotary": hello.rotary}
    return any(has[need] is not None for need in level.needs)


def level_guide(n: int, language: str) -> str:
    """ "Level N teaches ...; read FILE line A (scores), line B (scale)." A level that teaches what
    its name says (the layer's, RoPE's and the cache's) points at its lesson's step unnamed."""
    level = cases.LEVELS[n - 1]
    found = ((topic, lesson.place(topic, language)) for topic in level.places)
    places = [(topic, where) for topic, where in found if where is not None]
    if level.teaches is None:
        read = "; ".join(where for _, where in places)
        return f"Level {n} teaches {level.name}" + (f". Read {read}." if read else ".")
    files: dict[str, list[str]] = {}  # file -> "line N (topic)", in the order of the topics
    for topic, where in places:
        file, line = where.split(" line ")
        files.setdefault(file, []).append(f"{line} ({topic.replace('_', ' ')})")
    read = "; ".join(f"{file} line{'s' if len(at) > 1 else ''} {', '.join(at)}" for file, at in files.items())
    text = f"Level {n} teaches {spoken(level.teaches, language)}"
    return text + (f". Read {read}." if read else ".")


def start_lines(language: str) -> list[str]:
    """--start: what check does, and what each of the attention core's levels teaches, before the
    first run."""
    lesson_file = lesson.place("scores", language)
    lines = [
        f"check runs {len(cases.CORE_LEVELS)} levels, easiest first, and stops at the first that fails;"
        " each failing case says what went wrong and, where it can, which step and which lesson line.",
        f"The lesson: {lesson_file.split(' line ')[0] if lesson_file else 'the reference port'}. The levels:",
    ]
    lines += [
        f"  {level.number}. {level.name}: {spoken(level.teaches, language)}" for level in cases.CORE_LEVELS
    ]
    return [*lines, ""]


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _level_numbers(numbers: list[int]) -> str:
    """[13] -> "level 13"; [4, 5, 6, 9] -> "levels 4-6, 9"."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)
    return f"level {text}" if len(numbers) == 1 else f"levels {text}"


def level_line(n: int, total: int, name: str, results: list[CaseResult]) -> str:
    attempted = [r for r in results if r.status != "skip"]
    failed = [r for r in attempted if r.status == "fail"]
    skipped = [r for r in results if r.status == "skip"]
    invalid = [r for r in attempted if r.case.expects_error]
    head = f"level {n} of {total}: {name}"
    if not results:
        return f"{head} — no cases in this fixture folder"
    if not attempted:
        return f"{head} — not attempted: {skipped[0].reason}"
    notes = []
    if invalid:
        crashed = sum(r.crashed for r in invalid)
        refused = f"{len([r for r in invalid if r.status == 'pass'])} of {len(invalid)} refused"
        notes.append(refused + (f", {crashed} by crashing" if crashed else ""))
    if failed:
        text = f"{head} — {len(failed)} of {_counted(len(attempted), 'case')} fail"
    elif invalid and len(invalid) == len(attempted):
        text, notes = f"{head} — {notes[0]}", notes[1:]
    else:
        text = f"{head} — {len(attempted)} of {_counted(len(attempted), 'case')} pass"
    if skipped:
        notes.append(f"{len(skipped)} not attempted: {skipped[0].reason}")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def visible(text: str) -> str:
    """Text with its terminal control characters written out (ESC as \\x1b), so that what a learner's
    code prints can neither move the cursor nor recolour check's report."""
    return CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def printed_lines(printed: Printed | None, indent: str = "      ") -> list[str]:
    """What the learner's code printed, as report lines: a heading, each line after "| ", and a line
    saying how much was printed when it was cut (past PRINTED_LINES lines, or PRINTED_LIMIT bytes)."""
    if printed is None or printed.total == 0:
        return []
    # Lines end at "\n" alone: a "\r" or a form feed is one more character to make visible.
    lines = printed.text.removesuffix("\n").split("\n")
    shown = [f"{indent}| {visible(line)}" for line in lines[:PRINTED_LINES]]
    if printed.cut or len(lines) > PRINTED_LINES:
        shown.append(
            f"{indent}(cut: your code printed {printed.total:,} bytes here; check shows the first"
            f" {PRINTED_LINES} lines and {PRINTED_LIMIT} bytes)"
        )
    return [f"{indent}your code printed:", *shown]


def case_lines(result: CaseResult, shared: frozenset[str] = frozenset()) -> list[str]:
    """A case's lines under its level: the first says pass or fail (an invalid case refused by a
    crash says so instead), the details follow indented, then what the learner's code printed on it
    (a passing case shows its line for that). A note in `shared` is said once for the level
    (level_lines), not on each case's line."""
    printed = printed_lines(result.printed)
    lines = result.lines or ([result.case.id] if printed else [])
    if not lines:
        return []
    first = lines[0] if result.note in shared or not result.lines else _joined(lines[0], result.note)
    first = f"  {first}" if result.crashed else f"  {result.status} {first}"
    return [first, *(f"  {line}" for line in lines[1:]), *printed]


def level_lines(results: list[CaseResult]) -> list[str]:
    """Each case's lines, then each note that several cases share, once, with how many share it."""
    counts: dict[str, int] = {}
    for result in results:
        if result.lines and result.note:
            counts[result.note] = counts.get(result.note, 0) + 1
    shared = frozenset(note for note, n in counts.items() if n > 1)
    lines = [line for result in results for line in case_lines(result, shared)]
    for note in (n for n in counts if n in shared):  # in the order the cases said them
        ids = [r.case.id for r in results if r.lines and r.note == note]
        named = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        lines.append(f"  on {len(ids)} of the cases above ({named}): {note}")
    return lines


def _not_attempted(by_level: dict[int, list[CaseResult]]) -> str:
    skipped = {n: sum(r.status == "skip" for r in rs) for n, rs in by_level.items()}
    levels = [n for n, count in sorted(skipped.items()) if count]
    if not levels:
        return ""
    count = sum(skipped.values())
    verb = "was" if count == 1 else "were"
    return f"{_counted(count, 'case')} {verb} not attempted ({_level_numbers(levels)})"


def describe_function(path: Path, hello: Hello, dtype: str = "float64") -> str:
    held = "" if dtype == "float64" else f", held to the {dtype} budget"
    layered = [name for name in (hello.layer, hello.rotary) if name is not None]
    if layered:
        also = f"{' and '.join(layered)} on {_level_numbers([level.number for level in cases.LAYER_LEVELS])}"
        if hello.function is None:
            core = spoken("scaled_dot_product_attention", hello.language)
            not_run = _level_numbers([level.number for level in cases.CORE_LEVELS])
            checking = f"Checking {path} ({hello.language}{held})"
            return f"{checking}: {also}; it has no {core}, so {not_run} are not run."
        core = describe_function(path, dataclasses.replace(hello, layer=None, rotary=None), dtype)
        return f"{core[:-1]}; {also}."
    if hello.language == "JavaScript":
        args = "(query, key, value, options)" if hello.takes_options else "(query, key, value), no options"
    elif hello.option_names:
        args = f"(query, key, value, {', '.join(n for n in OPTION_NAMES if n in hello.option_names)})"
    else:
        args = "(query, key, value), no options"
    return f"Checking {path} ({hello.language}{held}): {hello.function} takes {args}."


def check(
    path: Path,
    fixtures_dir: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory: int = DEFAULT_MEMORY,
    run_all: bool = False,
    dtype: str = "float64",
    say: Callable[[str], None] = print,
    say_error: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    failure_first: bool = False,
    start: bool = False,
) -> int:
    """Run the levels and say how they went; the exit code. `dtype` is the one the learner's
    function computes in: the tolerance rule's budget, and the cases outside the contract there
    (inputs or scores the dtype cannot hold) are left out. With `failure_first` (--watch) the
    lines of the first failing level come first, before the levels that pass. A file that cannot be
    run at all is one line to `say_error` (after what its code printed while loading, if anything)."""
    try:
        learner = LearnerProcess(path, timeout, memory)
        hello = learner.start()
    except LearnerError as error:
        for line in printed_lines(error.printed, indent="  "):
            say(line)
        say_error(f"error: {error}")
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
        beyond_dtype = 0
        for case in load_fixtures(fixtures_dir, kinds=KINDS):
            if "outside_contract" in case.tags:
                continue  # the contract defines no answer there: nothing for a learner to match
            if (
                dtype != "float64"
                and case.kind == "attention"
                and not case.expects_error
                and compare.outside_contract(case, dtype)
            ):
                beyond_dtype += 1  # nor in this dtype
                continue
            by_level.setdefault(cases.level_of(case.tags), []).append(case)
        # The levels whose functions the file has: the layer's and RoPE's follow the core's when it
        # has either of them; a file with only those runs only those (and counts the core's before).
        levels = [level for level in cases.LEVELS if runs_on(level, hello)]
        total = levels[-1].number
        first = levels[0].number
        run_numbers = [level.number for level in levels]
        say(describe_function(path, hello, dtype))
        if beyond_dtype:
            left_out = _counted(beyond_dtype, "case")
            say(f"{left_out} left out: outside the contract in {dtype} (inputs or scores it cannot hold).")
        for line in printed_lines(learner.loading_printed, indent="  "):
            say(line.replace("your code printed:", "your code printed while loading:"))
        say("")
        if start:
            for line in start_lines(hello.language):
                say(line)
        failed_levels = []
        ran: dict[int, list[CaseResult]] = {}
        for level in levels:
            n = level.number
            results = ran[n] = [run_case(learner, case, timeout, dtype) for case in by_level.get(n, [])]
            if n == 1 and (aliased := run_aliased(learner, results, timeout, dtype)) is not None:
                results.append(aliased)
            lines = [level_line(n, total, level.name, results)]
            # each case's line (pass or fail) with its details, where it has any
            lines += level_lines(results)
            failed = any(r.status == "fail" for r in results)
            say_level(lines, failed and not failed_levels)
            if failed:
                failed_levels.append(n)
                if not run_all:
                    say("")
                    say(f"Stopped at {level_line(n, total, level.name, results)}.")
                    skipped = [m for m in ran if m < n and ran[m] and all(r.status == "skip" for r in ran[m])]
                    if skipped:
                        earliest, reason = skipped[0], ran[skipped[0]][0].reason
                        guide = level_guide(earliest, hello.language)
                        say(f"Level {earliest} was not attempted ({reason}). {guide}")
                    say(level_guide(n, hello.language))
                    if n < total:
                        later = f"Level {total} was" if n + 1 == total else f"Levels {n + 1}-{total} were"
                        say(f"{later} not run: fix this level first, or add --all.")
                    return 1
        say_level([], True)  # the levels held back, when none failed
        say("")
        not_attempted = _not_attempted(ran)
        if failed_levels:
            text = f"{len(failed_levels)} of {len(run_numbers)} levels fail ({_level_numbers(failed_levels)})"
            say(f"{text}; {not_attempted}." if not_attempted else f"{text}.")
            return 1
        if not_attempted:
            say(f"Every case you attempted passes, but {not_attempted}: see the level lines above.")
        elif first == 1:
            say(f"Every case of all {total} levels passes.")
        else:
            say(f"Every case of {_level_numbers(run_numbers)} passes.")
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
    say_error: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
    clear: Callable[[], None] = lambda: print(CLEAR_SCREEN, end="", flush=True),
    **options,
) -> int:
    """--watch, as Rustlings does: check, then check again each time the file is saved, on a
    cleared screen with the first failing level first. Ctrl-C ends it, exit code 0."""
    try:
        while True:
            saved = _saved(path)
            clear()
            check(path, fixtures_dir, say=say, say_error=say_error, failure_first=True, **options)
            say("")
            say(f"Watching {path}: save it to check again; Ctrl-C stops.")
            while _saved(path) == saved:
                time.sleep(WATCH_POLL)
    except KeyboardInterrupt:  # the learner's process is in a session of its own: check closed it
        say("")
        return 0
