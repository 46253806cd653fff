"""The tolerance rule and the report: the only code that decides whether a port passed.

One rule for every port and dtype, element-wise on the output (DESIGN.md section 5):

    |actual - expected| <= K * u * error_scale,      K = 16

with u the unit roundoff of the dtype the port computes in and error_scale written into each
fixture by the oracle. NaN must meet NaN; where error_scale is 0 (a fully-masked row, Lk = 0) the
output must be exactly +0.0. "Budget used" is the largest |actual - expected| / (K * u *
error_scale), in percent: under 100% passes.

To say which step first went wrong, scores, logits and weights are held to the same kind of rule
with a yardstick of their own: scores to |query| · |key|ᵀ (the float64 dot-product error bound),
logits to |scale| · |query| · |key|ᵀ + |finite mask value| + |logit| (the scores' error carried
through the scale, the mask addition and softcap's rounding), weights to (1 + S_i) * weights (S_i as
in the oracle). An infinite expected value (a masked logit) must be met exactly. Those diagnostics
never decide a pass.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .fixtures import FixtureCase
from .inputs import check_shapes, resolve_scale
from .ports import PortAnswer

K = 16
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
STEPS = ("scores", "logits", "weights", "output")


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

    def to_json(self) -> dict:
        data = asdict(self)
        data["steps"] = [asdict(s) for s in self.steps]
        return _finite_json(data)


def _finite_json(value):
    """NaN and infinities as strings, as in the fixtures, so the report is strict JSON."""
    if isinstance(value, dict):
        return {k: _finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_json(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return "NaN" if np.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def normalize_message(message: str) -> str:
    """TypeScript spells three argument names its own way; the rest of a message is shared."""
    for camel, snake in (("attnMask", "attn_mask"), ("enableGqa", "enable_gqa"), ("isCausal", "is_causal")):
        message = message.replace(camel, snake)
    return message


def check_step(
    step: str, actual: np.ndarray, expected: np.ndarray, error_scale: np.ndarray, unit_roundoff: float
) -> StepCheck:
    """Element-wise |actual - expected| <= K * u * error_scale, with NaN and +0.0 held exactly."""
    actual = np.asarray(actual, dtype=np.float64)
    if actual.shape != expected.shape:
        return StepCheck(
            step, False, np.inf, np.inf, None, None, None,
            f"{step} has shape {list(actual.shape)}, expected {list(expected.shape)}",
        )  # fmt: skip
    if expected.size == 0:
        return StepCheck(step, True, 0.0, 0.0, None, None, None)
    expected_nan = np.isnan(expected)
    actual_nan = np.isnan(actual)
    if (expected_nan != actual_nan).any():
        index = tuple(int(i) for i in np.argwhere(expected_nan != actual_nan)[0])
        what = "NaN where a number was expected" if actual_nan[index] else "a number where NaN was expected"
        return StepCheck(
            step, False, np.inf, np.inf, index, float(actual[index]), float(expected[index]),
            f"{step}{list(index)} is {what}",
        )  # fmt: skip
    budget = K * unit_roundoff * np.where(expected_nan, 0.0, error_scale)
    with np.errstate(invalid="ignore"):
        error = np.where(expected_nan, 0.0, np.abs(actual - expected))
    # An infinity is met only by the same infinity (inf - inf is NaN, not an error of 0).
    infinite = np.isinf(expected) | np.isinf(actual)
    error = np.where(infinite, np.where(actual == expected, 0.0, np.inf), error)
    budget = np.where(infinite, 0.0, budget)
    # Exact cells (budget 0) must match exactly, and a zero there must be +0.0.
    exact = budget == 0
    wrong_sign = exact & (expected == 0) & (np.signbit(actual) != np.signbit(expected))
    with np.errstate(divide="ignore", invalid="ignore"):
        used = np.where(exact, np.where(error > 0, np.inf, 0.0), error / budget)
    used = np.where(wrong_sign, np.inf, used)
    used = np.where(np.isnan(used), np.inf, used)  # inf - inf and the like
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(used)), used.shape))
    most = float(used[index])
    problem = None
    if wrong_sign.any():
        index = tuple(int(i) for i in np.argwhere(wrong_sign)[0])
        problem = f"{step}{list(index)} is -0.0 where +0.0 is required"
    return StepCheck(
        step,
        bool(most <= 1.0),
        most,
        float(np.max(error)),
        index,
        float(actual[index]),
        float(expected[index]),
        problem,
    )


def float64_error_scale(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, weights: np.ndarray, scale: float
) -> np.ndarray:
    """The oracle's error_scale, (1 + S_i) * (|weights| · |value|) with S_i = |scale| * max_j
    sum_t |q_it k_jt| (every key, masked or not), computed in float64 for inputs without a float
    mask, where the oracle would take hours (the benches): float64 weights stand in for the exact
    ones. numpy arrays, or torch tensors so that a GPU keeps the work. query [..., Lq, E],
    key [..., Lk, E], value [..., Lk, Ev], weights [..., Lq, Lk] -> [..., Lq, Ev]."""
    magnitude = abs(query) @ abs(key).swapaxes(-1, -2)  # [..., Lq, Lk]
    if isinstance(magnitude, np.ndarray):
        row_max = magnitude.max(axis=-1, keepdims=True, initial=0.0)  # [..., Lq, 1]
    else:
        row_max = magnitude.amax(dim=-1, keepdim=True)  # [..., Lq, 1]
    return (1 + abs(scale) * row_max) * (abs(weights) @ abs(value))  # [..., Lq, Ev]


def step_error_scales(case: FixtureCase) -> dict[str, np.ndarray]:
    """The yardstick of each step for one valid case (see the module docstring)."""
    inputs, params, expected = case.inputs, case.params, case.expected
    query, key = inputs["query"], inputs["key"]
    shapes = check_shapes(query.shape, key.shape, inputs["value"].shape, None, params["enable_gqa"])
    if shapes.group_size != 1:
        key = np.repeat(key, shapes.group_size, axis=-3)
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(query) @ np.swapaxes(np.abs(key), -1, -2)  # [B..., Hq, Lq, Lk]
    scale = abs(resolve_scale(params["scale"], shapes.features))
    spread = scale * np.max(magnitude, axis=-1, keepdims=True, initial=0.0)  # [B..., Hq, Lq, 1]
    mask = inputs["attn_mask"]
    mask_magnitude = np.zeros(magnitude.shape)  # [B..., Hq, Lq, Lk]  |finite float-mask value|
    if mask is not None and mask.dtype != bool:
        mask_magnitude = np.broadcast_to(np.where(np.isfinite(mask), np.abs(mask), 0.0), magnitude.shape)
        spread = spread + np.max(mask_magnitude, axis=-1, keepdims=True, initial=0.0)
    logit_magnitude = np.where(np.isfinite(expected.logits), np.abs(expected.logits), 0.0)
    return {
        "scores": magnitude,
        "logits": scale * magnitude + mask_magnitude + logit_magnitude,
        "weights": (1 + spread) * np.abs(expected.weights),
        "output": expected.error_scale,
    }


def _first_divergent_step(checks: list[StepCheck]) -> str | None:
    """The earliest step out of its budget, named only when the output itself failed (a float32
    weight that underflows to 0 is out of its own yardstick yet harmless to the output)."""
    if not checks or checks[-1].passed:
        return None
    return next(c.step for c in checks if not c.passed)


def judge(case: FixtureCase, port: str, dtype: str, answer: PortAnswer) -> CaseVerdict:
    """One port's answer to one case, held to the rule."""
    if answer.crash is not None:
        return CaseVerdict(case.id, port, dtype, False, problem=f"crashed: {answer.crash}")
    if case.expects_error:
        kind, message = case.expected_error
        if answer.error is None:
            return CaseVerdict(case.id, port, dtype, False, problem=f"raised nothing, expected {kind} error")
        got_kind, got_message = answer.error
        if got_kind != kind:
            return CaseVerdict(
                case.id, port, dtype, False, problem=f"raised {got_kind} ({got_message}), expected {kind}"
            )
        if normalize_message(got_message) != message:
            return CaseVerdict(
                case.id, port, dtype, False, problem=f"message {got_message!r}, expected {message!r}"
            )
        return CaseVerdict(case.id, port, dtype, True)
    if answer.error is not None:
        kind, message = answer.error
        return CaseVerdict(case.id, port, dtype, False, problem=f"raised {kind}: {message}")
    truth = {step: getattr(case.expected, step) for step in STEPS}
    return _hold_steps(case, port, dtype, answer.steps or {}, truth, UNIT_ROUNDOFF[dtype])


def _hold_steps(
    case: FixtureCase,
    port: str,
    dtype: str,
    steps: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    unit_roundoff: float,
) -> CaseVerdict:
    """Every step both sides have, each held to its yardstick; the output decides."""
    if "output" not in steps or "output" not in truth:
        return CaseVerdict(case.id, port, dtype, False, problem="no output")
    scales = step_error_scales(case)
    checks = [
        check_step(step, steps[step], truth[step], scales[step], unit_roundoff)
        for step in STEPS
        if step in steps and step in truth
    ]
    output = checks[-1]
    return CaseVerdict(
        case.id,
        port,
        dtype,
        output.passed,
        output.budget_used,
        output.max_abs_error,
        output.index,
        output.actual,
        output.expected,
        _first_divergent_step(checks),
        output.problem,
        checks,
    )


def judge_pair(
    case: FixtureCase, port: str, dtype: str, answer: PortAnswer, other: PortAnswer, other_dtype: str
) -> CaseVerdict:
    """Two ports against each other, directly: the other port's output stands in for the truth,
    and the budget is the sum of both ports' budgets (each may be off by its own)."""
    if case.expects_error:
        if answer.error is not None and other.error is not None and answer.error[0] == other.error[0]:
            return CaseVerdict(case.id, port, dtype, True)
        return CaseVerdict(
            case.id, port, dtype, False, problem=f"errors differ: {answer.error} vs {other.error}"
        )
    if answer.steps is None or other.steps is None:
        problem = answer.crash or other.crash or str(answer.error or other.error)
        return CaseVerdict(case.id, port, dtype, False, problem=f"no output to compare: {problem}")
    truth = {step: np.asarray(values, np.float64) for step, values in other.steps.items()}
    unit_roundoff = UNIT_ROUNDOFF[dtype] + UNIT_ROUNDOFF[other_dtype]
    return _hold_steps(case, port, dtype, answer.steps, truth, unit_roundoff)


def format_budget(fraction: float) -> str:
    """A share of the budget in percent; past 1e6 % the digits say nothing more."""
    if fraction > 1e4:
        return "> 1e6 %"
    return f"{100 * fraction:.1f}%"


def format_verdict(verdict: CaseVerdict) -> str:
    """One report line: status, port, case, budget used, max error with its index, first bad step."""
    status = "PASS" if verdict.passed else "FAIL"
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
