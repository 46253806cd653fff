"""The tolerance rule itself: it must pass what is close and fail what is not, exactly where the
contract says it must be exact, and say what the port gave."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import ALL_CASES

from attention_port import reference
from attention_port.harness import compare

U64 = compare.UNIT_ROUNDOFF["float64"]


def _case(case_id: str):
    return next(c for c in ALL_CASES if c.id == case_id)


def _with_expected(case, **changes):
    """A copy of a fixture case whose expected values are changed (the rule reads only those)."""
    return dataclasses.replace(case, expected=dataclasses.replace(case.expected, **changes))


def _judge(case, output, dtype="float64"):
    return compare.judge(case, "p", dtype, compare.PortAnswer(steps={"output": np.asarray(output, float)}))


def test_within_and_beyond_the_budget():
    expected = np.array([1.0, 2.0])
    budget = np.array([16 * U64, 16 * U64])
    inside = compare.check_step("output", expected + 15 * U64, expected, budget)
    outside = compare.check_step("output", expected + [0, 17 * U64 * 2], expected, budget)
    assert inside.passed and 0.9 < inside.budget_used <= 1.0
    assert not outside.passed and outside.index == (1,)


def test_nan_must_meet_nan_and_the_message_says_what_the_port_gave():
    expected = np.array([np.nan, 1.0])
    budget = np.array([1.0, 1.0])
    assert compare.check_step("output", np.array([np.nan, 1.0]), expected, budget).passed
    wrong = compare.check_step("output", np.array([0.0, 1.0]), expected, budget)
    assert not wrong.passed and wrong.problem == "output[0] is 0.0 where nan was expected"
    extra = compare.check_step("output", np.array([np.nan, np.nan]), expected, budget)
    assert not extra.passed and extra.problem == "output[1] is nan where 1.0 was expected"


def test_an_infinity_meets_only_the_same_infinity():
    expected = np.array([-np.inf, 1.0, np.inf])
    budget = np.ones(3)
    assert compare.check_step("logits", expected.copy(), expected, budget).passed
    flipped = compare.check_step("logits", np.array([np.inf, 1.0, np.inf]), expected, budget)
    assert not flipped.passed and flipped.index == (0,) and "is inf where -inf" in flipped.problem
    finite = compare.check_step("logits", np.array([-1e308, 1.0, np.inf]), expected, budget)
    assert not finite.passed and finite.index == (0,)
    late = compare.check_step("output", np.array([-np.inf, np.inf, np.inf]), expected, budget)
    assert not late.passed and late.index == (1,)


def test_a_value_next_to_the_overflow_threshold_may_round_to_infinity():
    largest = np.finfo(np.float64).max
    expected = np.array([largest * (1 - 2**-52), 1.0])
    assert compare.check_step(
        "output", np.array([np.inf, 1.0]), expected, np.array([largest * 1e-15, 1])
    ).passed
    assert not compare.check_step("output", np.array([-np.inf, 1.0]), expected, np.array([1e300, 1])).passed
    assert not compare.check_step(
        "output", np.array([np.inf, 1.0]), np.array([1e300, 1.0]), np.ones(2)
    ).passed


def test_sign_of_zero_is_demanded_only_in_fully_masked_rows():
    expected = np.zeros((2, 3))
    budget = np.zeros((2, 3))
    masked = np.array([[True], [False]])
    negative = np.array([[0.0, 0.0, 0.0], [-0.0, 0.0, -0.0]])
    assert compare.check_step("output", negative, expected, budget, positive_zero=masked).passed
    negative[0, 1] = -0.0
    check = compare.check_step("output", negative, expected, budget, positive_zero=masked)
    assert (
        not check.passed
        and check.problem == "output[0, 1] is -0.0 where +0.0 is required (a fully-masked row)"
    )
    assert not compare.check_step("output", np.array([[0, 1e-300, 0], [0, 0, 0]]), expected, budget).passed


def test_an_overflowed_budget_still_fails_a_wrong_finite_answer():
    budget = np.array([np.inf, np.inf])
    expected = np.array([1.5, 1.5])
    reach = np.array([2.0, 2.0])
    assert compare.check_step("output", np.array([1.9, 1.6]), expected, budget, fallback=reach).passed
    wrong = compare.check_step("output", np.array([1.5, 2.5]), expected, budget, fallback=reach)
    assert not wrong.passed and wrong.index == (1,) and "beyond every value the row averages" in wrong.problem
    infinite = compare.check_step("output", np.array([1.5, np.inf]), expected, budget, fallback=reach)
    assert not infinite.passed and infinite.index == (1,)


def test_the_oracle_fields_keep_the_budget_finite_where_error_scale_overflows():
    # value_near_largest: (1 + S_i) * magnitude overflows float64, its two factors do not.
    case = _case("value_near_largest")
    assert np.isinf(case.expected.error_scale).any()
    budget = case.expected.budgets["float64"].output
    assert np.isfinite(budget).all()
    expected = case.expected.output
    assert _judge(case, expected).passed
    nudged = expected.copy()
    nudged[0, 0, 0] *= 1 - 1e-6  # far beyond 16 u of the value's size, well inside its range
    verdict = _judge(case, nudged)
    assert not verdict.passed and verdict.index == (0, 0, 0)


def test_the_subnormal_floor_passes_a_right_answer_and_fails_a_wrong_one():
    case = _case("subnormal_outputs")
    expected = case.expected.output
    assert np.all(np.abs(expected[np.isfinite(expected)]) < 2.3e-308)
    one_step = np.where(expected > 0, np.nextafter(expected, 0), np.nextafter(expected, 1))
    assert _judge(case, one_step).passed  # one subnormal step: the rounding a port may do
    assert not _judge(case, expected * 2).passed
    weights_case = _case("subnormal_weights")
    # The float64 weight exp(-745) is one step of the smallest subnormal: times 1e20 that is 4.9e-304.
    assert _judge(weights_case, weights_case.expected.output + [[5e-304, 0], [0, 0]]).passed
    assert not _judge(weights_case, weights_case.expected.output + [[1e-300, 0], [0, 0]]).passed


def test_inf_in_value_is_met_only_by_the_ieee_answer():
    case = _case("inf_in_value_masked")
    expected = case.expected.output
    # Column 1: +inf at key 2, which row 0 masks (0 * inf is NaN). Column 2: +inf at key 0 and -inf
    # at key 3: rows 0 and 1 weigh both (inf + -inf), row 2 masks key 3 (0 * -inf): NaN everywhere.
    assert np.isnan(expected[0, 1]) and expected[1, 1] == np.inf and expected[2, 1] == np.inf
    assert np.isnan(expected[:, 2]).all() and np.isfinite(expected[:, 0]).all()
    assert _judge(case, expected).passed
    wrong = expected.copy()
    wrong[0, 1] = np.inf  # 0 * inf is NaN: the masked key still meets the value
    verdict = _judge(case, wrong)
    assert not verdict.passed and verdict.problem == "output[0, 1] is inf where nan was expected"


def test_score_overflow_is_outside_the_contract_never_a_pass():
    case = _case("score_overflow")
    assert case.expected.score_bound == np.inf
    for output in (case.expected.output, np.array([[2.0]]), np.array([[np.nan]])):
        verdict = _judge(case, output)
        assert not verdict.passed and verdict.outside == "outside the contract: score overflow"
        assert not compare.failed(verdict)
    assert compare.format_verdict(verdict).startswith("OUT ")


def test_float32_ports_are_outside_the_contract_beyond_float32_range():
    case = _case("softcap_tiny_ratio")  # softcap 1e60 is no float32
    assert _judge(case, case.expected.output, "float32").outside == (
        "outside the contract: inputs beyond the float32 range"
    )
    assert _judge(case, case.expected.output, "float64").passed


def test_the_weights_diagnostic_uses_the_oracles_spread():
    # float_mask_large_finite: -1e30 biases carry no weight, so S_i must leave them out, and a
    # weights error the size of the budget the -1e30 would allow is caught at the weights step.
    case = _case("float_mask_large_finite")
    assert case.expected.spread[1] < 1e4
    truth = case.expected
    weights = truth.weights * (1 + 1e-9)
    steps = {
        "scores": truth.scores,
        "logits": truth.logits,
        "weights": weights,
        "output": truth.output * 1.01,
    }
    verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps=steps))
    assert not verdict.passed and verdict.first_divergent_step == "weights"


def test_shape_mismatch_fails():
    check = compare.check_step("output", np.zeros((2, 3)), np.zeros((3, 2)), np.ones((3, 2)))
    assert not check.passed and "shape" in check.problem


def test_judge_error_cases():
    case = _case("error_feature_mismatch")
    kind, message = case.expected_error
    assert compare.judge(case, "p", "float64", compare.PortAnswer(error=(kind, message))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(error=("rank", message))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(error=(kind, message + "!"))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(steps={})).passed
    mask_case = _case("error_mask_mixed")
    camel = mask_case.expected_error[1].replace("attn_mask", "attnMask")
    assert compare.judge(mask_case, "ts", "float64", compare.PortAnswer(error=("type", camel))).passed


def test_judge_names_the_first_divergent_step():
    case = _case("rank2_square")
    truth = case.expected
    good = {"scores": truth.scores, "weights": truth.weights, "output": truth.output}
    assert compare.judge(case, "p", "float64", compare.PortAnswer(steps=good)).first_divergent_step is None
    bad_output = {**good, "output": truth.output + 1e-6}
    assert (
        compare.judge(case, "p", "float64", compare.PortAnswer(steps=bad_output)).first_divergent_step
        == "output"
    )
    bad_scores = {**good, "scores": truth.scores * 1.001, "output": truth.output * 1.001}
    verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps=bad_scores))
    assert not verdict.passed and verdict.first_divergent_step == "scores"


def test_a_port_that_gives_the_output_alone_names_no_first_divergent_step():
    # torch-sdpa and the SIMD port give no scores, logits or weights of their own: "first diverged:
    # output" would say nothing about where they went wrong.
    case = _case("rank2_square")
    answer = compare.PortAnswer(steps={"output": case.expected.output + 1e-6})
    verdict = compare.judge(case, "p", "float64", answer)
    assert not verdict.passed and verdict.first_divergent_step is None
    assert "first diverged" not in compare.format_verdict(verdict)


def test_a_forgotten_scale_first_diverges_at_logits():
    # The scores are right and the softmax input is not: the report must blame `logits`, the step
    # the fixtures store between the two, not `weights`.
    case = _case("rank2_square")
    inputs = case.inputs
    unscaled = reference.attention_steps(inputs["query"], inputs["key"], inputs["value"], scale=1.0)
    steps = {name: getattr(unscaled, name) for name in compare.STEPS}
    verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps=steps))
    assert not verdict.passed and verdict.first_divergent_step == "logits"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_oracles_own_answer_passes_every_case_in_the_contract(dtype):
    for case in ALL_CASES:
        if case.expects_error:
            continue
        verdict = compare.judge(
            case, "oracle", dtype, compare.PortAnswer(steps={"output": case.expected.output})
        )
        assert verdict.passed or verdict.outside, (case.id, verdict.problem)


def test_report_line():
    case = _case("rank2_square")
    truth = case.expected
    verdict = compare.judge(
        case, "numpy", "float64", compare.PortAnswer(steps={"output": truth.output, "weights": truth.weights})
    )
    line = compare.format_verdict(verdict)
    assert line.startswith("PASS") and "budget" in line and "rank2_square" in line
    outside = _judge(_case("score_overflow"), [[1.5]])
    assert compare.format_verdict(outside).startswith("OUT ") and not compare.failed(outside)


def test_where_the_weights_are_not_determined_the_values_reach_decides():
    # logits_tie_in_float64: the exact logits put all weight on key 1 (value 1.0), but float64
    # rounds both logits to 1e300, and every float64 port splits the weight: -8.5e307. No bound from
    # the exact weights can hold there; what any weighted average promises still must.
    case = next(c for c in ALL_CASES if c.id == "logits_tie_in_float64")
    assert np.all(compare.K * U64 * (1 + case.expected.spread) >= 1)
    split = np.array([[0.5 * -1.7e308 + 0.5 * 1.0]])
    verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps={"output": split}))
    assert verdict.passed and "values' reach" in verdict.problem
    beyond = compare.judge(
        case, "p", "float64", compare.PortAnswer(steps={"output": np.array([[-1.75e308]])})
    )
    assert not beyond.passed and "beyond every value the row averages" in beyond.problem
    infinite = compare.judge(
        case, "p", "float64", compare.PortAnswer(steps={"output": np.array([[-np.inf]])})
    )
    assert not infinite.passed


def test_float16_is_held_to_the_rule_not_only_to_the_values_reach():
    # float16's smallest subnormal is 2^-24, and 2^-24 / 2^-1074 = 2^1050 is beyond float64: the
    # floor term must not overflow on the way, or every float16 cell falls back to the values' reach.
    case = _case("tutorial_seq3_dk4")
    truth = case.expected.output
    rounded = compare.judge(
        case, "p", "float16", compare.PortAnswer(steps={"output": truth.astype(np.float16)})
    )
    assert rounded.passed and rounded.budget_used > 0 and rounded.problem is None
    wrong = truth.copy()
    wrong[0, 0] += 1.0  # 3.6 where 2.6 is right: within the values' reach (5.0), far beyond float16's error
    verdict = compare.judge(case, "p", "float16", compare.PortAnswer(steps={"output": wrong}))
    assert not verdict.passed
