"""The explorer's speed in Chromium: recompute-to-paint at 64 x 64, and Tab presses to the first weight.

    .venv/bin/python -m attention_port.bench.explorer                 build the page, then measure
    .venv/bin/python -m attention_port.bench.explorer --page FILE     measure a page built elsewhere
    .venv/bin/python -m attention_port.bench.explorer --backend flash --runs 20

A seeded random case with Lq = Lk = E = Ev = 64 is drawn; then `causal` is clicked --runs times,
and each time the clock runs from just before the click until the frame after it has been painted
(a requestAnimationFrame callback, then a task after it: the browser paints between the two). The
median is printed. This is a measurement, not a test: its numbers depend on the machine and its load.

Needs Chromium (apt's `chromium`, or $CHROMIUM) and the playwright package (the dev extra).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from attention_port.pages.explore import explorer_command
from attention_port.paths import NotACheckout, require_checkout

PAINTED = """async () => {
  const t0 = performance.now();
  document.getElementById('causal').click();
  while (document.body.dataset.busy !== undefined) { await new Promise((r) => setTimeout(r, 0)); }
  await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)));
  return performance.now() - t0;
}"""

# Tab from the top of the page until a weights cell (or the weights canvas) has the focus.
TABS_TO_WEIGHTS = """() => {
  const e = document.activeElement;
  return e !== null && (e.closest('#table-weights') !== null || e.id === 'canvas-weights');
}"""


def measure(page_path: Path, runs: int, backend: str, chromium: str) -> dict[str, object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(page_path.as_uri())
        page.wait_for_selector("#step-weights")
        tabs = 0
        while not page.evaluate(TABS_TO_WEIGHTS) and tabs < 5000:
            page.keyboard.press("Tab")
            tabs += 1
        if page.locator("#backend").count():
            page.select_option("#backend", backend)
        for field in ("lq", "lk", "e", "ev"):
            page.fill(f"#random-{field}", "64")
        page.click("#random-draw")
        page.wait_for_timeout(200)
        page.evaluate(PAINTED)  # one untimed run: the first call compiles the code
        times = [page.evaluate(PAINTED) for _ in range(runs)]
        browser.close()
    return {"tabs": tabs, "times": times, "median": statistics.median(times)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attention_port.bench.explorer", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--page", type=Path, help="a built explorer page (default: build one now)")
    parser.add_argument("--runs", type=int, default=20, help="timed recomputes (default 20)")
    parser.add_argument("--backend", default="readable", help="readable, flash or simd (default readable)")
    args = parser.parse_args(argv)
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: no Chromium found (apt-get install chromium, or set $CHROMIUM)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as folder:
        page = args.page
        if page is None:
            try:
                checkout = require_checkout("python -m attention_port.bench.explorer without --page")
            except NotACheckout as error:
                print(f"error: {error}", file=sys.stderr)
                return 2
            subprocess.run(
                explorer_command(build=Path(folder)), check=True, capture_output=True, cwd=checkout
            )
            page = Path(folder) / "index.html"
        result = measure(page.resolve(), args.runs, args.backend, chromium)
    times = sorted(result["times"])
    print(
        f"explorer at Lq = Lk = E = Ev = 64, backend {args.backend}: recompute-to-paint median"
        f" {result['median']:.1f} ms over {args.runs} runs (min {times[0]:.1f}, max {times[-1]:.1f});"
        f" Tab presses from the top to the first weight: {result['tabs']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
