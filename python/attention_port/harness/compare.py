"""The tolerance rule and the report: the only code that decides whether a port passed.

One rule for every port and dtype, element-wise on the output:

    |actual - expected| <= K * u * (1 + spread_i) * magnitude_it  +  K * tiny * error_floor_it / 2^-1074

K = 16; u is the unit roundoff and tiny the smallest subnormal of the dtype the port computes in;
spread (S_i), magnitude (sum_j |w_ij| |v_jt|) and error_floor (2^-1074 * sum_j (1 + |v_jt|)) are
written into each fixture by the oracle, which says why (its `error_scale` is (1 + spread) *
magnitude). The first term is the error of a float computation carried through softmax and the
weighted sum; the second lets every term of the sum lose one step of the smallest subnormal, which
is all a result rounded below the normal range can promise. The product is formed in that order so
that it overflows only when it is beyond any use; then the rule falls back to what any weighted
average promises: a finite result no larger in size than the largest |value| the row averages. It
falls back the same way where K * u * (1 + spread_i) reaches 1: the dtype then fixes the logits only
to within 1 or more, so the weights are not determined (logits that round alike split a weight the
exact ones give to one key), and no bound built from the exact weights holds.

Exactly:
  - NaN meets NaN only; an infinity meets only the same infinity;
  - a finite expected value so close to the largest number that its budget reaches past it is also
    met by the infinity of its sign (the port rounded up, as it may);
  - the sign of zero is demanded only where the contract defines it: a fully-masked row (or Lk = 0)
    is +0.0. Elsewhere -0.0 and +0.0 are the same number;
  - a case whose score_bound exceeds the largest number of the port's dtype, or (for a dtype
    narrower than float64) whose inputs it cannot hold (larger than its largest number, or so
    small that they round to 0), is outside the contract: it is reported as such, never as a pass
    or a failure.

The layer and RoPE (a case of kind "layer" or "rope") are held to the same kind of rule, with the
yardstick the oracle writes for them (`error_scale`, in units of u; docs/design.md derives it):

    |actual - expected| <= K * u * error_scale + K * tiny * n

with n the number of terms that make one element (Hq·Ev + 1 for the layer, 2 for RoPE). For the
layer error_scale carries the projections' dot-product bounds through the core's spread and the
out-projection; for RoPE it is (|x_a| + |x_b|)(1 + |angle|): the pair's products, and the phase,
which a port rounds to about u·|angle|. Exactly: a RoPE feature whose angle is 0 (position 0) or
past rotary_dim is x itself, bit for bit (as float64 holds it, or rounded once to the port's
dtype); a fully-masked row of the layer is b_o so, exactly (0 without a bias, of either sign).
With need_weights the per-head weights are held to K * u * weights_scale + K * tiny, and a
fully-masked row's to +0.0.

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
from attention_port.fixtures.expected import ExpectedValues
from attention_port.fixtures.reader import FixtureCase, encode_numbers
from attention_port.inputs import check_shapes, format_number, resolve_scale

K = 16
UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# The smallest subnormal and the largest finite number of each dtype.
TINY = {"float64": 2.0**-1074, "float32": 2.0**-149, "float16": 2.0**-24, "bfloat16": 2.0**-133}
TINY_EXPONENT = {dtype: math.frexp(tiny)[1] - 1 for dtype, tiny in TINY.items()}  # tiny = 2^exponent
LARGEST = {
    "float64": float(np.finfo(np.float64).max),
    "float32": float(np.finfo(np.float32).max),
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
}
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


def output_budget(expected: ExpectedValues, dtype: str) -> np.ndarray:
    """The rule's bound on |actual - expected| for every output element (inf where it overflows)."""
    u = UNIT_ROUNDOFF[dtype]
    with np.errstate(over="ignore", invalid="ignore"):
        factor = K * u * (1 + expected.spread[..., None])  # [B..., Hq, Lq, 1]
        relative = factor * expected.magnitude
        # tiny / 2^-1074 as a power of two applied by ldexp: for float16 it is 2^1050, beyond
        # float64 as a number, and the floor overflowing with it would drop the whole bound.
        floor = K * np.ldexp(expected.error_floor, TINY_EXPONENT[dtype] + 1074)
        # Where the factor reaches 1, a port's logits may be off by 1 or more, so its weights are
        # not determined even roughly (two logits the dtype rounds alike split a weight the exact
        # ones give to one key): no bound built from the exact weights holds, and the fallback
        # (a weighted average of the values the row can see) decides, as where the bound overflows.
        return np.where(factor >= 1, np.inf, relative + floor)


def value_reach(case: FixtureCase) -> np.ndarray:
    """[B..., Hq, Lq, Ev]: the largest |value| each output element averages (the keys whose logit
    is not -inf). A weighted average can never be larger: the rule's fallback."""
    value = case.inputs["value"]
    logits = case.expected.logits
    group = logits.shape[-3] // value.shape[-3] if logits.ndim >= 3 and value.shape[-3] else 1
    if group != 1:
        value = np.repeat(value, group, axis=-3)
    kept = (logits != -np.inf)[..., None]  # [B..., Hq, Lq, Lk, 1]
    with np.errstate(invalid="ignore"):
        sizes = np.where(kept, np.abs(value)[..., None, :, :], 0.0)  # [B..., Hq, Lq, Lk, Ev]
    return np.max(sizes, axis=-2, initial=0.0)


def output_reach(case: FixtureCase, dtype: str) -> np.ndarray:
    """The rule's fallback for a port computing in `dtype`: value_reach, with room for the values
    themselves rounded to that dtype (a few units beyond float64's)."""
    return value_reach(case) * (1 + K * UNIT_ROUNDOFF[dtype]) + K * TINY[dtype]


def check_output(case: FixtureCase, actual: np.ndarray, dtype: str) -> StepCheck:
    """The rule itself: one port's output for a valid case, computed in `dtype`, against the
    oracle's (the cases outside the contract are sorted out before, by outside_contract)."""
    return check_step(
        "output",
        actual,
        case.expected.output,
        output_budget(case.expected, dtype),
        positive_zero=fully_masked_rows(case.expected),
        limit=LARGEST[dtype],
        fallback=output_reach(case, dtype),
    )


def float64_error_scale(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    weights: np.ndarray,
    scale: float,
    allowed: np.ndarray | None = None,
) -> np.ndarray:
    """The oracle's error_scale, (1 + S_i) * (|weights| · |value|) with S_i = |scale| * max_j
    sum_t |q_it k_jt| over the cells `allowed` (broadcast to [..., Lq, Lk]; every cell if None)
    lets attend, computed in float64 for finite inputs without a float mask, where the oracle would
    take hours (the benches): float64 weights stand in for the exact ones. numpy arrays, or torch
    tensors so that a GPU keeps the work. query [..., Lq, E], key [..., Lk, E], value [..., Lk, Ev],
    weights [..., Lq, Lk] -> [..., Lq, Ev]."""
    magnitude = abs(query) @ abs(key).swapaxes(-1, -2)  # [..., Lq, Lk]
    if allowed is not None:
        magnitude = magnitude * allowed  # a cell a mask excludes cannot pass its rounding on
    if isinstance(magnitude, np.ndarray):
        row_max = magnitude.max(axis=-1, keepdims=True, initial=0.0)  # [..., Lq, 1]
    else:
        row_max = magnitude.amax(dim=-1, keepdim=True)  # [..., Lq, 1]
    return (1 + abs(scale) * row_max) * (abs(weights) @ abs(value))  # [..., Lq, Ev]


def outside_contract(case: FixtureCase, dtype: str) -> str | None:
    """Why the contract defines no answer for this case in this dtype, or None."""
    largest = LARGEST[dtype]
    if float(case.expected.score_bound) > largest:
        where = "" if dtype == "float64" else f" in {dtype}"
        return f"outside the contract: score overflow{where}"
    if dtype != "float64":
        sizes = [
            np.abs(np.asarray(case.inputs[name], dtype=np.float64)) for name in ("query", "key", "value")
        ]
        mask = case.inputs["attn_mask"]
        if mask is not None and mask.dtype != bool:
            sizes.append(np.abs(mask))
        sizes.append(
            np.abs(np.array([case.params["scale"] or 0.0, case.params["softcap"]], dtype=np.float64))
        )
        # Too large, or so small (below half the smallest subnormal) that the dtype rounds it to 0,
        # after which inf * it is NaN where float64 gives inf: the dtype cannot hold the inputs.
        if any(np.any(np.isfinite(s) & ((s > largest) | ((s > 0) & (s < TINY[dtype] / 2)))) for s in sizes):
            return f"outside the contract: inputs beyond the {dtype} range"
    return None


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
            "output": output_budget(expected, dtype),
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
    return _hold_steps(case, port, dtype, answer.steps or {}, truth, step_budgets(case, dtype), dtype)


def _hold_steps(
    case: FixtureCase,
    port: str,
    dtype: str,
    steps: dict[str, np.ndarray],
    truth: dict[str, np.ndarray],
    budgets: dict[str, np.ndarray],
    dtype_for_limit: str,
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
            fallback=output_reach(case, dtype_for_limit) if step == "output" else None,
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
    return _hold_steps(case, port, dtype, answer.steps, truth, budgets, narrower)


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


def _layer_budget(case: FixtureCase, dtype: str) -> np.ndarray:
    """The layer's or RoPE's budget per output element (see the module docstring); 0 where the
    answer is exact (_layer_target says what it is there)."""
    u, tiny = UNIT_ROUNDOFF[dtype], TINY[dtype]
    expected = case.expected
    if case.kind == "rope":
        exact = expected.error_scale == 0  # angle 0, or past rotary_dim
        return np.where(exact, 0.0, K * u * expected.error_scale + K * tiny * 2)
    terms = case.inputs["w_o"].shape[1] + 1
    budget = K * u * expected.error_scale + K * tiny * terms
    return np.where(_no_attention(case), 0.0, budget)  # a fully-masked row: b_o exactly


def _layer_target(case: FixtureCase, dtype: str, actual: np.ndarray) -> np.ndarray:
    """What a port computing in `dtype` must give: the oracle's output, and where the answer is
    exact (RoPE's unturned features, a fully-masked layer row's b_o) that value bit for bit, as
    float64 holds it or rounded once to the dtype (a port may compute those steps wider than
    its dtype, as the TypeScript layer does around a float32 core)."""
    expected = case.expected
    if case.kind == "rope":
        exact = expected.error_scale == 0
    else:
        exact = np.broadcast_to(_no_attention(case), expected.output.shape)
    rounded = _rounded(expected.output, dtype)
    if np.shape(actual) != expected.output.shape:
        return expected.output  # check_step reports the shape
    return np.where(exact & (np.asarray(actual, dtype=np.float64) == rounded), rounded, expected.output)


def _cache_budget(case: FixtureCase, name: str, dtype: str) -> np.ndarray:
    """present_key's or present_value's budget: the copied past exactly (as the port's dtype holds
    it), the new keys and values as projections (RoPE's phase included in their yardstick)."""
    expected = getattr(case.expected, name)
    scale = getattr(case.expected, name + "_scale")
    terms = case.inputs["w_k" if name == "present_key" else "w_v"].shape[1] + 1
    held = np.abs(_rounded(expected, dtype) - expected)
    budget = K * UNIT_ROUNDOFF[dtype] * scale + K * TINY[dtype] * terms
    return np.where(scale == 0, held, budget)


def _rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """x rounded to nearest in a port's dtype, back in float64."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "bfloat16":  # no numpy dtype: round float64 to bfloat16's 8 significant bits
        mantissa, exponent = np.frexp(x)
        return np.ldexp(np.round(mantissa * 2**8) / 2**8, exponent)
    return x.astype(_NUMPY_DTYPES[dtype]).astype(np.float64)


_NUMPY_DTYPES = {"float64": np.float64, "float32": np.float32, "float16": np.float16}


def _no_attention(case: FixtureCase) -> np.ndarray:
    """[B..., Lq, 1]: the query rows with no key to attend to in any head (the mask and causality
    exclude every one): their layer output is b_o."""
    x_q = case.inputs["x_q"]
    x_kv = x_q if case.inputs.get("x_kv") is None else case.inputs["x_kv"]
    past = case.inputs.get("past_key")
    cached = 0 if past is None else past.shape[-2]  # P: row i sits at position i + P
    lq, lk = x_q.shape[-2], cached + x_kv.shape[-2]
    heads = case.params["num_heads"]
    allowed = np.ones((*x_q.shape[:-2], heads, lq, lk), dtype=bool)
    if case.params["is_causal"]:
        allowed &= np.tri(lq, lk, k=cached, dtype=bool)
    mask = case.inputs.get("attn_mask")
    if mask is not None:
        allowed &= mask if mask.dtype == bool else np.broadcast_to(mask != -np.inf, allowed.shape)
    none = ~allowed.any(axis=-1)  # [B..., Hq, Lq]
    return none.all(axis=-2)[..., None]  # [B..., Lq, 1]


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
    expected = case.expected
    target, budget = _layer_target(case, dtype, steps["output"]), _layer_budget(case, dtype)
    checks = [check_step("output", steps["output"], target, budget, limit=LARGEST[dtype])]
    if expected.weights is not None:
        if "weights" not in steps:
            return verdict(False, problem="need_weights gave no weights")
        budget = K * UNIT_ROUNDOFF[dtype] * expected.weights_scale + K * TINY[dtype]
        masked = np.all(expected.weights == 0, axis=-1, keepdims=True)
        checks.insert(
            0, check_step("weights", steps["weights"], expected.weights, budget, positive_zero=masked)
        )
    if expected.present_key is not None:
        for name in ("present_key", "present_value"):
            if name not in steps:
                return verdict(False, problem=f"return_cache gave no {name}")
            checks.insert(
                -1, check_step(name, steps[name], getattr(expected, name), _cache_budget(case, name, dtype))
            )
    output = checks[-1]
    passed = all(c.passed for c in checks)
    shared = ("budget_used", "max_abs_error", "index", "actual", "expected")
    problem = next((c.problem or f"{c.step} out of its budget" for c in checks if not c.passed), None)
    return verdict(passed, **{name: getattr(output, name) for name in shared}, problem=problem, steps=checks)
