"""The explorer without a browser: its tolerance-rule twin against compare.py, the build and
serve commands, and the √d_k experiment and plot. (The page in Chromium: test_explorer_browser.py.)"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from conftest import interruptible

from attention_port.cli import DEFAULT_FIXTURES
from attention_port.fixtures import reader as fixtures
from attention_port.harness import compare
from attention_port.harness.node import find_node
from attention_port.pages import sqrt_dk
from attention_port.paths import REPO_ROOT

MODEL = REPO_ROOT / "typescript" / "explorer" / "model.ts"
ATTENTION = REPO_ROOT / "typescript" / "src" / "attention.ts"
FIXTURES_TS = REPO_ROOT / "typescript" / "runners" / "fixtures.ts"


def _encode(values: np.ndarray) -> list:
    """Flat float64 values for JSON: non-finite ones as strings, -0.0 kept (json writes "-0.0")."""
    out = []
    for x in np.asarray(values, np.float64).ravel().tolist():
        out.append(
            x if math.isfinite(x) else ("NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity"))
        )
    return out


# Node reads the cases Python wrote, adds attention.ts's own output as one more candidate, and
# judges every candidate with the explorer's checkOutput.
NODE_JUDGE = """
import { readFileSync } from "node:fs";
import { checkOutput, outsideContract } from "MODEL";
import { attentionSteps } from "ATTENTION";
import { loadFixtures, portTensor } from "FIXTURES_TS";
const decode = (xs) => xs.map((x) => (typeof x === "string" ? Number(x) : x));
const cases = JSON.parse(readFileSync(process.argv[1], "utf8"));
const dtype = process.argv[3];
const byId = new Map(loadFixtures(process.argv[2]).map((c) => [c.id, c]));
const results = {};
for (const [id, entry] of Object.entries(cases)) {
  const fixture = byId.get(id);
  const p = fixture.params;
  const steps = attentionSteps(portTensor(fixture.inputs.query), portTensor(fixture.inputs.key),
    portTensor(fixture.inputs.value),
    { attnMask: fixture.inputs.attnMask === null ? null : portTensor(fixture.inputs.attnMask),
      isCausal: p.isCausal, scale: p.scale, enableGqa: p.enableGqa, softcap: p.softcap });
  const flat = (x) => (Array.isArray(x) ? x.flatMap(flat) : [x]);
  const port = flat(steps.output);
  const candidates = [...entry.candidates.map(decode), port];
  const e = fixture.expected;
  const rule = { output: e.output, logits: e.logits, spread: e.spread, magnitude: e.magnitude,
                 errorFloor: e.errorFloor, scoreBound: e.scoreBound };
  const numbers = [fixture.inputs.query, fixture.inputs.key, fixture.inputs.value].flatMap((t) => t.data);
  if (fixture.inputs.attnMask !== null && fixture.inputs.attnMask.dtype !== "bool") {
    numbers.push(...fixture.inputs.attnMask.data);
  }
  numbers.push(p.scale ?? 0, p.softcap);
  if (outsideContract(rule, dtype, numbers) !== null) {
    results[id] = "outside";
    continue;
  }
  results[id] = candidates.map((actual) => {
    const check = checkOutput(actual, rule, fixture.inputs.value, dtype);
    const enc = (x) => (Number.isFinite(x) ? x : String(x));
    return { actual: actual.map((x) => (Object.is(x, -0) ? "-0" : enc(x))), passed: check.passed,
             used: enc(check.used), index: check.index, problem: check.problem };
  });
}
console.log(JSON.stringify(results));
"""


def _candidates(case: fixtures.FixtureCase, dtype: str) -> list[np.ndarray]:
    """Outputs to judge: the truth itself, numpy's answer, and versions pushed inside, just over
    and far over the budget, a NaN, and a -0.0 where +0.0 is required."""
    expected = case.expected.output
    budget = compare.output_budget(case.expected, dtype)
    from attention_port import reference

    inputs, params = case.inputs, case.params
    numpy_output = reference.scaled_dot_product_attention(
        inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"],
        is_causal=params["is_causal"], scale=params["scale"], enable_gqa=params["enable_gqa"],
        softcap=params["softcap"],
    )  # fmt: skip
    found = [expected.copy(), np.asarray(numpy_output, np.float64)]
    if expected.size == 0:
        return found
    finite = np.isfinite(expected) & np.isfinite(budget) & (budget > 0)
    if finite.any():
        n = int(np.argmax(np.where(finite, budget, -1).ravel()))
        for share in (0.5, 0.999, 1.01, 40.0):
            pushed = expected.copy().ravel()
            pushed[n] += share * budget.ravel()[n]
            found.append(pushed.reshape(expected.shape))
    nan = expected.copy().ravel()
    nan[0] = np.nan if not np.isnan(nan[0]) else 1.0
    found.append(nan.reshape(expected.shape))
    exact_zero = np.broadcast_to(compare.fully_masked_rows(case.expected), expected.shape) & (expected == 0)
    if exact_zero.any():
        signed = expected.copy().ravel()
        signed[int(np.argmax(exact_zero.ravel()))] = -0.0
        found.append(signed.reshape(expected.shape))
    return found


@pytest.mark.parametrize("dtype", ["float64", "float32"])  # float32: the WebGPU backend's
def test_the_explorers_tolerance_rule_is_compare_pys_on_every_fixture(tmp_path, dtype):
    valid = [c for c in fixtures.load_fixtures(DEFAULT_FIXTURES) if not c.expects_error]
    cases = [c for c in valid if compare.outside_contract(c, dtype) is None]
    payload, candidates = {}, {}
    for case in valid:
        candidates[case.id] = _candidates(case, dtype)
        payload[case.id] = {
            "candidates": [_encode(x) for x in candidates[case.id]],
        }
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    script = NODE_JUDGE.replace("MODEL", MODEL.as_uri()).replace("ATTENTION", ATTENTION.as_uri())
    script = script.replace("FIXTURES_TS", FIXTURES_TS.as_uri())
    run = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", script, str(path), str(DEFAULT_FIXTURES), dtype],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    # The page's outside_contract twin: the same cases are outside, in either dtype.
    assert {i for i, r in results.items() if r == "outside"} == {c.id for c in valid} - {c.id for c in cases}
    compared = failing = 0
    for case in cases:
        for judged in results[case.id]:
            actual = np.array([float(x) for x in judged["actual"]], np.float64).reshape(
                case.expected.output.shape
            )
            want = compare.check_output(case, actual, dtype)
            where = f"{case.id}: TypeScript {judged}, compare.py {want}"
            assert judged["passed"] == want.passed, where
            used = float(judged["used"])
            assert (used == want.budget_used) or math.isclose(used, want.budget_used, rel_tol=1e-12), where
            if want.index is not None and case.expected.output.size:
                assert judged["index"] == int(np.ravel_multi_index(want.index, actual.shape)), where
            assert (judged["problem"] is None) == (want.problem is None), where
            compared += 1
            failing += not want.passed
    # The candidates include failures of every kind, so the rule's both answers were compared.
    assert compared > 5 * len(cases) and failing > len(cases)


# ---- build and serve ----------------------------------------------------------------------------


def _cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attention_port", *args], capture_output=True, text=True, timeout=120, **kwargs
    )


def test_explore_build_writes_one_self_contained_file(tmp_path):
    run = _cli("explore", "--build", str(tmp_path / "page"))
    assert run.returncode == 0, run.stderr
    page = tmp_path / "page" / "index.html"
    assert run.stdout.startswith(f"wrote {page}")
    assert sorted(p.name for p in page.parent.iterdir()) == ["index.html"]
    html = page.read_text(encoding="utf-8")
    assert "function attentionSteps(" in html  # the port itself, bundled
    assert "tutorial_seq3_dk4" in html
    assert "<script src" not in html and "<link" not in html


@contextlib.contextmanager
def _serving_explorer():
    """`attention-port explore` started and serving: (the process, the URL it printed). Its own
    session, so that the end kills Node too: a failing run must not leave a server behind."""
    process = subprocess.Popen(
        [sys.executable, "-m", "attention_port", "explore"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=interruptible,
    )  # fmt: skip
    try:
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout=60)
        assert lines and lines[0].startswith("attention explorer at http://127.0.0.1:"), lines
        yield process, lines[0].split(" at ")[1].split()[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def test_explore_serves_on_localhost_until_interrupted():
    with _serving_explorer() as (process, url):
        with urllib.request.urlopen(url, timeout=30) as response:
            html = response.read().decode("utf-8")
        assert "long_sequence_causal_masked" in html  # served mode has every case of fixtures/
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url + "elsewhere", timeout=30)
        assert missing.value.code == 404
        process.send_signal(signal.SIGINT)  # what Ctrl-C sends
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "explorer stopped" in out


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="SIGTERM and SIGHUP as POSIX sends them")
@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_explore_stops_its_server_on_sigterm_and_sighup(name):
    # The signal goes to the attention-port process alone (as `kill PID` sends it), not to its
    # group: the Node server it started must stop too, not be left answering.
    with _serving_explorer() as (process, url):
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        process.send_signal(getattr(signal, name))
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0, err
        assert "explorer stopped" in out
        with pytest.raises(urllib.error.URLError):  # nothing listens there any more
            urllib.request.urlopen(url, timeout=5)


def _raw_request(url: str, head: str) -> str:
    """`head` (a request line and headers) sent as they are to the server at `url`; the status
    line of the answer."""
    host, port = url.removeprefix("http://").rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(head.encode("latin-1") + b"\r\n")
        answer = connection.makefile("rb").readline().decode("latin-1")
    return answer.strip()


def test_explore_answers_a_malformed_request_target_with_400_and_goes_on():
    with _serving_explorer() as (process, url):
        host = url.removeprefix("http://").rstrip("/")
        for target in ("http://[::1", "http://%zz/"):
            status = _raw_request(url, f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n")
            assert status.startswith("HTTP/1.1 400"), (target, status)
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200  # still serving
        assert process.poll() is None


def test_explore_answers_only_requests_addressed_to_localhost():
    """A page on another site that rebinds its name to 127.0.0.1 sends its own name as Host."""
    with _serving_explorer() as (_process, url):
        port = url.removeprefix("http://").rstrip("/").split(":")[1]
        for host in ("attacker.example", f"attacker.example:{port}", f"127.0.0.1.attacker.example:{port}"):
            status = _raw_request(url, f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n")
            assert status.startswith("HTTP/1.1 403"), (host, status)
        status = _raw_request(url, "GET / HTTP/1.0\r\n")  # no Host at all (HTTP/1.0 may leave it out)
        assert status.startswith("HTTP/1.1 403"), status
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", "127.0.0.1"):
            status = _raw_request(url, f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n")
            assert status.startswith("HTTP/1.1 200"), (host, status)


def test_a_killed_explore_leaves_no_server_behind():
    """kill -9 of the attention-port process (nothing can be passed on): Node notices that its
    parent is gone and stops serving."""
    with _serving_explorer() as (process, url):
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.status == 200
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(url, timeout=5).close()
            except urllib.error.URLError:
                break  # nothing listens there any more
            except ConnectionError:
                pass  # closed while it stops
            time.sleep(0.2)
        else:
            pytest.fail(f"the Node server at {url} still serves 20 s after its parent was killed")


def test_explore_refuses_a_bad_fixture_folder(tmp_path):
    run = _cli("explore", "--build", str(tmp_path / "page"), "--fixtures", str(tmp_path / "none"))
    assert run.returncode == 2
    assert "is not a fixture folder" in run.stderr
    assert not (tmp_path / "page").exists()


# ---- the √d_k experiment ------------------------------------------------------------------------


def test_sqrt_dk_experiment_matches_the_theory():
    small, large = sqrt_dk.measure(1), sqrt_dk.measure(1024)
    # A sum of d_k products of independent unit-variance entries has standard deviation √d_k.
    assert large.spread["unscaled"] == pytest.approx(32, rel=0.1)
    assert large.spread["scaled"] == pytest.approx(1, rel=0.1)
    assert small.spread["unscaled"] == pytest.approx(1, rel=0.1)
    # Uniform weights over 64 keys have entropy ln 64; the scaled softmax stays near it.
    assert large.entropy["scaled"] > 0.8 * math.log(sqrt_dk.ROWS)
    assert large.entropy["unscaled"] < 0.1 * math.log(sqrt_dk.ROWS)
    assert large.max_weight["unscaled"] > 0.9 > 0.2 > large.max_weight["scaled"]
    assert large.jacobian["unscaled"] < 0.5 * large.jacobian["scaled"]


def test_jacobian_size_by_hand():
    assert sqrt_dk.jacobian_size(np.array([0.0, 1.0, 0.0])) == 0.0
    p = np.array([0.5, 0.5])  # diag(p) - p pᵀ = [[0.25, -0.25], [-0.25, 0.25]]
    assert sqrt_dk.jacobian_size(p) == pytest.approx(0.5, abs=1e-15)


def test_plot_sqrt_dk_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "plots" / "sqrt-dk.png"
    run = _cli("plot-sqrt-dk", "--out", str(out), env={**os.environ, "MPLBACKEND": "Agg"})
    assert run.returncode == 0, run.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {out}" in run.stdout
    assert [p.name for p in out.parent.iterdir()] == ["sqrt-dk.png"]  # no temporary left behind


def test_plot_sqrt_dk_refuses_a_bad_seed_or_output_path_in_one_line(tmp_path):
    pytest.importorskip("matplotlib")
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    for args, named in (
        (("--seed", "-1", "--out", str(tmp_path / "p.png")), "--seed"),
        (("--out", str(tmp_path)), str(tmp_path)),
        (("--out", str(a_file / "p.png")), str(a_file)),
    ):
        run = _cli("plot-sqrt-dk", *args, env={**os.environ, "MPLBACKEND": "Agg"})
        lines = run.stderr.strip().splitlines()
        assert run.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), run.stderr
        assert named in lines[0] and run.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"], "nothing is written"


@pytest.mark.parametrize("port", ["-5", "65536"])
def test_explore_refuses_a_port_out_of_range_in_one_line(port):
    run = _cli("explore", "--port", port)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and lines == [
        f"error: --port must be a whole number from 0 to 65535, got {port}"
    ]
