"""The judge and the report: the only code that decides whether a port passed.

The rule is derived once, by the oracle: python/attention_port/golden/rule.py says it and why, and
writes into every valid case, per dtype, the budget of each output element (the bound on |actual -
expected|, with the fallback where it applies) and whether the case is outside the contract. The
judge only compares, element-wise on the output:

    |actual - expected| <= expected.budgets[dtype].output

Exactly:
  - NaN meets NaN only; an infinity meets only the same infinity;
  - a finite expected value so close to the largest number that its budget reaches past it is also
    met by the infinity of its sign (the port rounded up, as it may);
  - where the budget is infinite (it overflowed, or the weights are not determined), the fallback
    bounds |actual| instead: a finite result no larger than the largest |value| the row averages;
  - the sign of zero is demanded only where the contract defines it: a fully-masked row (or Lk = 0)
    is +0.0. Elsewhere -0.0 and +0.0 are the same number;
  - a case the budget marks outside the contract in the port's dtype (its scores overflow the
    dtype, or a narrower dtype cannot hold its inputs) is reported as such, never as a pass or a
    failure.

The layer and RoPE (a case of kind "layer" or "rope") are held the same way to their own budgets
(rule.py derives them from the oracle's error sizes; `error_scale` is float64's yardstick).
Exactly: where the budget is 0 (a RoPE feature whose angle is 0 or past rotary_dim, a fully-masked
layer row) the answer is the oracle's bit for bit, as float64 holds it or rounded once to the
port's dtype. With need_weights the per-head weights are held to their budget, and a fully-masked
row's to +0.0.

"Budget used" is the largest |actual - expected| / budget, in percent: up to 100% passes.

To say which step first went wrong, scores, logits and weights are held to the same kind of rule
with a yardstick of their own: scores to |query| · |key|ᵀ (the float64 dot-product error bound),
logits to |scale| · |query| · |key|ᵀ + |finite mask value| + |logit| (the scores' error carried
through the scale, the mask addition and softcap's rounding), weights to (1 + spread) * weights, plus
the subnormal floor. Those diagnostics never decide a pass.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from attention_port import vocabulary
from attention_port.golden.expected import ExpectedValues
from attention_port.golden.reader import FixtureCase, encode_numbers
from attention_port.golden.rule import LARGEST, TINY, UNIT_ROUNDOFF, K, rounded
from attention_port.golden.rule import float64_error_scale as float64_error_scale  # for the benches
from attention_port.inputs import check_shapes, format_number, resolve_scale

STEPS = ("scores", "logits", "weights", "output")


@dataclass(frozen=True)
class PortAnswer:
    """What one port gave for one case, as the judge takes it: its steps, the error it raised, or
    how it broke. ports.py (verify) and check.py (a learner's file) make these; neither is imported
    here."""

    steps: dict[str, np.ndarray] | None = None  # scores, logits, weights, output (as float64)
    error: tuple[str, str] | None = None  # (kind, message) of an AttentionInputError
    crash: str | None = None  # anything else: an unexpected exception, a missing result


@dataclass(frozen=True)
class StepCheck:
    """One step of one case held to its yardstick."""

    step: str
    passed: bool
    budget_used: float  # max |actual - expected| / (K u scale), as a fraction (1.0 = the whole budget)
    max_abs_error: float
    index: tuple[int, ...] | None  # where the budget was used most
    actual: float | None
    expected: float | None
    problem: str | None = None  # a shape, NaN or signed-zero mismatch, said in words


@dataclass(frozen=True)
class CaseVerdict:
    """The report line of one port on one case."""

    case_id: str
    port: str
    dtype: str
    passed: bool
    budget_used: float | None = None  # output budget used, fraction
    max_abs_error: float | None = None
    index: tuple[int, ...] | None = None
    actual: float | None = None
    expected: float | None = None
    first_divergent_step: str | None = None
    problem: str | None = None
    steps: list[StepCheck] = field(default_factory=list)
    outside: str | None = None  # "outside the contract: ..." when the contract defines no answer

    def to_json(self) -> dict:
        """Strict JSON: NaN and infinities as strings, as in the fixtures (asdict includes the steps)."""
        return encode_numbers(asdict(self))


def normalize_message(message: str) -> str:
    """A TypeScript port's message in Python's spelling: TypeScript spells some argument names its
    own way (attnMask, xQ); the rest of a message is shared."""
    return vocabulary.spelled(message, "python")


def cell(step: str, index: tuple[int, ...]) -> str:
    """One cell of a step as the reports name it: output[0, 2]."""
    return f"{step}{list(index)}"


@np.errstate(divide="ignore", invalid="ignore", over="ignore")  # inf - inf, x / 0, overflow: sorted out below
def check_step(
    step: str,
    actual: np.ndarray,
    expected: np.ndarray,
    budget: np.ndarray,
    *,
    positive_zero: np.ndarray | None = None,
    limit: float = LARGEST["float64"],
    fallback: np.ndarray | None = None,
) -> StepCheck:
    """Element-wise |actual - expected| <= budget, with NaN, infinities and required +0.0 exact.

    positive_zero marks the cells that must be exactly +0.0 (broadcasts against expected). limit is
    the largest finite number of the port's dtype: an expected value whose budget reaches past it
    is also met by the infinity of its sign. Where the budget is infinite (it overflowed, or the
    weights are not determined), fallback (if given) bounds |actual| instead, an infinite actual
    fails, and a pass says how many cells were held only to that."""
    actual = np.asarray(actual, dtype=np.float64)
    if actual.shape != expected.shape:
        return StepCheck(
            step, False, np.inf, np.inf, None, None, None,
            f"{step} has shape {list(actual.shape)}, expected {list(expected.shape)}",
        )  # fmt: skip
    if expected.size == 0:
        return StepCheck(step, True, 0.0, 0.0, None, None, None)
    budget = np.broadcast_to(np.asarray(budget, dtype=np.float64), expected.shape)
    expected_nan, actual_nan = np.isnan(expected), np.isnan(actual)
    error = np.abs(actual - expected)  # inf - inf is NaN, sorted out below
    budget = np.where(np.isnan(budget), np.inf, budget)  # a NaN yardstick constrains nothing
    used = np.zeros(expected.shape)
    # NaN meets only NaN.
    nan_mismatch = expected_nan != actual_nan
    used[nan_mismatch] = np.inf
    # An infinity meets only the same infinity; a finite value next to the overflow threshold is
    # also met by the infinity of its sign.
    both = ~expected_nan & ~actual_nan
    expected_inf = both & np.isinf(expected)
    used[expected_inf & (actual != expected)] = np.inf
    actual_inf = both & ~np.isinf(expected) & np.isinf(actual)
    same_sign = np.sign(expected) == np.sign(actual)
    # (Not where the budget itself overflowed: there the fallback decides, and it is finite.)
    reaches = np.isfinite(budget) & (np.abs(expected) + budget > limit) & same_sign
    used[actual_inf & ~reaches] = np.inf
    # Finite against finite.
    finite = both & np.isfinite(expected) & np.isfinite(actual)
    bounded = finite & np.isfinite(budget)
    ratio = np.where(budget > 0, error / budget, np.where(error > 0, np.inf, 0.0))
    used[bounded] = ratio[bounded]
    unbounded = finite & ~np.isfinite(budget)
    beyond = np.zeros(expected.shape, dtype=bool)
    if fallback is not None:
        beyond = unbounded & (np.abs(actual) > np.broadcast_to(fallback, expected.shape))
        used[beyond] = np.inf
    # +0.0 where the contract defines it.
    wrong_sign = np.zeros(expected.shape, dtype=bool)
    if positive_zero is not None:
        required = np.broadcast_to(positive_zero, expected.shape)
        wrong_sign = required & (~(actual == 0) | np.signbit(actual)) & ~actual_nan
        used[wrong_sign] = np.inf
    used = np.where(np.isnan(used), np.inf, used)
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(used)), used.shape))
    most = float(used[index])
    got, want = float(actual[index]), float(expected[index])
    problem = None
    if most > 1.0:
        if wrong_sign[index]:
            problem = f"{cell(step, index)} is {got!r} where +0.0 is required (a fully-masked row)"
        elif beyond[index]:
            problem = f"{cell(step, index)} is {got!r}, beyond every value the row averages"
        elif nan_mismatch[index] or not np.isfinite(want) or not np.isfinite(got):
            problem = f"{cell(step, index)} is {got!r} where {want!r} was expected"
    if most <= 1.0 and fallback is not None and unbounded.any():
        count = int(np.count_nonzero(unbounded))
        problem = (
            f"{count} cell(s) held only to the values' reach:"
            " the bound overflowed or the weights are not determined"
        )
    max_error = float(np.max(np.where(finite, error, np.where(used > 0, np.inf, 0.0))))
    return StepCheck(step, bool(most <= 1.0), most, max_error, index, got, want, problem)


def fully_masked_rows(expected: ExpectedValues) -> np.ndarray:
    """[B..., Hq, Lq, 1]: rows whose every logit is -inf (or that have no key): the contract makes
    their weights and output exactly +0.0."""
    return np.all(expected.logits == -np.inf, axis=-1, keepdims=True)


def check_output(case: FixtureCase, actual: np.ndarray, dtype: str) -> StepCheck:
    """The rule itself: one port's output for a valid case, computed in `dtype`, against the
    oracle's and its budget (the cases outside the contract are sorted out before)."""
    budget = case.expected.budgets[dtype]
    return check_step(
        "output",
        actual,
        case.expected.output,
        budget.output,
        positive_zero=fully_masked_rows(case.expected),
        limit=LARGEST[dtype],
        fallback=budget.fallback,
    )


def outside_contract(case: FixtureCase, dtype: str) -> str | None:
    """Why the contract defines no answer for this case in this dtype (the budget says), or None."""
    why = case.expected.budgets[dtype].outside
    return None if why is None else f"outside the contract: {why}"


def step_budgets(case: FixtureCase, dtype: str) -> dict[str, np.ndarray]:
    """The yardstick of each step for one valid case (see the module docstring), as budgets."""
    inputs, params, expected = case.inputs, case.params, case.expected
    u, tiny = UNIT_ROUNDOFF[dtype], TINY[dtype]
    query, key = inputs["query"], inputs["key"]
    shapes = check_shapes(query.shape, key.shape, inputs["value"].shape, None, params["enable_gqa"])
    if shapes.group_size != 1:
        key = np.repeat(key, shapes.group_size, axis=-3)
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.abs(query) @ np.swapaxes(np.abs(key), -1, -2)  # [B..., Hq, Lq, Lk]
        scale = abs(resolve_scale(params["scale"], shapes.features))
        mask = inputs["attn_mask"]
        mask_magnitude = np.zeros(magnitude.shape)  # [B..., Hq, Lq, Lk]  |finite float-mask value|
        if mask is not None and mask.dtype != bool:
            mask_magnitude = np.broadcast_to(np.where(np.isfinite(mask), np.abs(mask), 0.0), magnitude.shape)
        logit_magnitude = np.where(np.isfinite(expected.logits), np.abs(expected.logits), 0.0)
        return {
            "scores": K * u * magnitude + K * tiny,
            "logits": K * u * (scale * magnitude + mask_magnitude + logit_magnitude) + K * tiny,
            "weights": (K * u * (1 + expected.spread[..., None])) * np.abs(expected.weights) + K * tiny,
            "output": expected.budgets[dtype].output,
        }


def _first_divergent_step(checks: list[StepCheck]) -> str | None:
    """The earliest step out of its budget, named only when the output itself failed (a float32
    weight that underflows to 0 is out of its own yardstick yet harmless to the output), and only
    when the port gave a step before the output (torch-sdpa and the SIMD port give the output
    alone: "output" would say nothing)."""
    if checks[-1].passed or len(checks) == 1:
        return None
    return next(c.step for c in checks if not c.passed)


def judge(case: FixtureCase, port: str, dtype: str, answer: PortAnswer) -> CaseVerdict:
    """One port's answer to one case, held to the rule."""
    verdict = functools.partial(CaseVerdict, case.id, port, dtype)
    if case.kind != "attention" and not case.expects_error and answer.error is None:
        return judge_layer(case, port, dtype, answer)
    if answer.crash is not None:
        return verdict(False, problem=f"crashed: {answer.crash}")
    if case.expects_error:
        kind, message = case.expected_error
        if answer.error is None:
            return verdict(False, problem=f"raised nothing, expected {kind} error")
        got_kind, got_message = answer.error
        if got_kind != kind:
            return verdict(False, problem=f"raised {got_kind} ({got_message}), expected {kind}")
        if normalize_message(got_message) != message:
            return verdict(False, problem=f"message {got_message!r}, expected {message!r}")
        return verdict(True)
    if answer.error is not None:
        kind, message = answer.error
        return verdict(False, problem=f"raised {kind}: {message}")
    outside = outside_contract(case, dtype)
    if outside is not None:
        return verdict(False, problem=outside, outside=outside)
    truth = {step: getattr(case.expected, step) for step in STEPS}
    budget = case.expected.budgets[dtype]
    budgets = step_budgets(case, dtype)
    return _hold_steps(case, port, dtype, answer.steps or {}, truth, budgets, dtype, budget.fallback)


def _hold_steps(
    case: FixtureCase,
    port: str,
    dtype: str,
    steps: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    budgets: dict[str, np.ndarray],
    dtype_for_limit: str,
    fallback: np.ndarray | None,
) -> CaseVerdict:
    """Every step both sides have, each held to its budget; the output decides."""
    if "output" not in steps or "output" not in truth:
        return CaseVerdict(case.id, port, dtype, False, problem="no output")
    masked = fully_masked_rows(case.expected)  # [B..., Hq, Lq, 1]
    limit = LARGEST[dtype_for_limit]
    checks = [
        check_step(
            step,
            steps[step],
            truth[step],
            budgets[step],
            positive_zero=masked if step in ("weights", "output") else None,
            limit=limit,
            fallback=fallback if step == "output" else None,
        )
        for step in STEPS
        if step in steps and step in truth
    ]
    output = checks[-1]  # the verdict's figures are the output's
    shared = ("budget_used", "max_abs_error", "index", "actual", "expected", "problem")
    return CaseVerdict(
        case.id,
        port,
        dtype,
        output.passed,
        **{name: getattr(output, name) for name in shared},
        first_divergent_step=_first_divergent_step(checks),
        steps=checks,
    )


def judge_pair(
    case: FixtureCase, port: str, dtype: str, answer: PortAnswer, other: PortAnswer, other_dtype: str
) -> CaseVerdict:
    """Two ports against each other, directly: the other port's output stands in for the truth,
    and the budget is the sum of both ports' budgets (each may be off by its own)."""
    verdict = functools.partial(CaseVerdict, case.id, port, dtype)
    if case.expects_error:
        if answer.error is not None and other.error is not None and answer.error[0] == other.error[0]:
            return verdict(True)
        return verdict(False, problem=f"errors differ: {answer.error} vs {other.error}")
    outside = outside_contract(case, dtype) or outside_contract(case, other_dtype)
    if outside is not None:
        return verdict(False, problem=outside, outside=outside)
    if answer.steps is None or other.steps is None:
        problem = answer.crash or other.crash or str(answer.error or other.error)
        return verdict(False, problem=f"no output to compare: {problem}")
    truth = {step: np.asarray(values, np.float64) for step, values in other.steps.items()}
    mine, theirs = step_budgets(case, dtype), step_budgets(case, other_dtype)
    budgets = {step: mine[step] + theirs[step] for step in STEPS}
    narrower = dtype if LARGEST[dtype] < LARGEST[other_dtype] else other_dtype
    # Where the summed budget is infinite, the narrower dtype's fallback holds (its budget is
    # infinite wherever the wider one's is).
    fallback = case.expected.budgets[narrower].fallback
    return _hold_steps(case, port, dtype, answer.steps, truth, budgets, narrower, fallback)


def distinct_digits(a: float, b: float) -> tuple[str, str]:
    """Two numbers written with the fewest significant digits (six at least) that tell them apart,
    -0 kept: 3.2417402 and 3.2417397, never 3.24174 twice. The twin of distinctDigits in
    typescript/conformance/kit.ts."""

    def text(x: float, digits: int) -> str:
        if x == 0 or not math.isfinite(x):
            return "-0" if x == 0 and math.copysign(1.0, x) < 0 else format_number(x)
        return format_number(float(f"{x:.{digits}g}"))

    for digits in range(6, 17):
        shown = text(a, digits), text(b, digits)
        if shown[0] != shown[1]:
            return shown
    return text(a, 17), text(b, 17)


def format_budget(fraction: float) -> str:
    """A share of the budget in percent; past 1e6 % the digits say nothing more."""
    if fraction > 1e4:
        return "> 1e6 %"
    return f"{100 * fraction:.1f}%"


def format_verdict(verdict: CaseVerdict) -> str:
    """One report line: status, port, case, budget used, max error with its index, first bad step."""
    status = "OUT " if verdict.outside else "PASS" if verdict.passed else "FAIL"
    head = f"{status}  {verdict.port:<34} {verdict.case_id:<34}"
    if verdict.budget_used is None:
        detail = verdict.problem or "raised the expected error"
        return f"{head} {detail}"
    budget = format_budget(verdict.budget_used)
    where = "" if verdict.index is None else f" at {list(verdict.index)}"
    values = "" if verdict.actual is None else f" ({verdict.actual!r} vs {verdict.expected!r})"
    line = f"{head} budget {budget}  max err {verdict.max_abs_error:.2e}{where}{values}"
    if verdict.first_divergent_step is not None:
        line += f"  first diverged: {verdict.first_divergent_step}"
    if verdict.problem:
        line += f"  [{verdict.problem}]"
    return line


def failed(verdict: CaseVerdict) -> bool:
    """A failure: neither a pass nor a case outside the contract."""
    return not verdict.passed and verdict.outside is None


def _layer_target(expected, budget: np.ndarray, dtype: str, actual: np.ndarray) -> np.ndarray:
    """What a port computing in `dtype` must give: the oracle's output, and where the answer is
    exact (its budget is 0: RoPE's unturned features, a fully-masked layer row's b_o) that value
    bit for bit, as float64 holds it or rounded once to the dtype (a port may compute those steps
    wider than its dtype, as the TypeScript layer does around a float32 core)."""
    if np.shape(actual) != expected.output.shape:
        return expected.output  # check_step reports the shape
    exact_value = rounded(expected.output, dtype)
    same = np.asarray(actual, dtype=np.float64) == exact_value
    return np.where((budget == 0) & same, exact_value, expected.output)


def judge_layer(case: FixtureCase, port: str, dtype: str, answer: PortAnswer) -> CaseVerdict:
    """One port's answer to a layer or RoPE case, held to the rule."""
    verdict = functools.partial(CaseVerdict, case.id, port, dtype)
    if answer.crash is not None:
        return verdict(False, problem=f"crashed: {answer.crash}")
    if case.expects_error or answer.error is not None:
        return judge(case, port, dtype, answer)
    steps = answer.steps or {}
    if "output" not in steps:
        return verdict(False, problem="no output")
    expected, budget = case.expected, case.expected.budgets[dtype]
    target = _layer_target(expected, budget.output, dtype, steps["output"])
    checks = [check_step("output", steps["output"], target, budget.output, limit=LARGEST[dtype])]
    if expected.weights is not None:
        if "weights" not in steps:
            return verdict(False, problem="need_weights gave no weights")
        masked = np.all(expected.weights == 0, axis=-1, keepdims=True)
        checks.insert(
            0, check_step("weights", steps["weights"], expected.weights, budget.weights, positive_zero=masked)
        )
    if expected.present_key is not None:
        for name in ("present_key", "present_value"):
            if name not in steps:
                return verdict(False, problem=f"return_cache gave no {name}")
            checks.insert(-1, check_step(name, steps[name], getattr(expected, name), getattr(budget, name)))
    output = checks[-1]
    passed = all(c.passed for c in checks)
    shared = ("budget_used", "max_abs_error", "index", "actual", "expected")
    problem = next((c.problem or f"{c.step} out of its budget" for c in checks if not c.passed), None)
    return verdict(passed, **{name: getattr(output, name) for name in shared}, problem=problem, steps=checks)
