"""The npm package in a browser app bundled by Vite, as a consumer builds one: the packed tarball in
the app's node_modules, typescript/examples/vite-page as the app, served by Vite's dev server and by
`vite preview` of a production build on 127.0.0.1, in Debian's Chromium (playwright, by path).

The readable port, flash.ts and the SIMD port (its kernel loaded the package's own way, the .wasm
Vite emitted) compute every small valid fixture case in the page; each output is held to the
oracle's under the tolerance rule (compare.py), float64 for the nested entries and float32 for the
SIMD port's Float32Array entry. The page also runs the package's conformance kit on every case
through each of them, in the same dtypes. Skips with a reason without Chromium, playwright or the npm tools.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALL_CASES
from packing import NPM, VITE, vite_app, vite_server

from attention_port import paths, vocabulary
from attention_port.harness import browser, compare

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not paths.IN_CHECKOUT, reason="packs the npm package from a checkout"),
]

CHROMIUM = browser.find_chromium()
if CHROMIUM is None:
    pytest.skip("no Chromium found (apt-get install chromium, or set $CHROMIUM)", allow_module_level=True)
if not (NPM.is_file() and VITE.is_file()):
    pytest.skip("needs the project's npm and vite (run scripts/setup)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")

# Cases whose inputs are small enough to hand to the page in one call, and inside the contract.
MAX_NUMBERS = 4096
PORTS = {"readable": "float64", "flash": "float64", "simd": "float64", "simdFloat32": "float32"}


def _cases():
    chosen = []
    for case in ALL_CASES:
        if case.expected is None or any(compare.outside_contract(case, d) for d in ("float64", "float32")):
            continue
        arrays = [
            case.inputs[n] for n in ("query", "key", "value", "attn_mask") if case.inputs[n] is not None
        ]
        if sum(np.asarray(a).size for a in arrays) <= MAX_NUMBERS:
            chosen.append(case)
    return chosen


CASES = _cases()


def _tensor(array: np.ndarray) -> dict:
    return {"shape": list(array.shape), "data": array.ravel().tolist(), "bool": array.dtype == np.bool_}


def _page_case(case) -> dict:
    options = {vocabulary.javascript_name(k): v for k, v in case.params.items() if v is not None}
    if case.inputs["attn_mask"] is not None:
        options["attnMask"] = _tensor(case.inputs["attn_mask"])
    tensors = {name: _tensor(case.inputs[name]) for name in ("query", "key", "value")}
    return {**tensors, "options": options}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    return vite_app(tmp_path_factory.mktemp("vite"))


@pytest.fixture(scope="module")
def chromium():
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.mark.parametrize("server", ["dev", "preview"])
def test_the_packages_ports_compute_every_small_fixture_case_in_a_vite_page(app, chromium, server):
    assert len(CASES) >= 40, [c.id for c in CASES]
    problems: list[str] = []
    with vite_server(app, server) as url:
        page = chromium.new_page()
        page.on("console", lambda m: m.type == "error" and problems.append(m.text))
        page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} {r.url}"))
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.goto(url)
        page.wait_for_function("() => window.attentionPage !== undefined", timeout=30_000)
        build = page.evaluate("() => attentionPage.init()")
        assert build == "relaxed"  # Chromium has relaxed SIMD: the build the engine takes
        results = page.evaluate("cases => attentionPage.outputs(cases)", [_page_case(c) for c in CASES])
        kit = page.evaluate("() => attentionPage.conformance()")
        # The headers of vite.config.js isolate the page: workers share the work, bit for bit.
        assert page.evaluate("() => attentionPage.crossOriginIsolated()")
        threads = page.evaluate("() => attentionPage.init({ workers: 3 })")
        started = [worker.url for worker in page.workers]  # up: initSimd waits until they are ready
        one, three = (page.evaluate(f"() => attentionPage.withWorkers(300, 32, {w})") for w in (1, 3))
        page.close()
    assert build == threads
    assert len(started) == 2 and all("simd-worker-web" in url for url in started), started
    assert one == three and len(one) == 300 * 32
    failures = []
    for case, outputs in zip(CASES, results, strict=True):
        for port, dtype in PORTS.items():
            actual = np.array(outputs[port], dtype=np.float64).reshape(case.expected.output.shape)
            check = compare.check_output(case, actual, dtype)
            if not check.passed:
                failures.append(f"{case.id} {port}: {check.problem or check.budget_used}")
    assert failures == []
    # The conformance kit in the page, on every fixture case (those with an error to throw too): no
    # port fails; a case is outside only where the contract defines no answer in that dtype.
    every = ALL_CASES
    for port, counts in kit.items():
        dtype = PORTS[port]
        outside = sum(
            c.expected is not None and compare.outside_contract(c, dtype) is not None for c in every
        )
        assert counts["failures"] == [], port
        assert (counts["pass"], counts["outside"]) == (len(every) - outside, outside), (port, counts)
    assert sorted(kit) == sorted(PORTS)
    assert problems == []
