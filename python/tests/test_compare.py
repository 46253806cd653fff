"""The tolerance rule itself: it must pass what is close and fail what is not, exactly where the
design says it must be exact."""

from __future__ import annotations

import numpy as np
from conftest import ALL_CASES

from attention_port import compare, reference

U64 = compare.UNIT_ROUNDOFF["float64"]


def test_within_and_beyond_the_budget():
    expected = np.array([1.0, 2.0])
    scale = np.array([1.0, 1.0])
    inside = compare.check_step("output", expected + 15 * U64, expected, scale, U64)
    outside = compare.check_step("output", expected + [0, 17 * U64 * 2], expected, scale, U64)
    assert inside.passed and 0.9 < inside.budget_used <= 1.0
    assert not outside.passed and outside.index == (1,)


def test_nan_must_meet_nan():
    expected = np.array([np.nan, 1.0])
    scale = np.array([np.nan, 1.0])
    assert compare.check_step("output", np.array([np.nan, 1.0]), expected, scale, U64).passed
    wrong = compare.check_step("output", np.array([0.0, 1.0]), expected, scale, U64)
    assert not wrong.passed and "a number where NaN was expected" in wrong.problem
    extra = compare.check_step("output", np.array([np.nan, np.nan]), expected, scale, U64)
    assert not extra.passed and "NaN where a number was expected" in extra.problem


def test_zero_budget_means_exact_positive_zero():
    expected = np.zeros(3)
    scale = np.zeros(3)
    assert compare.check_step("output", np.zeros(3), expected, scale, U64).passed
    assert not compare.check_step("output", np.array([0, 1e-300, 0]), expected, scale, U64).passed
    negative = compare.check_step("output", np.array([0, -0.0, 0]), expected, scale, U64)
    assert not negative.passed and "-0.0" in negative.problem


def test_shape_mismatch_fails():
    check = compare.check_step("output", np.zeros((2, 3)), np.zeros((3, 2)), np.ones((3, 2)), U64)
    assert not check.passed and "shape" in check.problem


def test_judge_error_cases():
    case = next(c for c in ALL_CASES if c.id == "error_feature_mismatch")
    kind, message = case.expected_error
    assert compare.judge(case, "p", "float64", compare.PortAnswer(error=(kind, message))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(error=("rank", message))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(error=(kind, message + "!"))).passed
    assert not compare.judge(case, "p", "float64", compare.PortAnswer(steps={})).passed
    mask_case = next(c for c in ALL_CASES if c.id == "error_mask_mixed")
    camel = mask_case.expected_error[1].replace("attn_mask", "attnMask")
    assert compare.judge(mask_case, "ts", "float64", compare.PortAnswer(error=("type", camel))).passed


def test_judge_names_the_first_divergent_step():
    case = next(c for c in ALL_CASES if c.id == "rank2_square")
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


def test_a_forgotten_scale_first_diverges_at_logits():
    # The scores are right and the softmax input is not: the report must blame `logits`, the step
    # the fixtures store between the two, not `weights`.
    case = next(c for c in ALL_CASES if c.id == "rank2_square")
    inputs = case.inputs
    unscaled = reference.attention_steps(inputs["query"], inputs["key"], inputs["value"], scale=1.0)
    steps = {name: getattr(unscaled, name) for name in compare.STEPS}
    verdict = compare.judge(case, "p", "float64", compare.PortAnswer(steps=steps))
    assert not verdict.passed and verdict.first_divergent_step == "logits"


def test_an_infinity_meets_only_the_same_infinity():
    expected = np.array([-np.inf, 1.0, np.inf])
    scale = np.array([1.0, 1.0, 1.0])
    assert compare.check_step("logits", expected.copy(), expected, scale, U64).passed
    flipped = compare.check_step("logits", np.array([np.inf, 1.0, np.inf]), expected, scale, U64)
    assert not flipped.passed and flipped.index == (0,)
    finite = compare.check_step("logits", np.array([-1e308, 1.0, np.inf]), expected, scale, U64)
    assert not finite.passed and finite.index == (0,)


def test_report_line():
    case = next(c for c in ALL_CASES if c.id == "rank2_square")
    truth = case.expected
    verdict = compare.judge(
        case, "numpy", "float64", compare.PortAnswer(steps={"output": truth.output, "weights": truth.weights})
    )
    line = compare.format_verdict(verdict)
    assert line.startswith("PASS") and "budget" in line and "rank2_square" in line
