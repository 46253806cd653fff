"""The explorer without a browser: the build and serve commands, and the √d_k experiment and plot.
(The page in Chromium: test_explorer_browser.py. Its tolerance rule is the conformance kit's,
held to compare.py by test_conformance_kit.py.)"""

from __future__ import annotations

import contextlib
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

from attention_port.pages import sqrt_dk
from attention_port.paths import REPO_ROOT

MODEL = REPO_ROOT / "typescript" / "explorer" / "model.ts"
ATTENTION = REPO_ROOT / "typescript" / "src" / "attention.ts"
FIXTURES_TS = REPO_ROOT / "typescript" / "golden" / "reader.ts"


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
