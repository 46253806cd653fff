"""`attention-port bench`: every port timed side by side on the same inputs, each in its own process.

What is measured: single-head self-attention, query = key = value shape [n, d] (three different
random arrays), d = 64 by default, for every n in --sizes, causal and not, in float64 and in float32
where the port has it:

    numpy             reference.scaled_dot_product_attention (float64 only)
    torch-sdpa        torch.nn.functional.scaled_dot_product_attention on the CPU (torch's own kernel)
    torch-math        torch_port.scaled_dot_product_attention on the CPU (the explicit five steps)
    typescript        typescript/src/attention.ts, the readable port: number[][] (float64 only), up
                      to --typescript-max-n (it holds the n x n matrices and is slow)
    typescript-flash  typescript/src/flash.ts through scaledDotProductAttentionFlat, {shape, data}
                      tensors (float32 = Float32Array storage); skipped with a note until it exists

How: the parent (this module) draws the inputs once per n with numpy's Generator(PCG64([seed, n]))
(standard normal), writes them as raw little-endian float64 files to a temporary folder, and starts
one worker process per port (bench_worker.py for the Python ports, typescript/src/bench.ts under
Node for the TypeScript ones), one after the other, never two at once. A worker times every cell
of its port: a warm-up, then at least --repeats timed runs; a fast cell keeps going while its timed
runs total under --cell-budget seconds (at most --max-repeats runs), a slow one stops at --repeats.
The median is reported. One thread by default (--threads): the parent sets OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS in the worker's environment and the worker calls
torch.set_num_threads. Node runs JavaScript on one thread anyway.

Correctness: every worker writes the output of every cell, and the parent checks it against the
numpy float64 reference on float64 inputs: max over elements of |port - reference| / (weights ·
|value|) (the size of the numbers each output averages) must stay under 1e-12 in float64 and 1e-4 in
float32. A cell that fails is shown as FAILED, with no time, and the command exits 1: a fast wrong
answer never reaches the table.

Memory: for each port one more fresh process does exactly one pass at --memory-n (float64, not
causal) and reports its peak resident set (VmHWM from /proc/self/status, else ru_maxrss), next to
an idle process of the same kind that imported the same modules and did nothing: "above idle" is
what the pass cost. The readable port gets --memory-timeout seconds for it, else "not run".

Output (--out, default bench-results/): bench.md (the tables, also printed), bench.json (everything,
with the machine) and bench.png (GFLOP/s against n; needs matplotlib, the `bench` extra). The
"targets" section checks the fast port's goals (PASS/FAIL, never the exit status).

Exit codes: 0 every cell checked out; 1 a cell FAILED (wrong output or a crash); 2 the job could not
run (a bad argument, Node missing).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import reference
from .bench_worker import PYTHON_PORTS
from .node import MINIMUM_NODE, REPO_ROOT, NodeError, find_node, node_version

BENCH_TS = REPO_ROOT / "typescript" / "src" / "bench.ts"
DEFAULT_OUT = REPO_ROOT / "bench-results"
PACKAGE_PARENT = Path(__file__).resolve().parents[1]  # the folder that holds attention_port/

ALL_PORTS = ("numpy", "torch-sdpa", "torch-math", "typescript", "typescript-flash")
PORT_DTYPES = {
    "numpy": ("float64",),
    "torch-sdpa": ("float64", "float32"),
    "torch-math": ("float64", "float32"),
    "typescript": ("float64",),
    "typescript-flash": ("float64", "float32"),
}
DTYPES = ("float64", "float32")
# max |port - reference| / (weights · |value|), element-wise, must stay under this.
TOLERANCE = {"float64": 1e-12, "float32": 1e-4}
MIB = 1024.0  # KiB per MiB
EXIT_UNAVAILABLE = 3  # the worker's "this port cannot run here" (bench.ts: flash.ts not written yet)


class BenchError(Exception):
    """The bench could not run at all (exit 2); the message is one line."""


@dataclass
class CellResult:
    """One (port, dtype, causal, n): its timing and whether its output checked out."""

    port: str
    dtype: str
    causal: bool
    n: int
    status: str = "FAILED"  # "ok" or "FAILED"
    median_ms: float | None = None
    runs_ms: list[float] = field(default_factory=list)
    warmup_runs: int | None = None
    gflops: float | None = None  # 4 n² d / median, causal counted the same
    vs_numpy: float | None = None  # numpy float64 median / this median (same n and causal)
    error_ratio: float | None = None  # max |port - reference| / (weights · |value|)
    tolerance: float | None = None
    problem: str | None = None  # why it FAILED, in words


@dataclass
class MemoryResult:
    port: str
    status: str  # "ok", "not run", "FAILED"
    n: int
    peak_mib: float | None = None  # the pass's process: VmHWM (ru_maxrss where there is no /proc)
    idle_mib: float | None = None  # an idle process that imported the same modules
    above_idle_mib: float | None = None
    note: str | None = None


@dataclass
class Expected:
    """The numpy float64 reference output for one (n, causal), with the scale of each element."""

    output: np.ndarray  # [n, d]
    scale: np.ndarray  # [n, d]  weights · |value|: the size of the numbers the output averages


# ---------------------------------------------------------------------------------------------
# Inputs and the check


def draw_inputs(folder: Path, sizes: list[int], d: int, seed: int) -> dict[int, tuple[np.ndarray, ...]]:
    """query, key, value [n, d] for each n, standard normal from Generator(PCG64([seed, n])), so
    the inputs at one n do not depend on which other sizes were asked for; written to `folder` as
    n{n}-query.f64 etc. (raw little-endian float64, row-major)."""
    drawn = {}
    for n in sizes:
        rng = np.random.Generator(np.random.PCG64([seed, n]))
        arrays = tuple(rng.standard_normal((n, d)) for _ in range(3))
        for which, array in zip(("query", "key", "value"), arrays, strict=True):
            array.astype("<f8").tofile(folder / f"n{n}-{which}.f64")
        drawn[n] = arrays
    return drawn


def expected_output(query: np.ndarray, key: np.ndarray, value: np.ndarray, causal: bool) -> Expected:
    steps = reference.attention_steps(query, key, value, is_causal=causal)
    return Expected(output=steps.output, scale=steps.weights @ np.abs(value))


def check_output(got: np.ndarray, expected: Expected, dtype: str) -> tuple[float | None, str | None]:
    """(max |got - expected| / scale, None) when within TOLERANCE[dtype], else (ratio, problem)."""
    if got.shape != expected.output.shape:
        return None, f"output has {got.size} numbers, expected {expected.output.size}"
    finite = np.isfinite(got)
    if not finite.all():
        row, col = np.argwhere(~finite)[0]
        return None, f"output[{row}, {col}] is {float(got[row, col])} (not finite)"
    ratios = np.abs(got - expected.output) / np.maximum(expected.scale, np.finfo(np.float64).tiny)
    worst = float(ratios.max())
    if worst <= TOLERANCE[dtype]:
        return worst, None
    row, col = np.unravel_index(int(ratios.argmax()), ratios.shape)
    return worst, (
        f"wrong output: error {worst:.1e} of the output scale > tolerance {TOLERANCE[dtype]:.0e}"
        f" (output[{row}, {col}] = {float(got[row, col])!r}, numpy float64 gives"
        f" {float(expected.output[row, col])!r})"
    )


# ---------------------------------------------------------------------------------------------
# Workers


@dataclass
class Finished:
    returncode: int | None  # None: killed after the time-out
    tail: list[str]  # the last lines it printed


def run_process(command: list[str], env: dict[str, str], timeout: float, echo: bool) -> Finished:
    """Run a worker, echoing its progress lines to stderr; kill it after `timeout` seconds.

    Its peak memory is what the worker itself reads from /proc/self/status (VmHWM), not the
    ru_maxrss that os.wait4 or getrusage give: Linux carries a process's maxrss across fork and
    exec, so a child's ru_maxrss starts at the parent's own peak (here the parent has just held
    the n x n reference matrices) and would hide a small worker's real peak."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=env, text=True, errors="replace",
    )  # fmt: skip
    tail: deque[str] = deque(maxlen=40)

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip("\n"))
            if echo:
                print(f"    {line.rstrip()}", file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        returncode = None
    reader.join(timeout=10)
    return Finished(returncode, list(tail))


def worker_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
        env[name] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_PARENT), env.get("PYTHONPATH")]))
    return env


class Workers:
    """Starts the worker for a port with a plan and reads its result document."""

    def __init__(self, scratch: Path, settings: argparse.Namespace, node: Path | None):
        self.scratch = scratch
        self.settings = settings
        self.node = node
        self.env = worker_env(settings.threads)
        self.count = 0

    def command(self, port: str, plan_path: Path) -> list[str]:
        if port in PYTHON_PORTS:
            return [sys.executable, "-m", "attention_port.bench_worker", str(plan_path)]
        assert self.node is not None
        return [str(self.node), str(BENCH_TS), str(plan_path)]

    def run(self, port: str, mode: str, cells: list[dict], timeout: float, corrupt: bool = False):
        """(result document or None, Finished, a one-line problem or None)."""
        self.count += 1
        s = self.settings
        plan_path = self.scratch / f"plan-{self.count}.json"
        result_path = self.scratch / f"result-{self.count}.json"
        plan = {
            "mode": mode, "port": port, "inputs": str(self.scratch / "inputs"), "d": s.d,
            "cells": cells, "min_runs": s.repeats, "max_runs": max(s.repeats, s.max_repeats),
            "budget_s": s.cell_budget, "warmup_s": s.warmup, "threads": s.threads,
            "outputs": str(self.scratch / "outputs"), "result": str(result_path), "corrupt": corrupt,
        }  # fmt: skip
        plan_path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
        finished = run_process(self.command(port, plan_path), self.env, timeout, echo=mode == "time")
        document = None
        if result_path.is_file():
            try:
                document = json.loads(result_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                return None, finished, f"the worker wrote malformed JSON: {error}"
        if finished.returncode is None:
            return document, finished, f"did not finish within {timeout:g} s"
        if finished.returncode == EXIT_UNAVAILABLE and document and document.get("unavailable"):
            return document, finished, None
        if finished.returncode != 0 or document is None:
            last = next((line for line in reversed(finished.tail) if line.strip()), "no output")
            return document, finished, f"the worker exited with code {finished.returncode}: {last.strip()}"
        return document, finished, None


# ---------------------------------------------------------------------------------------------
# The command


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes comma-separated integers, not {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError(f"--sizes must be positive integers, not {text!r}")
    return sizes


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [p for p in names if p not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0] if unknown else text!r};"
                                         f" choose from {', '.join(allowed)}")  # fmt: skip
    return names


def _positive(kind):
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
        return value

    return parse


def add_parser(commands) -> argparse.ArgumentParser:
    """Register `bench` on cli.py's subparsers."""
    bench = commands.add_parser(
        "bench",
        help="time every port side by side (each in its own process) and write tables and a plot",
        description="Time numpy, torch and the TypeScript ports on the same inputs, check every output"
        " against numpy float64, and write bench.md, bench.json and bench.png.",
    )
    bench.add_argument("--sizes", type=_sizes, default=[64, 256, 1024, 2048, 4096],
                       help="sequence lengths n (default: 64,256,1024,2048,4096)")  # fmt: skip
    bench.add_argument("--d", type=_positive(int), default=64, help="features per row (default: 64)")
    bench.add_argument("--ports", type=lambda t: _names(t, ALL_PORTS, "port"), default=list(ALL_PORTS),
                       help=f"comma-separated, from: {', '.join(ALL_PORTS)} (default: all)")  # fmt: skip
    bench.add_argument("--dtypes", type=lambda t: _names(t, DTYPES, "dtype"), default=list(DTYPES),
                       help="float64,float32 (default: both, where the port has them)")  # fmt: skip
    bench.add_argument("--causal", choices=("both", "on", "off"), default="both",
                       help="causal masking (default: both)")  # fmt: skip
    bench.add_argument("--repeats", type=_positive(int), default=5,
                       help="timed runs per cell, at least (default: 5); the median is reported")  # fmt: skip
    bench.add_argument("--max-repeats", type=_positive(int), default=30,
                       help="timed runs per cell, at most (default: 30)")  # fmt: skip
    bench.add_argument("--cell-budget", type=float, default=0.5, metavar="SECONDS",
                       help="past --repeats, keep timing a cell only while its runs total less"
                       " than this (default: 0.5): fast cells get more runs, slow ones fewer")  # fmt: skip
    bench.add_argument("--warmup", type=float, default=0.25, metavar="SECONDS",
                       help="warm-up: one run, more while under this (default: 0.25)")  # fmt: skip
    bench.add_argument("--threads", type=_positive(int), default=1, help="threads per worker (default: 1)")
    bench.add_argument("--seed", type=int, default=0, help="input seed (default: 0)")
    bench.add_argument("--typescript-max-n", type=_positive(int), default=2048,
                       help="largest n timed for the readable TypeScript port (default: 2048)")  # fmt: skip
    bench.add_argument("--memory-n", type=int, default=4096,
                       help="n of the peak-memory pass (default: 4096; 0: no memory pass)")  # fmt: skip
    bench.add_argument("--memory-timeout", type=_positive(float), default=120.0, metavar="SECONDS",
                       help="time allowed for one memory pass (default: 120); else 'not run'")  # fmt: skip
    bench.add_argument("--worker-timeout", type=_positive(float), default=900.0, metavar="SECONDS",
                       help="time allowed for one port's timing process (default: 900)")  # fmt: skip
    bench.add_argument("--out", default=str(DEFAULT_OUT), help="output folder (default: %(default)s)")
    bench.add_argument("--no-plot", action="store_true", help="do not write bench.png")
    # Test hook: the named port's worker adds 0.01 to one output element, which must be caught.
    bench.add_argument("--corrupt-port", default=None, help=argparse.SUPPRESS)
    bench.set_defaults(handler=command_bench)
    return bench


def _log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def command_bench(args: argparse.Namespace) -> int:
    try:
        return _bench(args)
    except BenchError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _bench(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    causal_values = {"both": [False, True], "on": [True], "off": [False]}[args.causal]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    node = None
    if any(p.startswith("typescript") for p in args.ports):
        node = find_node()
        version = node_version(node)
        if version[:2] < MINIMUM_NODE:
            raise NodeError(f"{node} is Node {'.'.join(map(str, version))}; the bench needs >= 22.18")
    machine = describe_machine(node)

    cells_by_port = {
        port: [
            {"n": n, "dtype": dtype, "causal": causal}
            for causal in causal_values
            for n in args.sizes
            for dtype in PORT_DTYPES[port]
            if dtype in args.dtypes and not (port == "typescript" and n > args.typescript_max_n)
        ]
        for port in args.ports
    }
    results: list[CellResult] = []
    skipped: dict[str, str] = {}
    memory: list[MemoryResult] = []
    with tempfile.TemporaryDirectory(prefix="attention-port-bench-") as scratch_name:
        scratch = Path(scratch_name)
        (scratch / "inputs").mkdir()
        (scratch / "outputs").mkdir()
        memory_sizes = [args.memory_n] if args.memory_n > 0 else []
        _log(f"drawing inputs [n, {args.d}] for n in {sorted(set(args.sizes) | set(memory_sizes))}")
        drawn = draw_inputs(
            scratch / "inputs", sorted(set(args.sizes) | set(memory_sizes)), args.d, args.seed
        )
        _log("numpy float64 reference outputs, for the checks")
        expected = {
            (n, causal): expected_output(*drawn[n], causal) for n in args.sizes for causal in causal_values
        }
        workers = Workers(scratch, args, node)
        for index, port in enumerate(args.ports, 1):
            cells = cells_by_port[port]
            if not cells:
                skipped[port] = "no cell to run with these --sizes/--dtypes"
                continue
            _log(f"[{index}/{len(args.ports)}] {port}: {len(cells)} cells in a process of its own")
            document, _, problem = workers.run(
                port, "time", cells, args.worker_timeout, corrupt=port == args.corrupt_port
            )
            if document is not None and document.get("unavailable"):
                skipped[port] = document["unavailable"]
                _log(f"{port}: skipped: {skipped[port]}")
                continue
            results += judge_cells(port, cells, document, problem, expected)
        if memory_sizes:
            memory = measure_memory(workers, [p for p in args.ports if p not in skipped], args)

    machine["load_average_end"] = _load_average()
    add_ratios(results)
    targets = check_targets(results, memory, skipped)
    failed = [r for r in results if r.status != "ok"] + [m for m in memory if m.status == "FAILED"]
    settings = {
        "sizes": args.sizes, "d": args.d, "ports": args.ports, "dtypes": args.dtypes,
        "causal": args.causal, "repeats": args.repeats, "max_repeats": args.max_repeats,
        "cell_budget_s": args.cell_budget, "warmup_s": args.warmup, "threads": args.threads,
        "seed": args.seed, "typescript_max_n": args.typescript_max_n, "memory_n": args.memory_n,
        "tolerance": TOLERANCE, "flops_per_pass": "4*n*n*d (causal counted the same)",
    }  # fmt: skip
    plot_path = out / "bench.png"
    plot_note = None
    if args.no_plot:
        plot_note = "not written (--no-plot)"
    else:
        plot_note = write_plot(results, plot_path, args.d, args.threads)
    report = {
        "format": "attention-port-bench",
        "version": 1,
        "date": machine["date"],
        "machine": machine,
        "settings": settings,
        "results": [asdict(r) for r in results],
        "memory": [asdict(m) for m in memory],
        "targets": targets,
        "skipped": skipped,
        "failed": len(failed),
        "plot": None if plot_note else str(plot_path),
        "seconds": round(time.perf_counter() - started, 1),
    }
    markdown = format_markdown(report, plot_note)
    (out / "bench.json").write_text(json.dumps(report, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    (out / "bench.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    _log(f"wrote {out / 'bench.md'}, {out / 'bench.json'}" + ("" if plot_note else f", {plot_path}")
         + f" in {report['seconds']:.0f} s")  # fmt: skip
    if failed:
        _log(f"{len(failed)} FAILED (see the tables)")
        return 1
    return 0


def judge_cells(port, cells, document, problem, expected) -> list[CellResult]:
    """Each cell's timing, kept only when its output checks out against numpy float64."""
    by_key = {}
    for record in (document or {}).get("cells", []):
        by_key[(record["n"], record["dtype"], record["causal"])] = record
    results = []
    for cell in cells:
        n, dtype, causal = cell["n"], cell["dtype"], cell["causal"]
        result = CellResult(port=port, dtype=dtype, causal=causal, n=n, tolerance=TOLERANCE[dtype])
        results.append(result)
        record = by_key.get((n, dtype, causal))
        if record is None:
            result.problem = problem or "the worker gave no result for this cell"
            continue
        if record.get("error"):
            result.problem = record["error"]
            continue
        try:
            got = np.fromfile(record["output"], dtype="<f8")
        except (OSError, KeyError) as error:
            result.problem = f"no output file: {error}"
            continue
        expect = expected[(n, causal)]
        if got.size == expect.output.size:
            got = got.reshape(expect.output.shape)
        result.error_ratio, result.problem = check_output(got, expect, dtype)
        result.runs_ms = record["runs_ms"]
        result.warmup_runs = record.get("warmup_runs")
        if result.problem is None:
            result.status = "ok"
            result.median_ms = statistics.median(result.runs_ms)
            result.gflops = 4.0 * n * n * expected[(n, causal)].output.shape[1] / (result.median_ms * 1e6)
        else:
            result.runs_ms = []  # a wrong answer's time is not reported anywhere
    return results


def add_ratios(results: list[CellResult]) -> None:
    """vs_numpy: numpy float64's median over this median, at the same n and causal (numpy has
    float64 only, so float32 rows are compared with numpy float64)."""
    numpy_ms = {(r.n, r.causal): r.median_ms for r in results if r.port == "numpy" and r.status == "ok"}
    for r in results:
        base = numpy_ms.get((r.n, r.causal))
        if r.status == "ok" and base:
            r.vs_numpy = base / r.median_ms


def measure_memory(workers: Workers, ports: list[str], args) -> list[MemoryResult]:
    n = args.memory_n
    rows = []
    for port in ports:
        row = MemoryResult(port=port, status="FAILED", n=n)
        rows.append(row)
        _log(f"memory: {port}, one pass at n={n} (float64, not causal), and an idle process")
        idle, _, idle_problem = workers.run(port, "idle", [], args.memory_timeout)
        if idle_problem:
            row.note = f"idle process: {idle_problem}"
            continue
        cell = {"n": n, "dtype": "float64", "causal": False}
        document, finished, problem = workers.run(port, "memory", [cell], args.memory_timeout)
        cell_error = ((document or {}).get("cells") or [{}])[0].get("error")
        if problem or cell_error:
            if finished.returncode is None:  # timed out: the readable port at large n
                row.status, row.note = "not run", f"did not finish within {args.memory_timeout:g} s"
            else:
                row.note = problem or cell_error
            continue
        row.peak_mib, row.idle_mib = _peak_mib(document), _peak_mib(idle)
        if not document.get("vm_hwm_kib"):
            row.note = "ru_maxrss (no /proc/self/status): may include the parent's peak"
        row.above_idle_mib = row.peak_mib - row.idle_mib
        row.status = "ok"
    return rows


def _peak_mib(document: dict) -> float:
    return (document.get("vm_hwm_kib") or document["ru_maxrss_kib"]) / MIB


# ---------------------------------------------------------------------------------------------
# Targets (issue 4): reported, never the exit status

FLASH, READABLE = "typescript-flash", "typescript"


def check_targets(results: list[CellResult], memory: list[MemoryResult], skipped: dict) -> list[dict]:
    def cell(port, dtype, n, causal):
        return next(
            (r for r in results if (r.port, r.dtype, r.n, r.causal) == (port, dtype, n, causal)
             and r.status == "ok"), None,
        )  # fmt: skip

    def missing(*what: str) -> str:
        if FLASH in skipped:
            return f"{FLASH} not run ({skipped[FLASH]})"
        return "not measured: " + ", ".join(what)

    targets = []
    flash, readable = cell(FLASH, "float64", 1024, False), cell(READABLE, "float64", 1024, False)
    name = "flash float64 >= 3.5x the readable port at n=1024 (not causal)"
    if flash and readable:
        speedup = readable.median_ms / flash.median_ms
        targets.append(_target(name, speedup >= 3.5, f"{speedup:.2f}x ({flash.median_ms:.1f} ms vs"
                                                     f" {readable.median_ms:.1f} ms)"))  # fmt: skip
    else:
        targets.append(
            {
                "name": name,
                "status": "n/a",
                "detail": missing(
                    *([] if flash else [f"{FLASH} float64 n=1024"]),
                    *([] if readable else [f"{READABLE} n=1024"]),
                ),
            }
        )
    name = "flash float64 >= 3.5 GFLOP/s at n=1024 (not causal)"
    if flash:
        targets.append(_target(name, flash.gflops >= 3.5, f"{flash.gflops:.2f} GFLOP/s"))
    else:
        targets.append({"name": name, "status": "n/a", "detail": missing(f"{FLASH} float64 n=1024")})
    mem = next((m for m in memory if m.port == FLASH), None)
    name = "flash peak memory at n=4096 within 32 MiB of an idle Node process"
    if mem and mem.status == "ok" and mem.n == 4096:
        targets.append(_target(name, mem.above_idle_mib <= 32, f"{mem.above_idle_mib:.1f} MiB above idle"
                               f" ({mem.peak_mib:.1f} MiB peak, idle {mem.idle_mib:.1f} MiB)"))  # fmt: skip
    else:
        note = mem.note if mem and mem.note else "memory pass at n=4096"
        targets.append({"name": name, "status": "n/a", "detail": missing(note)})
    full, causal = cell(FLASH, "float64", 4096, False), cell(FLASH, "float64", 4096, True)
    name = "flash float64 causal >= 1.7x faster than not causal at n=4096"
    if full and causal:
        speedup = full.median_ms / causal.median_ms
        targets.append(_target(name, speedup >= 1.7, f"{speedup:.2f}x ({causal.median_ms:.1f} ms causal vs"
                                                     f" {full.median_ms:.1f} ms)"))  # fmt: skip
    else:
        targets.append({"name": name, "status": "n/a", "detail": missing(f"{FLASH} float64 n=4096 both")})
    return targets


def _target(name: str, passed: bool, detail: str) -> dict:
    return {"name": name, "status": "PASS" if passed else "FAIL", "detail": detail}


# ---------------------------------------------------------------------------------------------
# Report


def describe_machine(node: Path | None) -> dict:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = os.cpu_count()

    def version(package: str) -> str | None:
        try:
            return importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": version("torch"),
        "node": None if node is None else ".".join(map(str, node_version(node))),
        "load_average_start": _load_average(),  # 1-minute; other work on the machine skews the times
    }


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError):
        pass
    return None


def _load_note(machine: dict, threads: int) -> list[str]:
    start, end = machine.get("load_average_start"), machine.get("load_average_end")
    if start is None or end is None:
        return []
    note = f"Load average (1 min): {start:.2f} at the start, {end:.2f} at the end"
    # The workers run one at a time, so the bench itself adds about `threads` to the load.
    if max(start, end) > threads + 0.5:
        note += "; other work was running on this machine, so the times are noisy"
    return [note + "."]


def _ms(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def format_markdown(report: dict, plot_note: str | None) -> str:
    m, s = report["machine"], report["settings"]
    results = [CellResult(**r) for r in report["results"]]
    port_order = {p: i for i, p in enumerate(ALL_PORTS)}
    results.sort(key=lambda r: (r.causal, r.n, port_order[r.port], DTYPES.index(r.dtype)))
    lines = [
        "# attention-port bench",
        "",
        f"{m['date']}; {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB;"
        f" Python {m['python']}, numpy {m['numpy']}, torch {m['torch']}, Node {m['node']}.",
        f"Single-head self-attention, query/key/value [n, {s['d']}], seed {s['seed']};"
        f" {s['threads']} thread(s) per worker; each port in its own process.",
        *_load_note(m, s["threads"]),
        "",
        "## Time",
        "",
        "| port | dtype | causal | n | median ms | runs | GFLOP/s | x numpy | check |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        causal = "yes" if r.causal else "no"
        if r.status != "ok":
            lines.append(
                f"| {r.port} | {r.dtype} | {causal} | {r.n} | FAILED | | | | {_cell_text(r.problem)} |"
            )
            continue
        ratio = "" if r.vs_numpy is None else f"{r.vs_numpy:.2f}" + ("†" if r.dtype != "float64" else "")
        lines.append(
            f"| {r.port} | {r.dtype} | {causal} | {r.n} | {_ms(r.median_ms)} | {len(r.runs_ms)} |"
            f" {r.gflops:.2f} | {ratio} | ok ({r.error_ratio:.0e}) |"
        )
    lines += [
        "",
        f"- median ms: median of the timed runs after a warm-up; at least {s['repeats']} runs, more (up to"
        f" {s['max_repeats']}) while a cell's runs total under {s['cell_budget_s']:g} s, so slow cells have"
        f" exactly {s['repeats']}.",
        "- GFLOP/s counts 4·n²·d flops per pass, for causal passes too (they do about half the work),"
        " so a causal speed-up shows as a higher rate.",
        "- x numpy: numpy float64's median / this median at the same n and causal (above 1: faster than"
        " numpy). † numpy has no float32, so float32 rows are compared with numpy float64.",
        f"- check: max |output - numpy float64| / (weights · |value|), within {TOLERANCE['float64']:.0e}"
        f" (float64) or {TOLERANCE['float32']:.0e} (float32); a FAILED cell shows no time.",
    ]
    if s["typescript_max_n"] < max(s["sizes"]) and "typescript" in s["ports"]:
        lines.append(f"- The readable typescript port is timed up to n={s['typescript_max_n']} only"
                     " (it holds the n x n matrices in nested arrays and is slow).")  # fmt: skip
    lines += _gflops_pivot(results, s["sizes"], port_order)
    if report["memory"]:
        lines += [
            "",
            f"## Peak memory (fresh process, one pass, n={report['memory'][0]['n']}, float64, not causal)",
            "",
            "| port | peak RSS MiB | idle MiB | above idle MiB | note |",
            "|---|---:|---:|---:|---|",
        ]
        for row in report["memory"]:
            if row["status"] == "ok":
                lines.append(f"| {row['port']} | {row['peak_mib']:.1f} | {row['idle_mib']:.1f} |"
                             f" {row['above_idle_mib']:.1f} | |")  # fmt: skip
            else:
                text = "not run" if row["status"] == "not run" else "FAILED"
                lines.append(f"| {row['port']} | {text} | | | {_cell_text(row['note'])} |")
        lines += [
            "",
            "- peak RSS: the pass's process at exit (VmHWM); idle: a process of the same kind that imported"
            " the same modules and did nothing else (Python ports: Python with the port's imports;"
            " TypeScript ports: Node with bench.ts and the port's module).",
        ]
    lines += ["", "## Targets", ""]
    lines += [f"- {t['status']}: {t['name']}: {t['detail']}" for t in report["targets"]]
    if report["skipped"]:
        lines += ["", "## Skipped", ""]
        lines += [f"- {port}: {why}" for port, why in report["skipped"].items()]
    lines += ["", f"Plot: {plot_note or 'bench.png'}. All numbers: bench.json.", ""]
    return "\n".join(lines)


def _gflops_pivot(results: list[CellResult], sizes: list[int], port_order: dict) -> list[str]:
    rows: dict[tuple, dict[int, str]] = {}
    for r in results:
        key = (r.causal, port_order[r.port], r.port, DTYPES.index(r.dtype), r.dtype)
        rows.setdefault(key, {})[r.n] = f"{r.gflops:.2f}" if r.status == "ok" else "FAILED"
    lines = [
        "",
        "### GFLOP/s at a glance",
        "",
        "| port | dtype | causal | " + " | ".join(f"n={n}" for n in sizes) + " |",
        "|---|---|---|" + "---:|" * len(sizes),
    ]
    for key in sorted(rows):
        causal, _, port, _, dtype = key
        cells = " | ".join(rows[key].get(n, "") for n in sizes)
        lines.append(f"| {port} | {dtype} | {'yes' if causal else 'no'} | {cells} |")
    return lines


def _cell_text(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def write_plot(results: list[CellResult], path: Path, d: int, threads: int) -> str | None:
    """GFLOP/s against n (log-log), one line per port and dtype, one panel per causal setting.
    Returns None when written, else why not."""
    try:
        import matplotlib
    except ImportError:
        return "not written: matplotlib is not installed (pip install -e '.[bench]')"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if r.status == "ok"]
    if not ok:
        return "not written: no cell to plot"
    panels = sorted({r.causal for r in ok})
    figure, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.8), squeeze=False, sharey=True)
    colors = dict(
        zip(ALL_PORTS, ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"), strict=True)
    )
    for axis, causal in zip(axes[0], panels, strict=True):
        for port in ALL_PORTS:
            for dtype in DTYPES:
                series = sorted(
                    (r.n, r.gflops) for r in ok if (r.port, r.dtype, r.causal) == (port, dtype, causal)
                )
                if series:
                    xs, ys = zip(*series, strict=True)
                    axis.plot(xs, ys, marker="o", color=colors[port], label=f"{port} {dtype}",
                              linestyle="-" if dtype == "float64" else "--")  # fmt: skip
        sizes = sorted({r.n for r in ok})
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(sizes, [str(n) for n in sizes])
        axis.set_xlabel("n (query = key = value rows)")
        axis.set_title("causal (flops counted as if full)" if causal else "not causal")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel(f"GFLOP/s (4·n²·{d} flops per pass)")
    axes[0][-1].legend(fontsize=8, loc="best")
    figure.suptitle(f"attention-port bench: single-head self-attention, {threads} thread(s) per port")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return None


__all__ = ["add_parser", "command_bench", "check_output", "draw_inputs", "expected_output"]
