"""Each fault of the command line or the machine gives one line and the exit code
`attention-port --help` documents: 2 when the job cannot run, 1 when a port failed."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import FIXTURES_DIR, copy_with_edit

from attention_port import cli, reference
from attention_port.golden import reader as fixtures
from attention_port.harness import runners as ports

DTYPES = "float64, float32, float16, bfloat16"


def _run(capsys, *args: str) -> tuple[int, list[str]]:
    try:
        status = cli.main(list(args))
    except SystemExit as exit_:  # argparse's own refusals
        status = exit_.code
    captured = capsys.readouterr()
    return status, (captured.out + captured.err).strip().splitlines()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--node-timeout", "nan"), "error: --node-timeout must be a finite number of seconds > 0, got nan"),
        (("--node-timeout", "inf"), "error: --node-timeout must be a finite number of seconds > 0, got inf"),
        (("--node-timeout", "0"), "error: --node-timeout must be a finite number of seconds > 0, got 0"),
        (("--node-timeout", "1e308"),
         "error: --node-timeout must be at most 86400 seconds (a day), got 1e+308"),
        (("--node-timeout", "1e10"),
         "error: --node-timeout must be at most 86400 seconds (a day), got 1e+10"),
        (("--dtypes", ""), f"error: --dtypes names no dtype; choose from {DTYPES}"),
        (("--dtypes", " , "), f"error: --dtypes names no dtype; choose from {DTYPES}"),
        (("--node-timeout", "soon"),
         "error: argument --node-timeout: invalid float value: 'soon' (see attention-port verify --help)"),
        (("--ports", ""), "error: --ports names no port; choose from numpy, torch, torch-sdpa, typescript,"
                          " typescript-flash, typescript-simd, typescript-simd-float32, webgpu"),
        (("--ports", " , "), "error: --ports names no port; choose from numpy, torch, torch-sdpa, typescript,"
                             " typescript-flash, typescript-simd, typescript-simd-float32, webgpu"),
        (("--ports", "numpy,numpy"), "error: --ports names 'numpy' twice"),
        (("--case", ","), "error: --case names no case; give case ids"
                          " (attention-port verify --list shows them)"),
        (("--case", ""), "error: --case names no case; give case ids"
                          " (attention-port verify --list shows them)"),
        (("--ports", "numpy,typescript,numpy"), "error: --ports names 'numpy' twice"),
        (("--bogus",), "error: unrecognized arguments: --bogus (see attention-port --help)"),
    ],
)  # fmt: skip
def test_a_wrong_command_line_is_one_line_and_exit_2(capsys, args, message):
    status, lines = _run(capsys, "verify", *args)
    assert (status, lines) == (2, [message])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_verify_on_cuda_without_cuda_is_one_line_and_exit_2(capsys):
    status, lines = _run(capsys, "verify", "--ports", "numpy,torch", "--device", "cuda")
    assert status == 2 and len(lines) == 1
    assert lines[0].startswith("error: --device cuda: torch cannot use this device here")


def test_an_unknown_device_is_one_line_and_exit_2(capsys):
    status, lines = _run(capsys, "verify", "--ports", "torch-sdpa", "--device", "abacus")
    assert status == 2 and len(lines) == 1 and lines[0].startswith("error: --device abacus:")


def test_a_resealed_case_with_a_string_scale_is_reported_not_a_crash(tmp_path, capsys):
    """A case edited to "scale": "x" and resealed (sha256 updated): refused as a fixture (exit 2) or
    failed by every port that reads it (exit 1) -- never a traceback from inside a port's checks."""
    folder = copy_with_edit(tmp_path, "rank2_square", lambda d: d["params"].update(scale="x"))
    status, lines = _run(capsys, "verify", "--ports", "numpy,torch-sdpa", "--fixtures", str(folder))
    assert not any("Traceback" in line for line in lines)
    if status == 2:
        assert len(lines) == 1 and "rank2_square" in lines[0] and "scale" in lines[0]
    else:
        assert status == 1
        fails = [line for line in lines if line.startswith("FAIL")]
        assert fails and all("scale must be a finite number, got a string" in line for line in fails)


def test_the_sdpa_predicate_never_crashes_a_run():
    """Whatever a case's params hold, torch's kernel port answers with the port's error."""
    case = next(c for c in fixtures.load_fixtures(FIXTURES_DIR, ["rank2_square"]))
    bad = dataclasses.replace(case, params={**case.params, "scale": "x"})
    answers = ports.torch_sdpa_port("cpu", "float64").run([bad]).answers
    assert answers["rank2_square"].error == ("value", "scale must be a finite number, got a string")


def test_help_documents_the_exit_codes(capsys):
    status, lines = _run(capsys, "--help")
    assert status == 0
    text = "\n".join(lines)
    assert "exit codes:" in text and "  1  a port failed" in text and "  2  the job could not run" in text


def test_without_chromium_the_webgpu_port_is_refused_when_named_and_left_out_by_default(capsys, monkeypatch):
    monkeypatch.setenv("CHROMIUM", "/nonexistent/chromium")
    status, lines = _run(capsys, "verify", "--ports", "webgpu", "--case", "rank2_square")
    assert (status, lines) == (
        2,
        ["error: the webgpu port cannot run: no Chromium found (apt-get install chromium, or set $CHROMIUM)"],
    )
    status, lines = _run(capsys, "verify", "--case", "rank2_square")
    assert status == 0
    notes = [line for line in lines if "webgpu" in line]
    assert notes == [
        "note: the webgpu port is left out: no Chromium found (apt-get install chromium, or set $CHROMIUM)"
    ]


@pytest.mark.parametrize("seconds", ["1e10", "1e308", "86401"])
def test_a_check_timeout_past_a_day_is_a_wrong_command_line(capsys, seconds):
    learner = Path(reference.__file__)  # the project's own port, as a learner's file
    status, lines = _run(capsys, "check", str(learner), "--timeout", seconds)
    assert (status, lines) == (
        2,
        [f"error: --timeout must be at most 86400 seconds (a day), got {float(seconds):g}"],
    )


def test_generate_check_on_a_file_says_it_is_a_file(tmp_path, capsys):
    a_file = tmp_path / "fixtures.json"
    a_file.write_text("{}")
    status, lines = _run(capsys, "generate", "--check", "--out", str(a_file))
    assert (status, lines) == (2, [f"error: --out {a_file}: is a file, not a folder"])


LEARNER = Path(reference.__file__)  # the project's own port, as a learner's file


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "--ports", "numpy", "-v"),
        ("verify", "--list"),
        ("check", str(LEARNER)),
    ],
    ids=" ".join,
)
def test_a_closed_pipe_ends_quietly(args):
    """`attention-port verify -v | head -1`: the reader goes away; no BrokenPipeError traceback.
    The pipe is closed before the command writes anything, so every write meets it closed."""
    process = subprocess.Popen(
        [sys.executable, "-m", "attention_port", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.close()
    _, err = process.communicate(timeout=300)
    assert err.decode() == "" and process.returncode == cli.EXIT_PIPE_CLOSED, err.decode()
