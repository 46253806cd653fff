"""`attention-port bench`: the command, the port table and the worker processes.

What is measured: single-head self-attention, query, key and value [n, d] (three different random
arrays), d = 64 by default, for every n in --sizes, causal and not, in float64 and float32 where
the port has them, plus one odd shape (--odd-shape, n = 1000 with d = 80: tails that fill no tile),
for every port in PORTS below. Decode rows (--decode-keys): one decode step, a query [1, Hq, 1, E]
against a cache of n keys and values [1, Hkv, n, E] (--decode-shape, default Hq = 32, Hkv = 8,
E = 128: grouped-query heads, no mask), for the ports that take it. Windowed rows
(--window-prefill, --window-decode): a causal prefill at n = 16,384 with window (1023, 0), beside
the plain causal pass at the same n, and a decode step whose row sits at position 16,384 with
window (4096, 0), beside a step over 4,096 keys, for every port and both onnxruntime peers (a
peer's graph masks outside the window: peers.py). Beside them the machine's
limits, measured in the same run (--bandwidth-mib): the read bandwidth of a streaming sum over a
buffer several times the last-level cache, natively (numpy) and in WebAssembly SIMD, and the
128-bit SIMD multiply-add peak (a WebAssembly loop of independent multiply-adds). Every row reports
its share of its limit: a decode row its bytes of key and value read per step over its time
against the read bandwidth (WebAssembly's for the ports that run in a JavaScript engine, native
for the others), a prefill row its GFLOP/s against the 128-bit peak.

How: the parent (this module) draws the inputs once per (n, d) with numpy's
Generator(PCG64([seed, n, d])) (standard normal), writes them as raw little-endian float64 files to
a temporary folder, and starts one worker process per port (worker.py for the Python ports,
typescript/bench/worker.ts under Node for the others), one after the other, never two at once. A
worker times every cell of its port: a warm-up, then at least --repeats timed runs; a fast cell
keeps going while its timed runs total under --cell-budget seconds (at most --max-repeats runs).
The median is reported. One thread by default (--threads): the parent sets OMP_NUM_THREADS and
friends in the worker's environment, the Python worker calls torch.set_num_threads and the
onnxruntime sessions get as many intra-op threads.

Correctness: each worker writes every output; check.py holds it to compare.py's rule against numpy
float64 before its time is kept. A wrong output is FAILED, shows no time, and the command exits 1.

Memory: for each port one more fresh process does exactly one pass at --memory-n (float64, not
causal) and reports its peak resident set (VmHWM), beside an idle process of the same kind that
imported the same modules; ports whose memory is linear in n do one more pass at
--linear-memory-n. A pass that does not finish within --memory-timeout is "not run".

Exit codes: 0 every cell checked out; 1 a cell FAILED (wrong output or a crash); 2 the job could not
run (a bad argument, Node missing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention_port import paths
from attention_port.args import OneLineParser, integers, names, not_negative, positive
from attention_port.bench import check, peers, report
from attention_port.bench.timing import cell_input_path, cell_shapes, input_path
from attention_port.files import output_problem
from attention_port.harness.node import NodeError, checked_node
from attention_port.paths import BENCH_TS, REPO_ROOT
from attention_port.port_table import BY_NAME as PORT_ROWS
from attention_port.port_table import ROWS as PORT_TABLE

DEFAULT_OUT = REPO_ROOT / "bench-results"
PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # the folder that holds attention_port/
DTYPES = ("float64", "float32")
CAUSAL = {"off": [False], "on": [True], "both": [False, True]}  # --causal


@dataclass(frozen=True)
class BenchPort:
    """One way of timing a port of the port table (port_table.py): `port` names its row, None for a
    bench-only peer. The ports' own are their rows' bench lists (contract/ports.json);
    typescript/bench/worker.ts has the Node side of each "node" worker, worker.py the Python side
    of each "python" one."""

    name: str
    port: str | None  # the row of the port table it times
    worker: str  # "python" (worker.py) or "node" (typescript/bench/worker.ts)
    dtypes: tuple[str, ...]
    what: str  # the file or package, for the tables
    linear_memory: bool = False  # memory O(n): one more memory pass at --linear-memory-n
    # timed up to --typescript-max-n only (webgpu: on SwiftShader, a CPU emulation, one call at
    # n = 4096 takes minutes)
    slow: bool = False
    peer: bool = False  # a bench-only package: skipped with a note where it is not installed
    decode: bool = False  # takes the decode rows
    decode_only: bool = False  # takes the decode rows alone: no prefill cells, no memory pass
    engine: bool = False  # runs in a JavaScript engine: its decode share is of WebAssembly's bandwidth

    @classmethod
    def of(cls, port: str, entry: dict) -> BenchPort:
        """A row of a port's bench list; its worker is where the port runs (Node's, else Python's,
        which drives the browser too)."""
        worker = "node" if PORT_ROWS[port].runs_in == "node" else "python"
        return cls(**{**entry, "dtypes": tuple(entry["dtypes"])}, port=port, worker=worker)

    @property
    def browser(self) -> bool:
        """Runs in Chromium (its row's runs_in): skipped with a note where there is none; no memory pass."""
        return self.port is not None and PORT_ROWS[self.port].runs_in == "browser"


# The bench-only peers, after the port table's own rows (each row's bench list, in table order).
PEERS = (
    BenchPort(
        "onnxruntime-node", None, "node", DTYPES, "CPU provider, peers.py's graph", peer=True, decode=True
    ),
    BenchPort(
        "onnxruntime-web",
        None,
        "node",
        DTYPES,
        "WebAssembly backend in Node, peers.py's graph",
        peer=True,
        decode=True,
        engine=True,
    ),  # fmt: skip
)
PORTS = (*(BenchPort.of(row.name, entry) for row in PORT_TABLE for entry in row.bench), *PEERS)
# The machine's limits: two workers that time no attention (worker.py's native-limits, bench/worker.ts's
# wasm-limits), each one cell streaming over a buffer of --bandwidth-mib.
LIMIT_PORTS = (
    BenchPort("native-limits", None, "python", ("float32",), "numpy's sum of a float32 buffer"),
    BenchPort(
        "wasm-limits", None, "node", ("float32",), "simd.ts's kernel module: limitReadSum, limitMaddPeak"
    ),
)
PORT_NAMES = tuple(p.name for p in PORTS)


@dataclass
class CellResult:
    """One (port, dtype, causal, n, d): its timing and whether its output checked out."""

    port: str
    dtype: str
    causal: bool
    n: int  # prefill: tokens; decode: keys read by the step
    d: int
    kind: str = "prefill"  # or "decode": one step, query [1, hq, 1, d], key and value [1, hkv, n, d]
    hq: int = 1
    hkv: int = 1
    window: tuple[int, int] | None = None  # a windowed cell's (left, right)
    status: str = "FAILED"  # "ok" or "FAILED"
    median_ms: float | None = None
    runs_ms: list[float] = field(default_factory=list)
    warmup_runs: int | None = None
    gflops: float | None = None  # 4 n² d / median, causal counted the same (decode: 4 hq n d)
    read_gbps: float | None = None  # decode: bytes of key and value (2 hkv n d) / median
    share: float | None = None  # of its limit: decode read_gbps / bandwidth, prefill gflops / peak
    limit: str | None = None  # which limit `share` is of
    vs_numpy: float | None = None  # numpy float64 median / this median (same n, d and causal)
    budget_used: float | None = None  # of compare.py's error budget against numpy float64 (1.0 = all)
    backend: str | None = None  # the kernel torch ran (torch-sdpa)
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


# ---------------------------------------------------------------------------------------------
# Workers


def run_process(command: list[str], env: dict[str, str], timeout: float, echo: bool):
    """Run a worker, echoing its progress lines to stderr; kill it after `timeout` seconds. Returns
    its exit code (None: killed) and its last lines. Its peak memory is what the worker reads
    itself, not os.wait4's ru_maxrss (worker.peak_rss_kib says why)."""
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
    return returncode, list(tail)


class Workers:
    """Starts the worker for a port with a plan and reads its result document."""

    def __init__(self, scratch: Path, settings: argparse.Namespace, node: Path | None):
        self.scratch = scratch
        self.settings = settings
        self.node = node
        self.env = dict(os.environ)
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
            self.env[name] = str(settings.threads)
        self.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(PACKAGE_PARENT), os.environ.get("PYTHONPATH")])
        )
        self.count = 0
        self.versions: dict[str, dict] = {}

    def run(self, port: BenchPort, mode: str, cells: list[dict], timeout: float, corrupt: bool = False):
        """(result document or None, exit code or None when killed, a one-line problem or None)."""
        self.count += 1
        s = self.settings
        plan_path = self.scratch / f"plan-{self.count}.json"
        result_path = self.scratch / f"result-{self.count}.json"
        plan = {
            "mode": mode, "port": port.name, "inputs": str(self.scratch / "inputs"), "cells": cells,
            "min_runs": s.repeats, "max_runs": max(s.repeats, s.max_repeats), "budget_s": s.cell_budget,
            "warmup_s": s.warmup, "threads": s.threads, "outputs": str(self.scratch / "outputs"),
            "models": str(self.scratch / "models"), "peers": str(peers.PEERS_FOLDER),
            "result": str(result_path), "corrupt": corrupt,
        }  # fmt: skip
        plan_path.write_text(json.dumps(plan, indent=1), encoding="utf-8")
        if port.worker == "python":
            command = [sys.executable, "-m", "attention_port.bench.worker", str(plan_path)]
        else:
            command = [str(self.node), str(BENCH_TS), str(plan_path)]
        returncode, tail = run_process(command, self.env, timeout, echo=mode == "time")
        document = None
        if result_path.is_file():
            try:
                document = json.loads(result_path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                return None, returncode, f"the worker wrote malformed JSON: {error}"
            self.versions.setdefault(port.name, document.get("versions") or {})
        if returncode is None:
            return document, returncode, f"did not finish within {timeout:g} s"
        if returncode != 0 or document is None:
            last = next((line for line in reversed(tail) if line.strip()), "no output")
            return document, returncode, f"the worker exited with code {returncode}: {last.strip()}"
        return document, returncode, None


# ---------------------------------------------------------------------------------------------
# The command


def _shape(text: str) -> tuple[int, int] | None:
    if text == "none":
        return None
    try:
        n, d = (int(part) for part in text.split("x"))
    except ValueError:
        n = d = 0
    if n < 1 or d < 1:
        raise argparse.ArgumentTypeError(f"takes NxD with N, D >= 1 (e.g. 1000x80) or none, not {text!r}")
    return n, d


def _sizes_or_none(text: str) -> list[int]:
    return [] if text == "none" else integers(text)


def _window(text: str) -> tuple[int, int] | None:
    """NxLEFT: n and the window's left side (its right is 0), or none."""
    if text == "none":
        return None
    try:
        n, left = (int(part) for part in text.split("x"))
    except ValueError:
        n, left = 0, -1
    if n < 1 or left < 0:
        raise argparse.ArgumentTypeError(
            f"takes NxLEFT with N >= 1 and LEFT >= 0 (e.g. 16384x1023) or none, not {text!r}"
        )
    return n, left


def _heads(text: str) -> tuple[int, int, int]:
    try:
        hq, hkv, e = (int(part) for part in text.split("x"))
    except ValueError:
        hq = hkv = e = 0
    if min(hq, hkv, e) < 1 or hq % hkv:
        raise argparse.ArgumentTypeError(
            f"takes HQxHKVxE with HQ a multiple of HKV (e.g. 32x8x128), not {text!r}"
        )
    return hq, hkv, e


def bandwidth_bytes(mib: int | None) -> int:
    """The read-bandwidth buffer: --bandwidth-mib, or 3 x the last-level cache within 256..2048 MiB
    (a buffer that fits the cache would measure the cache)."""
    if mib is not None:
        return mib * 2**20
    llc = 32 * 2**20
    for index in range(4, 0, -1):
        try:
            text = Path(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size").read_text().strip()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        llc = int(text.rstrip("KMG")) * units.get(text[-1], 1)
        break
    return min(max(3 * llc, 256 * 2**20), 2048 * 2**20)


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="attention-port bench",
        description="Time numpy, torch, the TypeScript ports and the onnxruntime peers on the same inputs,"
        " check every output against numpy float64 with compare.py's rule, and write bench.md, bench.json"
        " and bench.png.",
    )
    add = parser.add_argument
    add("--sizes", type=integers, default=[64, 256, 1024, 2048, 4096],
        help="sequence lengths n (default: 64,256,1024,2048,4096)")  # fmt: skip
    add("--d", type=positive(int), default=64, help="features per row (default: 64)")
    add("--odd-shape", type=_shape, default=(1000, 80),
        help="one more shape NxD, not causal, that fills no tile (default: 1000x80; none: skip)")  # fmt: skip
    add("--ports", type=lambda t: names(t, PORT_NAMES, "port"), default=list(PORT_NAMES),
        help=f"comma-separated, from: {', '.join(PORT_NAMES)} (default: all)")  # fmt: skip
    add("--dtypes", type=lambda t: names(t, DTYPES, "dtype"), default=list(DTYPES),
        help="float64,float32 (default: both, where the port has them)")  # fmt: skip
    add("--causal", choices=("both", "on", "off"), default="both", help="causal masking (default: both)")
    add("--repeats", type=positive(int), default=5,
        help="timed runs per cell, at least (default: 5); the median is reported")  # fmt: skip
    add("--max-repeats", type=positive(int), default=30, help="timed runs per cell, at most (default: 30)")
    add("--cell-budget", type=not_negative(float), default=0.5, metavar="SECONDS",
        help="past --repeats, keep timing a cell only while its runs total less than this"
        " (default: 0.5): fast cells get more runs, slow ones fewer")  # fmt: skip
    add("--warmup", type=not_negative(float), default=0.25, metavar="SECONDS",
        help="warm-up: one run, more while under this (default: 0.25)")  # fmt: skip
    add("--threads", type=positive(int), default=1, help="threads per worker (default: 1)")
    add("--seed", type=not_negative(int), default=0, help="input seed (default: 0)")
    add("--typescript-max-n", type=positive(int), default=2048,
        help="largest n timed for the readable TypeScript port and webgpu (default: 2048)")  # fmt: skip
    add("--memory-n", type=not_negative(int), default=4096,
        help="n of every port's peak-memory pass (default: 4096; 0: no memory pass)")  # fmt: skip
    add("--linear-memory-n", type=not_negative(int), default=16384,
        help="n of one more pass for ports with memory linear in n (default: 16384; 0: none)")  # fmt: skip
    add("--memory-timeout", type=positive(float), default=120.0, metavar="SECONDS",
        help="time allowed for one memory pass (default: 120); else 'not run'")  # fmt: skip
    add("--worker-timeout", type=positive(float), default=900.0, metavar="SECONDS",
        help="time allowed for one port's timing process (default: 900)")  # fmt: skip
    add("--decode-keys", type=_sizes_or_none, default=[1024, 4096, 16384],
        help="keys in the cache of each decode row (default: 1024,4096,16384; none: none)")  # fmt: skip
    add("--decode-shape", type=_heads, default=(32, 8, 128), metavar="HQxHKVxE",
        help="query heads, key/value heads and features of a decode step (default: 32x8x128)")  # fmt: skip
    add("--window-prefill", type=_window, default=(16384, 1023), metavar="NxLEFT",
        help="a windowed causal prefill at n with window (LEFT, 0), beside the plain causal pass at"
        " that n (default: 16384x1023; none: skip)")  # fmt: skip
    add("--window-decode", type=_window, default=(16384, 4096), metavar="POSITIONxLEFT",
        help="a windowed decode step, its row at POSITION (POSITION + 1 keys) with window (LEFT, 0),"
        " beside a step over LEFT keys (default: 16384x4096; none: skip)")  # fmt: skip
    add("--bandwidth-mib", type=not_negative(int), default=None,
        help="buffer of the read-bandwidth measurement, MiB (default: 3 x the last-level cache, within"
        " 256..2048; 0: no limits measured)")  # fmt: skip
    add("--out", default=str(DEFAULT_OUT), help="output folder (default: %(default)s)")
    add("--no-plot", action="store_true", help="do not write bench.png")
    # Test hook: the named port's worker adds 0.01 to one output element, which must be caught.
    add("--corrupt-port", default=None, help=argparse.SUPPRESS)
    return parser


def _log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        # Its peers, plots and default folder are the checkout's; from a wheel it would write
        # under site-packages, so it refuses there in one line.
        paths.require_checkout("bench")
        return _bench(args)
    except paths.NotACheckout as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except NodeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def plan_cells(port: BenchPort, args: argparse.Namespace) -> list[dict]:
    dtypes = [dtype for dtype in port.dtypes if dtype in args.dtypes]
    cells = [
        {"n": n, "d": args.d, "dtype": dtype, "causal": causal}
        for causal in CAUSAL[args.causal]
        for n in args.sizes
        for dtype in dtypes
        if not ((port.slow and n > args.typescript_max_n) or port.decode_only)
    ]
    if args.odd_shape and not port.decode_only:
        n, d = args.odd_shape
        cells += [{"n": n, "d": d, "dtype": dtype, "causal": False} for dtype in dtypes]
    if args.window_prefill and not port.decode_only:
        n, left = args.window_prefill
        # The windowed pass and, unless --sizes has it, the plain causal pass it is measured against.
        plain = n in args.sizes and True in CAUSAL[args.causal]
        cells += [
            {"n": n, "d": args.d, "dtype": dtype, "causal": True, **window}
            for window in [{"window": [left, 0]}, *([] if plain else [{}])]
            for dtype in dtypes
            if not (port.slow and n > args.typescript_max_n)
        ]
    if port.decode:
        hq, hkv, e = args.decode_shape
        step = {"d": e, "causal": False, "kind": "decode", "hq": hq, "hkv": hkv}
        keys = list(args.decode_keys)
        windowed = []
        if args.window_decode:
            position, left = args.window_decode
            # The row at `position` is the last of position + 1 keys; its window reads left + 1.
            windowed = [{"n": position + 1, "causal": True, "window": [left, 0], "query_offset": position}]
            keys += [] if left in keys else [left]  # the step over `left` keys it is measured against
        cells += [
            {**step, "n": n, "dtype": dtype, **extra}
            for n, extra in [*((k, {}) for k in keys), *((w["n"], w) for w in windowed)]
            for dtype in dtypes
            if not (port.slow and n > args.typescript_max_n)
        ]
    return cells


def _bench(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    out = Path(args.out)
    if problem := output_problem(out, folder=True):
        print(f"error: --out {out}: {problem}", file=sys.stderr)
        return 2
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"error: --out {out}: cannot be created ({error.strerror or error})", file=sys.stderr)
        return 2
    ports = [p for p in PORTS if p.name in args.ports]
    skipped: dict[str, str] = {}
    if any(p.peer for p in ports) and (why := peers.peers_missing()):
        skipped.update({p.name: why for p in ports if p.peer})
        ports = [p for p in ports if not p.peer]
    if any(p.browser for p in ports):
        from attention_port.harness.browser import unavailable_reason

        if why := unavailable_reason():
            skipped.update({p.name: why for p in ports if p.browser})
            ports = [p for p in ports if not p.browser]
    node = checked_node() if any(p.worker == "node" for p in ports) else None
    machine = report.describe_machine()
    cells_by_port = {port.name: plan_cells(port, args) for port in ports}
    memory_cells = {
        port.name: [n for n in (args.memory_n, args.linear_memory_n if port.linear_memory else 0) if n > 0]
        for port in ports
        if not port.browser and not port.decode_only  # a browser's memory is its GPU process's
    }
    shapes = {(c["n"], c["d"]) for cells in cells_by_port.values() for c in cells if "kind" not in c}
    shapes |= {(n, args.d) for sizes in memory_cells.values() for n in sizes}
    decode_cells = {
        expected_key(c): c for cells in cells_by_port.values() for c in cells if c.get("kind") == "decode"
    }  # fmt: skip
    limit_bytes = bandwidth_bytes(args.bandwidth_mib)
    limits: dict = {}

    results: list[CellResult] = []
    memory: list[MemoryResult] = []
    with tempfile.TemporaryDirectory(prefix="attention-port-bench-") as scratch_name:
        scratch = Path(scratch_name)
        for folder in ("inputs", "outputs", "models"):
            (scratch / folder).mkdir()
        _log(f"drawing inputs [n, d] for (n, d) in {sorted(shapes)}")
        drawn = {shape: draw_inputs(scratch / "inputs", *shape, args.seed) for shape in sorted(shapes)}
        _log("numpy float64 reference outputs, for the checks")
        prefill_cells = {
            expected_key(c): c for cells in cells_by_port.values() for c in cells if "kind" not in c
        }
        expected = {
            key: check.expected_output(*drawn[(c["n"], c["d"])], c["causal"], **window_options(c))
            for key, c in prefill_cells.items()
        }
        for key, cell in sorted(decode_cells.items(), key=lambda item: repr(item[0])):
            _log(f"decode inputs and reference: {cell['hq']} query heads, {cell['hkv']} key/value heads,"
                 f" {cell['n']} keys, E = {cell['d']}"
                 + (f", window {tuple(cell['window'])}" if cell.get("window") else ""))  # fmt: skip
            expected[key] = check.expected_decode(
                *draw_decode_inputs(scratch / "inputs", cell, args.seed),
                cell["causal"],
                **window_options(cell),
            )
        if any(p.peer for p in ports):
            heads = sorted({(c["hq"], c["hkv"], c["d"]) for c in decode_cells.values()})
            windowed = [c for c in [*prefill_cells.values(), *decode_cells.values()] if c.get("window")]
            peers.write_models(
                scratch / "models", sorted({d for _, d in shapes}), heads,
                sorted({(c["d"], c["window"][0]) for c in windowed if "kind" not in c}),
                sorted({(c["hq"], c["hkv"], c["d"], c["window"][0]) for c in windowed if "kind" in c}),
            )  # fmt: skip
        workers = Workers(scratch, args, node)
        if limit_bytes > 0:
            limits = measure_limits(workers, limit_bytes, node, args)
        for index, port in enumerate(ports, 1):
            cells = cells_by_port[port.name]
            if not cells:
                skipped[port.name] = "no cell to run with these --sizes/--dtypes"
                continue
            _log(f"[{index}/{len(ports)}] {port.name}: {len(cells)} cells in a process of its own")
            document, _, problem = workers.run(
                port, "time", cells, args.worker_timeout, corrupt=port.name == args.corrupt_port
            )
            results += judge_cells(port.name, cells, document, problem, expected)
        for port in ports:
            if port.name not in skipped:
                memory += measure_memory(workers, port, memory_cells.get(port.name, []), args)

    machine["load_average_end"] = report.load_average()
    machine["versions"] = workers.versions
    # As every Node worker reports it (process.versions.node): checked_node ran `node --version` already.
    machine["node"] = next((v["node"] for v in workers.versions.values() if "node" in v), None)
    add_ratios(results)
    add_shares(results, limits, {p.name for p in PORTS if p.engine})
    targets = check.check_targets(check.Measured(results, memory, limits))
    failed = [r for r in results if r.status != "ok"] + [m for m in memory if m.status == "FAILED"]
    settings = {
        "sizes": args.sizes, "d": args.d, "odd_shape": args.odd_shape, "ports": args.ports,
        "dtypes": args.dtypes, "causal": args.causal, "repeats": args.repeats,
        "max_repeats": args.max_repeats, "cell_budget_s": args.cell_budget, "warmup_s": args.warmup,
        "threads": args.threads, "seed": args.seed, "typescript_max_n": args.typescript_max_n,
        "memory_n": args.memory_n, "linear_memory_n": args.linear_memory_n,
        "flops_per_pass": "4*n*n*d (causal counted the same); decode: 4*hq*n*d",
        "decode_keys": args.decode_keys, "decode_shape": list(args.decode_shape),
        "window_prefill": args.window_prefill, "window_decode": args.window_decode,
        "bandwidth_bytes": limit_bytes,
    }  # fmt: skip
    written = report.write_report(
        out, machine, settings, results, memory, targets, skipped, len(failed), limits,
        seconds=time.perf_counter() - started, plot=not args.no_plot, ports={p.name: p.what for p in PORTS},
    )  # fmt: skip
    _log(f"wrote {', '.join(str(p) for p in written)}")
    if failed:
        _log(f"{len(failed)} FAILED (see the tables)")
        return 1
    return 0


def draw_inputs(folder: Path, n: int, d: int, seed: int) -> tuple[np.ndarray, ...]:
    """query, key, value [n, d], standard normal from Generator(PCG64([seed, n, d])), so the inputs
    at one shape do not depend on which other shapes were asked for; written to `folder` as raw
    little-endian float64, row-major."""
    rng = np.random.Generator(np.random.PCG64([seed, n, d]))
    arrays = tuple(rng.standard_normal((n, d)) for _ in range(3))
    for which, array in zip(("query", "key", "value"), arrays, strict=True):
        array.astype("<f8").tofile(input_path(folder, n, d, which))
    return arrays


def _window_of(cell: dict) -> tuple[int, int] | None:
    return None if cell.get("window") is None else tuple(cell["window"])


def expected_key(cell: dict) -> tuple:
    """The reference a cell is checked against: its shapes, causality and window."""
    if cell.get("kind") == "decode":
        return ("decode", cell["n"], cell["d"], cell["hq"], cell["hkv"], cell["causal"], _window_of(cell))
    return ("prefill", cell["n"], cell["d"], cell["causal"], _window_of(cell))


def window_options(cell: dict) -> dict:
    """A windowed cell's options as the oracle takes them (timing.cell_options's window and
    query_offset); none for the others."""
    if cell.get("window") is None:
        return {}
    return {"window": _window_of(cell), "query_offset": int(cell.get("query_offset", 0))}


def draw_decode_inputs(folder: Path, cell: dict, seed: int) -> tuple[np.ndarray, ...]:
    """query [1, hq, 1, e], key and value [1, hkv, n, e], standard normal from
    Generator(PCG64([seed, n, e, hq, hkv])), written as draw_inputs writes its arrays."""
    rng = np.random.Generator(np.random.PCG64([seed, cell["n"], cell["d"], cell["hq"], cell["hkv"]]))
    arrays = tuple(rng.standard_normal(shape) for shape in cell_shapes(cell))
    for which, array in zip(("query", "key", "value"), arrays, strict=True):
        array.astype("<f8").tofile(cell_input_path(folder, cell, which))
    return arrays


def _cell_key(cell: dict) -> tuple:
    return (
        cell.get("kind", "prefill"),
        cell["n"],
        cell["d"],
        cell["dtype"],
        cell["causal"],
        _window_of(cell),
    )


def judge_cells(port: str, cells: list[dict], document, problem, expected) -> list[CellResult]:
    """Each cell's timing, kept only when its output checks out against numpy float64."""
    by_key = {_cell_key(r): r for r in (document or {}).get("cells", [])}
    results = []
    for cell in cells:
        n, d, dtype, causal = cell["n"], cell["d"], cell["dtype"], cell["causal"]
        kind = cell.get("kind", "prefill")
        result = CellResult(port=port, dtype=dtype, causal=causal, n=n, d=d, kind=kind, hq=cell.get("hq", 1),
                            hkv=cell.get("hkv", 1), window=_window_of(cell))  # fmt: skip
        results.append(result)
        record = by_key.get(_cell_key(cell))
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
        truth = expected[expected_key(cell)]
        result.budget_used, result.problem = check.check_output(got, truth, dtype)
        result.backend = record.get("backend")
        if result.problem is None:
            result.status = "ok"
            result.runs_ms = record["runs_ms"]
            result.warmup_runs = record.get("warmup_runs")
            result.median_ms = float(np.median(result.runs_ms))
            if kind == "decode":
                # A windowed step reads its window's keys only (left + 1 of them), not the cache.
                keys = n if result.window is None else min(n, result.window[0] + 1)
                result.gflops = 4.0 * result.hq * keys * d / (result.median_ms * 1e6)
                itemsize = 4 if dtype == "float32" else 8
                result.read_gbps = 2.0 * result.hkv * keys * d * itemsize / (result.median_ms * 1e6)
            else:
                result.gflops = 4.0 * n * n * d / (result.median_ms * 1e6)
    return results


def measure_limits(workers: Workers, buffer_bytes: int, node, args) -> dict:
    """The machine's limits, each in a worker of its own: native and WebAssembly read bandwidth
    (GB/s) over `buffer_bytes`, and WebAssembly's 128-bit multiply-add peak (GFLOP/s). A limit
    whose worker fails is left out (its rows show no share)."""
    limits: dict = {"buffer_mib": buffer_bytes / 2**20}
    cell = {"n": 0, "d": 0, "dtype": "float32", "causal": False, "kind": "limits", "bytes": buffer_bytes}
    for port in LIMIT_PORTS:
        if port.worker == "node" and node is None:
            continue
        _log(f"limits: {port.name} over {buffer_bytes / 2**20:.0f} MiB")
        document, _, problem = workers.run(port, "time", [cell], args.worker_timeout)
        records = (document or {}).get("cells") or [{}]
        if problem or records[0].get("error") or "output" not in records[0]:
            limits[f"{port.name} problem"] = problem or records[0].get("error") or "no output"
            continue
        values = np.fromfile(records[0]["output"], dtype="<f8")  # each figure's best run
        if port.name == "native-limits":
            limits["native_read_gbps"] = float(values[0])
        else:
            limits["wasm_read_gbps"], limits["wasm_madd_gflops"] = float(values[0]), float(values[1])
    return limits


def add_shares(results: list[CellResult], limits: dict, engine_ports: set[str]) -> None:
    """Each row's share of its limit: decode, bytes read per second against the read bandwidth
    (WebAssembly's for ports in a JavaScript engine, native otherwise); prefill, GFLOP/s against
    the 128-bit SIMD multiply-add peak (a native port may pass it: it has wider vectors)."""
    for r in results:
        if r.status != "ok":
            continue
        if r.kind == "decode":
            name = "wasm_read_gbps" if r.port in engine_ports else "native_read_gbps"
            if limits.get(name):
                r.share, r.limit = r.read_gbps / limits[name], name
        elif limits.get("wasm_madd_gflops"):
            r.share, r.limit = r.gflops / limits["wasm_madd_gflops"], "wasm_madd_gflops"


def add_ratios(results: list[CellResult]) -> None:
    """vs_numpy: numpy float64's median over this median, at the same n, d and causal (numpy has
    float64 only, so float32 rows are compared with numpy float64)."""
    numpy_ms = {
        (r.kind, r.n, r.d, r.causal, r.window): r.median_ms
        for r in results
        if r.port == "numpy" and r.status == "ok"
    }
    for r in results:
        base = numpy_ms.get((r.kind, r.n, r.d, r.causal, r.window))
        if r.status == "ok" and base:
            r.vs_numpy = base / r.median_ms


def measure_memory(workers: Workers, port: BenchPort, sizes: list[int], args) -> list[MemoryResult]:
    """One fresh process per size doing one float64 pass, beside one idle process of the same kind."""
    if not sizes:
        return []
    _log(f"memory: {port.name}, an idle process and one pass at n in {sizes} (float64, not causal)")
    cells = [{"n": n, "d": args.d, "dtype": "float64", "causal": False} for n in sizes]
    # The idle process loads what the port loads for these cells (onnxruntime: a session) and stops.
    idle, _, idle_problem = workers.run(port, "idle", cells[:1], args.memory_timeout)
    rows = []
    for cell in cells:
        row = MemoryResult(port=port.name, status="FAILED", n=cell["n"])
        rows.append(row)
        if idle_problem:
            row.note = f"idle process: {idle_problem}"
            continue
        document, returncode, problem = workers.run(port, "memory", [cell], args.memory_timeout)
        cell_error = ((document or {}).get("cells") or [{}])[0].get("error")
        if returncode is None:  # timed out: the readable port at large n
            row.status, row.note = "not run", problem
            continue
        if problem or cell_error:
            row.note = problem or cell_error
            continue
        row.peak_mib, row.idle_mib = _peak_mib(document), _peak_mib(idle)
        if not document.get("vm_hwm_kib"):
            row.note = "ru_maxrss (no /proc/self/status): may include the parent's peak"
        row.above_idle_mib = row.peak_mib - row.idle_mib
        row.status = "ok"
    return rows


def _peak_mib(document: dict) -> float:
    return (document.get("vm_hwm_kib") or document["ru_maxrss_kib"]) / 1024.0
