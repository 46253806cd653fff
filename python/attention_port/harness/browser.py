"""Run the WebGPU port (typescript/src/webgpu.ts) in headless Chromium, driven by playwright.

Node builds one page (typescript/pages/webgpu-page.ts: the port bundled by esbuild, with the fixture
cases written in), Chromium opens it from disk (a file:// page is a secure context, where
`navigator.gpu` exists), and the page's script (typescript/pages/webgpu-browser.ts) runs every case
on one device, judges it with the conformance kit as cli.ts judges the Node ports
(typescript/harness/kit-cases.ts), and gives back a reply as cli.ts's (typescript/harness/results.ts
writes both). The bench calls the same page to time the port (bench/browser.py).

Playwright never downloads a browser here: it drives the Chromium found on the machine (Debian's
`chromium`, or $CHROMIUM). The adapter is SwiftShader, Chromium's own WebGPU on the CPU, unless
$ATTENTION_PORT_WEBGPU_ADAPTER is `gpu` (scripts/gpu-check sets it on a machine with a GPU):
SwiftShader gives the same answers on every machine, and needs no GPU.

Every way the run can go wrong is a BrowserError with one line that says what happened;
BrowserUnavailable when there is no Chromium or no playwright at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from attention_port.harness.node import NodeError, NodeUnavailable, checked_node
from attention_port.paths import IN_CHECKOUT, NODE_MODULES, REPO_ROOT

PAGE_BUILDER = REPO_ROOT / "typescript" / "pages" / "webgpu-page.ts"  # bundles with esbuild: a checkout only
# Chromium's switches for WebGPU in a headless run. --no-sandbox: CI runs as root, where Chromium's
# sandbox refuses to start. --enable-unsafe-webgpu: WebGPU where Chromium does not enable it by
# default (Linux). Vulkan: the backend both SwiftShader and a GPU's driver are reached through.
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--enable-features=Vulkan"]
ADAPTER_ARGS = {
    "swiftshader": ["--use-webgpu-adapter=swiftshader"],
    "gpu": ["--use-angle=vulkan", "--ignore-gpu-blocklist"],
}
ADAPTER_VARIABLE = "ATTENTION_PORT_WEBGPU_ADAPTER"


class BrowserError(NodeError):
    """The browser run could not give results; the message is one line. (A NodeError, as the page
    is built by Node: `verify` reports either as a port that could not run.)"""


class BrowserUnavailable(BrowserError):
    """No Chromium or no playwright: the WebGPU port cannot run on this machine at all."""


def find_chromium() -> str | None:
    """$CHROMIUM, else Debian's chromium (or chromium-browser) on PATH."""
    override = os.environ.get("CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def unavailable_reason() -> str | None:
    """Why the WebGPU port cannot run here (an installed package, no esbuild, no Chromium, no
    playwright, no Node), or None."""
    if not IN_CHECKOUT:
        return "it runs from a checkout of the repository (its page is bundled by esbuild there)"
    if not (NODE_MODULES / "esbuild").is_dir():
        return "esbuild is not installed (run scripts/setup)"
    if find_chromium() is None:
        return "no Chromium found (apt-get install chromium, or set $CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[dev]')"
    try:
        checked_node()
    except NodeUnavailable as error:
        return str(error)
    return None


def adapter_choice() -> str:
    """swiftshader (the default) or gpu, from $ATTENTION_PORT_WEBGPU_ADAPTER."""
    choice = os.environ.get(ADAPTER_VARIABLE, "swiftshader") or "swiftshader"
    if choice not in ADAPTER_ARGS:
        raise BrowserError(f"${ADAPTER_VARIABLE} must be one of {', '.join(ADAPTER_ARGS)}, got {choice!r}")
    return choice


def build_page(folder: Path, fixtures_dir: Path | None, case_ids: list[str], timeout: float) -> Path:
    """folder/index.html: the port's page, with the given fixture cases (none when fixtures_dir is None)."""
    command = [str(checked_node(timeout)), str(PAGE_BUILDER), "--out", str(folder)]
    if fixtures_dir is None:
        command.append("--no-cases")
    else:
        command += ["--fixtures", str(Path(fixtures_dir).resolve())]
        for case_id in case_ids:
            command += ["--case", case_id]
    try:
        finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        raise BrowserError(f"building the WebGPU page timed out after {timeout:g} s") from None
    if finished.returncode != 0:
        last = (finished.stderr.strip() or finished.stdout.strip() or "no output").splitlines()[-1]
        raise BrowserError(f"building the WebGPU page failed (exit {finished.returncode}): {last}")
    return folder / "index.html"


class PortPage:
    """The port's page open in Chromium: call(name, argument) runs attentionPort[name](argument)."""

    def __init__(self, page, timeout: float):
        self.page = page
        self.timeout = timeout

    def call(self, name: str, argument=None):
        """The function's result, awaited in the page within the time-out; its rejection (a
        WebGpuUnavailableError when Chromium has no adapter) as a BrowserError."""
        from playwright.sync_api import Error as PlaywrightError

        try:
            self.page.evaluate(
                """([name, argument]) => {
                     window.portCall = {};
                     attentionPort[name](argument).then(
                       (value) => { window.portCall.value = value; },
                       (error) => { window.portCall.error = `${error.name}: ${error.message}`; });
                   }""",
                [name, argument],
            )
            self.page.wait_for_function(
                "() => 'value' in window.portCall || 'error' in window.portCall", timeout=self.timeout * 1e3
            )
            outcome = self.page.evaluate("() => window.portCall")
        except PlaywrightError as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise BrowserError(f"the WebGPU page did not answer {name} ({first})") from None
        if "error" in outcome:
            raise BrowserError(f"the WebGPU port in Chromium: {outcome['error']}")
        return outcome["value"]


@contextmanager
def open_page(fixtures_dir: Path | None, case_ids: list[str], timeout: float) -> Iterator[PortPage]:
    """Build the page, start Chromium and open it; closes both on the way out."""
    if (reason := unavailable_reason()) is not None:
        raise BrowserUnavailable(f"the WebGPU port cannot run: {reason}")
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    args = CHROMIUM_ARGS + ADAPTER_ARGS[adapter_choice()]
    with tempfile.TemporaryDirectory(prefix="attention-port-webgpu-", ignore_cleanup_errors=True) as scratch:
        html = build_page(Path(scratch), fixtures_dir, case_ids, timeout)
        with sync_playwright() as playwright:
            try:
                browser = playwright.chromium.launch(
                    executable_path=find_chromium(), args=args, timeout=timeout * 1e3
                )
            except PlaywrightError as error:
                first = str(error).strip().splitlines()[0]
                raise BrowserError(f"Chromium did not start: {first}") from None
            try:
                page = browser.new_page()
                problems: list[str] = []
                page.on("pageerror", lambda error: problems.append(str(error)))
                page.goto(html.as_uri())
                if page.evaluate("() => typeof attentionPort") != "object":
                    raise BrowserError(f"the WebGPU page's script did not load: {'; '.join(problems) or '?'}")
                yield PortPage(page, timeout)
            finally:
                browser.close()


def run_webgpu(
    fixtures_dir: Path | str, case_ids: list[str], timeout: float, every_answer: bool = False
) -> dict:
    """The WebGPU port on these fixture cases, in one page load: its reply, as cli.ts's ({"port",
    "adapter", "elapsed_ms", "verdicts": {id: verdict}, "answers": {id: answer}}: the page judges
    its port with the conformance kit as cli.ts does; every_answer: every attention case's answer
    comes back too, for a cross-check)."""
    with open_page(Path(fixtures_dir), case_ids, timeout) as page:
        text = page.call("runFixtureCases", every_answer)
    try:
        document = json.loads(text)
    except (TypeError, json.JSONDecodeError) as error:
        raise BrowserError(f"the WebGPU page gave malformed JSON: {error}") from None
    parts = document if isinstance(document, dict) else {}
    if not (isinstance(parts.get("verdicts"), dict) and isinstance(parts.get("answers"), dict)):
        raise BrowserError("the WebGPU page gave results without 'verdicts' and 'answers' objects")
    return document
