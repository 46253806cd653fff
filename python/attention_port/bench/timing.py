"""The bench's timing loop and the names of its input files, shared by the worker processes
(worker.py), the parent that writes their inputs (run.py) and the GPU bench (gpu.py). worker.py is a
process's entry point and is imported by no other module; what the others need of it lives here."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path


def sdpa_backend(run: Callable[[], object]) -> str:
    """The kernel torch's scaled_dot_product_attention ran for one call, as the profiler saw it:
    the aten op it dispatched to (e.g. _scaled_dot_product_flash_attention_for_cpu, or
    _scaled_dot_product_attention_math for the explicit maths)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # above its highest level: no start/stop lines
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as profiler:
        run()
    names = [event.name for event in profiler.events()]
    kernel = next((n for n in names if re.fullmatch(r"aten::_scaled_dot_product_\w+", n)), None)
    return kernel.removeprefix("aten::") if kernel else "unknown (" + ", ".join(names[:3]) + ")"


def wall_clock(run: Callable[[], object]) -> tuple[object, float]:
    """One run and its wall-clock time in ms: time_cell's clock on the CPU."""
    start = time.perf_counter()
    output = run()
    return output, (time.perf_counter() - start) * 1e3


def time_cell(
    run: Callable[[], object], min_runs: int, max_runs: int, budget_s: float, warmup_s: float,
    max_warmup: int = 20, clock: Callable[[Callable[[], object]], tuple[object, float]] = wall_clock,
) -> tuple[object, int, list[float]]:  # fmt: skip
    """Warm up, then time runs: at least `min_runs`; past that, more only while the timed runs
    have taken less than `budget_s` in all, up to `max_runs`. So a fast cell gets many runs and a
    slow one exactly `min_runs`. Warm-up: one run, more while under `warmup_s` (at most
    `max_warmup`), so that caches, allocators and thread pools are settled before the clock starts.
    gpu.py passes a clock of CUDA events, which also waits for each run to finish.

    Returns the last timed run's output (the one the parent checks), the warm-up count and the
    timed runs in milliseconds."""
    warmup_runs, warmup_ms = 0, 0.0
    while warmup_runs == 0 or (warmup_runs < max_warmup and warmup_ms < warmup_s * 1e3):
        warmup_ms += clock(run)[1]
        warmup_runs += 1
    times_ms: list[float] = []
    output = None
    while len(times_ms) < min_runs or (len(times_ms) < max_runs and sum(times_ms) < budget_s * 1e3):
        output, elapsed_ms = clock(run)
        times_ms.append(elapsed_ms)
    return output, warmup_runs, times_ms


def input_path(folder: Path, n: int, d: int, which: str) -> Path:
    return folder / f"n{n}-d{d}-{which}.f64"


def decode_input_path(folder: Path, keys: int, hq: int, hkv: int, e: int, which: str) -> Path:
    """A decode step's input: query [1, hq, 1, e], key and value [1, hkv, keys, e]."""
    return folder / f"decode-k{keys}-h{hq}-kv{hkv}-e{e}-{which}.f64"


def cell_shapes(cell: dict) -> tuple[tuple[int, ...], ...]:
    """query, key and value shapes of a bench cell: [n, d] each for prefill, [1, hq, 1, d] and
    [1, hkv, n, d] twice for a decode step (n keys)."""
    n, d = int(cell["n"]), int(cell["d"])
    if cell.get("kind") == "decode":
        kv = (1, int(cell["hkv"]), n, d)
        return (1, int(cell["hq"]), 1, d), kv, kv
    return (n, d), (n, d), (n, d)


def cell_options(cell: dict) -> dict:
    """The options a Python port is called with for a cell, by name: is_causal; enable_gqa for a
    decode step (grouped-query heads); for a windowed cell its window (left, right) and, for a
    windowed decode step, the query's position (query_offset: the step's row comes after the
    cache, so it is the last key's position)."""
    options: dict = {"is_causal": bool(cell["causal"])}
    if cell.get("kind") == "decode":
        options["enable_gqa"] = True
    if cell.get("window") is not None:
        options["window"] = tuple(cell["window"])
    if cell.get("query_offset"):
        options["query_offset"] = int(cell["query_offset"])
    return options


def output_name(port: str, cell: dict) -> str:
    """The file a worker writes a cell's output to (bench/worker.ts spells it too): a windowed
    cell's name says its window, so that it never overwrites the plain cell of the same n."""
    kind, causal = cell.get("kind", "prefill"), "causal" if cell["causal"] else "full"
    window = "" if cell.get("window") is None else "-w{}-{}".format(*cell["window"])
    return f"{port}-{kind}-{cell['dtype']}-{causal}{window}-n{cell['n']}-d{cell['d']}.f64"


def cell_input_path(folder: Path, cell: dict, which: str) -> Path:
    n, d = int(cell["n"]), int(cell["d"])
    if cell.get("kind") == "decode":
        return decode_input_path(folder, n, int(cell["hq"]), int(cell["hkv"]), d, which)
    return input_path(folder, n, d, which)
