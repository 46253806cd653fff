"""The Python worker of `attention-port bench`: times one Python port in a process of its own.

    python -m attention_port.bench.worker PLAN.json

run.py (the parent) draws the inputs once, writes them as raw little-endian float64 files and
starts one worker per port, so that no port pays for another's imports, caches or heap. Its twin
for the Node ports is typescript/bench/worker.ts: the same plan, the same timing loop, the same
result document.

The plan (JSON, written by the parent):
    mode       "time": every cell, warm-up then timed runs, output written for the parent to check;
               "memory": one pass of the single cell, nothing written but the peak RSS;
               "idle": import what the port imports, then only report the peak RSS.
    port       numpy | torch-sdpa | torch-math | webgpu (webgpu.ts in headless Chromium: the page
               times each call itself, see run_browser_plan) | native-limits (no attention: the
               read bandwidth of numpy's streaming sum over a buffer of cell["bytes"])
    inputs     folder with n{n}-d{d}-query.f64, -key.f64, -value.f64 ([n, d] row-major)
    cells      [{"n", "d", "dtype": "float64" | "float32", "causal": bool}, ...]; with "kind":
               "decode", one decode step: query [1, hq, 1, d], key and value [1, hkv, n, d]
               (timing.cell_shapes), grouped-query heads, no mask; with "window": [left, right]
               (and, for a decode step, "query_offset"), a windowed cell (timing.cell_options)
    min_runs, max_runs, budget_s, warmup_s   the timing loop (see timing.time_cell)
    threads    torch.set_num_threads; the parent also sets OMP/OPENBLAS/MKL_NUM_THREADS
    outputs    folder for the outputs, raw little-endian float64 [n, d]
    result     where to write the result document (JSON)
    corrupt    test hook: add 0.01 to the last output element after timing, so that the test can see
               the parent refuse a wrong answer

The result document: {"port", "mode", "versions", "cells": [{"n", "d", "dtype",
"causal", "warmup_runs", "runs_ms", "median_ms", "output", "backend"} or {..., "error"}],
"vm_hwm_kib", "ru_maxrss_kib"}. "backend" is the kernel torch ran (torch-sdpa), or the adapter the
WebGPU port ran on, with "(CPU emulation)" where it is SwiftShader or another software one. A cell that
raises is recorded with its error and the others still run; the parent marks it FAILED. Progress
goes to stderr, one line per cell.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from attention_port.bench.timing import (
    cell_input_path,
    cell_options,
    cell_shapes,
    output_name,
    sdpa_backend,
    time_cell,
)
from attention_port.files import write_atomic


def python_ports() -> tuple[str, ...]:
    """The bench rows this worker times: those of the port table's rows that do not run in Node
    (contract/ports.json's bench lists), and the machine's native limits."""
    from attention_port.port_table import ROWS

    return (*(b["name"] for row in ROWS if row.runs_in != "node" for b in row.bench), "native-limits")


@dataclass(frozen=True)
class Port:
    """What the timing loop needs from a port: its inputs in its own form, one call, its output."""

    prepare: Callable[[np.ndarray, str], object]  # float64 array, dtype -> the port's input
    run: Callable[..., object]  # (query, key, value, **options) -> output; options by name, e.g. is_causal
    to_float64: Callable[[object], np.ndarray]  # output -> float64, the input's shape
    versions: dict[str, str]


def load_port(name: str, threads: int) -> Port:
    """Import what the port needs (and nothing else: idle mode measures exactly these imports)."""
    if name == "numpy":
        from attention_port import reference

        def prepare(array: np.ndarray, dtype: str) -> np.ndarray:
            if dtype != "float64":
                raise ValueError(f"the numpy reference computes in float64 only, not {dtype}")
            return array

        return Port(
            prepare=prepare,
            run=reference.scaled_dot_product_attention,
            to_float64=lambda out: np.asarray(out, dtype=np.float64),
            versions={"numpy": np.__version__},
        )
    if name in ("torch-sdpa", "torch-math"):
        import torch

        torch.set_num_threads(threads)
        dtypes = {"float64": torch.float64, "float32": torch.float32}

        def prepare(array: np.ndarray, dtype: str) -> torch.Tensor:
            # [1, 1, n, d]: batch and head dims, as a model holds them. With 2-D [n, d] inputs torch's
            # dispatcher takes its math backend; 4-D inputs reach the fused kernel. (Decode inputs
            # are 4-D already.)
            tensor = torch.from_numpy(array).to(dtypes[dtype]).contiguous()
            return tensor if tensor.dim() == 4 else tensor[None, None]

        if name == "torch-sdpa":
            import torch.nn.functional as F

            def run(q, k, v, window=None, query_offset=0, **options):
                if window is None:
                    return F.scaled_dot_product_attention(q, k, v, **options)
                # torch's SDPA has no window: a windowed cell is the boolean mask a torch user
                # builds, row i (at i + query_offset) seeing keys p - left .. p (causal, right 0).
                rows = torch.arange(q.shape[-2])[:, None] + query_offset  # [Lq, 1]
                keys = torch.arange(k.shape[-2])[None, :]  # [1, Lk]
                mask = (keys <= rows) & (keys >= rows - window[0])  # [Lq, Lk]
                options.pop("is_causal")
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **options)
        else:
            from attention_port import torch_port

            def run(q, k, v, **options):
                return torch_port.scaled_dot_product_attention(
                    q, k, v, **options, device="cpu", dtype=q.dtype
                )

        return Port(
            prepare=prepare,
            run=run,
            to_float64=lambda out: out.detach().to(torch.float64).numpy(),
            versions={"numpy": np.__version__, "torch": torch.__version__},
        )
    raise ValueError(f"unknown Python port {name!r}; choose from {', '.join(python_ports())}")


def read_input(folder: Path, cell: dict, which: str) -> np.ndarray:
    path = cell_input_path(folder, cell, which)
    shape = cell_shapes(cell)[("query", "key", "value").index(which)]
    array = np.fromfile(path, dtype="<f8")
    if array.size != np.prod(shape):
        raise ValueError(f"{path} holds {array.size} numbers, expected {list(shape)}")
    return array.reshape(shape).astype(np.float64, copy=False)  # native byte order


def run_limits_plan(plan: dict) -> dict:
    """The machine's read bandwidth as native code gets it: numpy's sum of a float32 buffer of
    cell["bytes"] (several times the last-level cache, so that it streams from memory), timed as
    every cell is, its GB/s over the fastest run the cell's output (a limit is what the machine can
    do; bench/worker.ts's wasm-limits, the WebAssembly twin, keeps its best runs too)."""
    result: dict = {
        "port": plan["port"],
        "mode": plan["mode"],
        "versions": {"numpy": np.__version__},
        "cells": [],
    }
    outputs = Path(plan.get("outputs", "."))
    for cell in plan["cells"] if plan["mode"] == "time" else []:
        record = dict(cell)
        buffer = np.ones(int(cell["bytes"]) // 4, dtype=np.float32)  # written once: every page resident
        _, warmup_runs, times_ms = time_cell(
            buffer.sum, plan["min_runs"], plan["max_runs"], plan["budget_s"], plan["warmup_s"]
        )
        gbps = np.array([buffer.nbytes / (min(times_ms) * 1e6)], dtype="<f8")
        path = outputs / "native-limits.f64"
        gbps.tofile(path)
        record.update(warmup_runs=warmup_runs, runs_ms=times_ms, median_ms=statistics.median(times_ms),
                      output=str(path))  # fmt: skip
        print(f"native read bandwidth: {gbps[0]:.1f} GB/s over {buffer.nbytes / 2**20:.0f} MiB",
              file=sys.stderr, flush=True)  # fmt: skip
        result["cells"].append(record)
    result["vm_hwm_kib"], result["ru_maxrss_kib"] = peak_rss_kib()
    return result


def peak_rss_kib() -> tuple[int | None, int]:
    """(VmHWM from /proc/self/status, ru_maxrss), both in KiB: this process's peak resident set.
    The parent reports VmHWM: Linux carries ru_maxrss across fork and exec, so it starts at the
    parent's peak; ru_maxrss is only the fallback where there is no /proc."""
    hwm = None
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return hwm, maxrss // 1024 if sys.platform == "darwin" else maxrss


def run_browser_plan(plan: dict) -> dict:
    """The WebGPU port: one Chromium page (browser.py) for every cell. The page runs the timing
    loop itself (webgpu-browser.ts's bench: time_cell's loop, with performance.now around each whole
    call: upload, dispatch, read back), so no round trip to this process is timed. Time mode only:
    the port's memory is Chromium's GPU process, not this one (run.py measures none)."""
    from attention_port.harness import browser

    result: dict = {"port": plan["port"], "mode": plan["mode"], "versions": {}, "cells": []}
    inputs, outputs = Path(plan["inputs"]), Path(plan.get("outputs", "."))
    with browser.open_page(None, [], timeout=600.0) as page:
        adapter = page.call("adapter")["summary"]
        result["versions"] = {"chromium": page.page.context.browser.version, "webgpu adapter": adapter}
        for cell in plan["cells"] if plan["mode"] == "time" else []:
            n, d, dtype, causal = int(cell["n"]), int(cell["d"]), cell["dtype"], bool(cell["causal"])
            kind = cell.get("kind", "prefill")
            record: dict = {**cell, "backend": adapter}
            label = f"webgpu {kind} {dtype} n={n} d={d} causal={'on' if causal else 'off'}"
            try:
                q, k, v = (
                    read_input(inputs, cell, w).reshape(-1).tolist() for w in ("query", "key", "value")
                )
                shapes = [list(shape) for shape in cell_shapes(cell)]
                timed = page.call("bench", {
                    "n": n, "d": d, "causal": causal, "query": q, "key": k, "value": v,
                    "shapes": shapes, "enableGqa": kind == "decode", "window": cell.get("window"),
                    "queryOffset": cell.get("query_offset", 0),
                    "minRuns": plan["min_runs"], "maxRuns": plan["max_runs"],
                    "budgetS": plan["budget_s"], "warmupS": plan["warmup_s"],
                })  # fmt: skip
                out64 = np.asarray(timed["output"], dtype="<f8")
                if plan.get("corrupt"):
                    out64[-1] += 0.01  # test hook: a wrong answer the parent must catch
                path = outputs / output_name("webgpu", cell)
                out64.tofile(path)
                record.update(warmup_runs=timed["warmupRuns"], runs_ms=timed["timesMs"],
                              median_ms=statistics.median(timed["timesMs"]), output=str(path))  # fmt: skip
                print(f"{label}: median {record['median_ms']:.3f} ms over {len(timed['timesMs'])} runs"
                      f" on {adapter}", file=sys.stderr, flush=True)  # fmt: skip
            except Exception as error:  # recorded: the parent marks the cell FAILED and goes on
                record["error"] = f"{type(error).__name__}: {error}"
                print(f"{label}: FAILED: {record['error']}", file=sys.stderr, flush=True)
            result["cells"].append(record)
    result["vm_hwm_kib"], result["ru_maxrss_kib"] = peak_rss_kib()
    return result


def run_plan(plan: dict) -> dict:
    if plan["port"] == "webgpu":
        return run_browser_plan(plan)
    if plan["port"] == "native-limits":
        return run_limits_plan(plan)
    port = load_port(plan["port"], int(plan.get("threads", 1)))
    result: dict = {"port": plan["port"], "mode": plan["mode"], "versions": port.versions, "cells": []}
    inputs, outputs = Path(plan["inputs"]), Path(plan.get("outputs", "."))
    for cell in plan["cells"] if plan["mode"] != "idle" else []:
        n, d, dtype, causal = int(cell["n"]), int(cell["d"]), cell["dtype"], bool(cell["causal"])
        kind = cell.get("kind", "prefill")
        record: dict = dict(cell)
        label = f"{plan['port']} {kind} {dtype} n={n} d={d} causal={'on' if causal else 'off'}"
        label += f" window={cell['window']}" if cell.get("window") else ""
        try:
            q, k, v = (port.prepare(read_input(inputs, cell, w), dtype) for w in ("query", "key", "value"))
            run = partial(port.run, q, k, v, **cell_options(cell))
            if plan["mode"] == "memory":
                run()  # exactly one pass: the peak is read at exit
                record["runs_ms"] = []
            else:
                out, warmup_runs, times_ms = time_cell(
                    run, plan["min_runs"], plan["max_runs"], plan["budget_s"], plan["warmup_s"]
                )
                out64 = np.ascontiguousarray(port.to_float64(out), dtype="<f8")
                if plan.get("corrupt"):
                    out64.reshape(-1)[-1] += 0.01  # test hook: a wrong answer the parent must catch
                path = outputs / output_name(plan["port"], cell)
                out64.tofile(path)
                record.update(warmup_runs=warmup_runs, runs_ms=times_ms,
                              median_ms=statistics.median(times_ms), output=str(path))  # fmt: skip
                if plan["port"] == "torch-sdpa":  # an untimed pass under the profiler
                    record["backend"] = sdpa_backend(run)
                print(f"{label}: median {record['median_ms']:.3f} ms over {len(times_ms)} runs"
                      + (f", kernel {record['backend']}" if "backend" in record else ""),
                      file=sys.stderr, flush=True)  # fmt: skip
        except Exception as error:  # recorded: the parent marks the cell FAILED and goes on
            record["error"] = f"{type(error).__name__}: {error}"
            print(f"{label}: FAILED: {record['error']}", file=sys.stderr, flush=True)
            traceback.print_exc(file=sys.stderr)
        result["cells"].append(record)
    result["vm_hwm_kib"], result["ru_maxrss_kib"] = peak_rss_kib()
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m attention_port.bench.worker PLAN.json", file=sys.stderr)
        return 2
    plan = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    write_atomic(Path(plan["result"]), json.dumps(run_plan(plan), indent=1, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
