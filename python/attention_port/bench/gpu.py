"""`scripts/gpu-bench`: torch's fused scaled_dot_product_attention against torch_port's explicit
math on a CUDA GPU, written to docs/gpu-bench.md.

    python -m attention_port.bench.gpu                 # the default run, under 5 minutes on one GPU
    python -m attention_port.bench.gpu --device cpu --sizes 128 --heads 2   # smoke mode, no GPU

For every n in --sizes (default up to 16384), head size d in --head-dims (64, 128) and dtype in
--dtypes (float32 with TF32 off, bfloat16, float16), on batch 1 x --heads heads (16), the two
implementations run on the same inputs:
    fused  torch.nn.functional.scaled_dot_product_attention (whichever fused kernel torch picks)
    math   torch_port.scaled_dot_product_attention: the five steps as explicit tensor maths, which
           hold [1, H, n, n] matrices; a size whose matrices would not fit in free GPU memory is
           skipped (estimated before it runs; an out-of-memory error is caught and reported too)
Reported per implementation: median ms (CUDA events, after a warm-up; at least --repeats runs,
more while a cell's runs total under --cell-budget s), TFLOP/s counting 4·H·n²·d flops per pass
(causal passes counted the same) and the peak GPU memory of one pass above its inputs
(torch.cuda.max_memory_allocated), and the kernel the fused call dispatched to, as torch's
profiler saw it. Every output is checked on head 0 against a float64 computation on the same
(rounded) inputs with compare.py's rule (check.py, as the CPU bench does), and the column says how
much of that budget it used; a cell over budget is FAILED (exit 1).

The run stops starting new cells after --budget seconds (default 240; the largest sizes come
last), so the whole job stays under 5 minutes. Without a CUDA GPU (and --device cuda, the default)
it exits 2 with a message and writes nothing.
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

from attention_port import torch_port
from attention_port.args import OneLineParser, integers, names, not_negative, positive
from attention_port.bench.check import Expected, check_output, expected_output
from attention_port.bench.run import CAUSAL
from attention_port.bench.timing import sdpa_backend, time_cell, wall_clock
from attention_port.files import output_problem, write_atomic
from attention_port.paths import DOCS

DEFAULT_OUT = DOCS / "gpu-bench.md"
DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}
HALF = ("bfloat16", "float16")
MIB = 2.0**20
# torch_port.attention_steps keeps scores, logits and weights and, inside softmax, three more
# [B, H, n, n] temporaries alive at once, plus a boolean [B, H, n, n] mask.
MATH_LIVE_MATRICES = 6


@dataclass
class Timing:
    median_ms: float | None = None
    tflops: float | None = None
    peak_mib: float | None = None  # above the inputs; None on the CPU
    budget_used: float | None = None  # of the check's error budget, head 0 (1.0 = all of it)
    kernel: str | None = None  # the aten op the fused call ran
    status: str = "ok"  # ok | FAILED | skipped
    note: str | None = None


@dataclass
class Row:
    dtype: str
    d: int
    n: int
    causal: bool
    impls: dict[str, Timing] = field(default_factory=dict)


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="python -m attention_port.bench.gpu",
        description="Time torch's fused scaled_dot_product_attention against torch_port's explicit"
        " math on a CUDA GPU and write a markdown report.",
    )
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (smoke mode)")
    parser.add_argument("--sizes", type=integers, default=[1024, 2048, 4096, 8192, 16384],
                        help="sequence lengths n (default: 1024,2048,4096,8192,16384)")  # fmt: skip
    parser.add_argument("--heads", type=positive(int), default=16, help="heads, batch 1 (default: 16)")
    parser.add_argument(
        "--head-dims", type=integers, default=[64, 128], help="features per head d (default: 64,128)"
    )
    parser.add_argument("--dtypes", type=lambda t: names(t, tuple(DTYPES), "dtype"), default=None,
                        help="default: float32,bfloat16,float16 on cuda, float32 on cpu")  # fmt: skip
    parser.add_argument("--causal", choices=tuple(CAUSAL), default="off")
    parser.add_argument(
        "--repeats", type=positive(int), default=5, help="timed runs per cell, at least (default: 5)"
    )
    parser.add_argument("--max-repeats", type=positive(int), default=20, help="timed runs per cell, at most")
    parser.add_argument("--cell-budget", type=not_negative(float), default=0.5, metavar="SECONDS",
                        help="past --repeats, keep timing while a cell's runs total under this")  # fmt: skip
    parser.add_argument("--budget", type=positive(float), default=240.0, metavar="SECONDS",
                        help="start no new cell after this long (default: 240)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="markdown report (default: %(default)s)")
    return parser


def cuda_clock(run):
    """time_cell's clock on a GPU: one run between two CUDA events, waiting for it to finish."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    output = run()
    end.record()
    end.synchronize()
    return output, start.elapsed_time(end)


def peak_above_inputs_mib(fn, device: torch.device) -> float | None:
    """Peak GPU memory of one call, above what was allocated before it (the inputs)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    output = fn()
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - before
    del output
    return peak / MIB


def run_cell(row: Row, impl: str, fn, device, args, flops: float, expected: Expected) -> Timing:
    timing = Timing()
    try:
        fn()  # first call: kernel selection and library workspaces, kept out of the peak
        timing.peak_mib = peak_above_inputs_mib(fn, device)
        output, _, times = time_cell(
            fn, args.repeats, max(args.repeats, args.max_repeats), args.cell_budget, warmup_s=math.inf,
            max_warmup=2, clock=cuda_clock if device.type == "cuda" else wall_clock,
        )  # fmt: skip
        got = output[0, 0].to(torch.float64).cpu().numpy()  # [n, d]
        timing.budget_used, problem = check_output(got, expected, row.dtype)
        if impl == "fused":
            timing.kernel = sdpa_backend(fn)
        del output
    except torch.cuda.OutOfMemoryError:
        timing.status, timing.note = "skipped", "out of GPU memory"
        torch.cuda.empty_cache()
        return timing
    except RuntimeError as error:  # a kernel that refuses these inputs: reported, not hidden
        timing.status, timing.note = "FAILED", (str(error).splitlines() or ["RuntimeError"])[0][:120]
        return timing
    if problem is not None:
        timing.status, timing.note = "FAILED", problem
        return timing
    timing.median_ms = statistics.median(times)
    timing.tflops = flops / (timing.median_ms * 1e-3) / 1e12
    return timing


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    device = torch.device(args.device)
    out = Path(args.out)
    if problem := output_problem(out, folder=False):
        print(f"error: --out {out}: {problem}", file=sys.stderr)
        return 2
    if device.type == "cuda" and not torch.cuda.is_available():
        print(
            "gpu-bench: FAILED: no CUDA GPU: torch.cuda.is_available() is False"
            f" (torch {torch.__version__}, built for CUDA {torch.version.cuda}).\n"
            f"gpu-bench: nothing was measured and {out} was not written"
            " (for a smoke run on the CPU: --device cpu --sizes 128).",
            file=sys.stderr,
        )
        return 2
    dtypes = args.dtypes or (["float32", "bfloat16", "float16"] if device.type == "cuda" else ["float32"])
    if device.type != "cuda" and (half := [x for x in dtypes if x in HALF]):
        print(f"gpu-bench: torch_port computes {half[0]} on CUDA only", file=sys.stderr)
        return 2

    started = time.perf_counter()
    rows: list[Row] = []
    with torch.inference_mode(), torch_port.tf32_disabled():
        for n in args.sizes:  # smallest first: the time budget cuts the largest
            for d in args.head_dims:
                generator = torch.Generator(device=device).manual_seed(args.seed * 100003 + n * 131 + d)
                base = [
                    torch.randn((1, args.heads, n, d), generator=generator, device=device) for _ in range(3)
                ]  # [1, H, n, d] float32
                for dtype_name in dtypes:
                    dtype = DTYPES[dtype_name]
                    query, key, value = (x.to(dtype) for x in base)
                    for causal in CAUSAL[args.causal]:
                        row = Row(dtype=dtype_name, d=d, n=n, causal=causal)
                        rows.append(row)
                        if time.perf_counter() - started > args.budget:
                            row.impls = _skipped("time budget")
                            continue
                        label = f"{dtype_name} d={d} n={n} causal={'on' if causal else 'off'}"
                        print(f"gpu-bench: {label}", file=sys.stderr, flush=True)
                        row.impls = _measure(row, query, key, value, dtype, device, args)
                    del query, key, value
                del base
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    report = format_report(rows, device, args, time.perf_counter() - started)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, report)
    print(report)
    failed = sum(t.status == "FAILED" for row in rows for t in row.impls.values())
    print(f"gpu-bench: wrote {out}" + (f"; {failed} FAILED" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def _skipped(note: str) -> dict[str, Timing]:
    return {impl: Timing(status="skipped", note=note) for impl in ("fused", "math")}


def _measure(row: Row, query, key, value, dtype, device, args) -> dict[str, Timing]:
    heads, n, d = query.shape[1], row.n, row.d
    flops = 4.0 * heads * n * n * d
    # The check's reference: head 0 in float64 on the same (rounded) inputs, computed on the device;
    # no memory limit, as the bench sizes its cells to the GPU itself (see `need` below).
    head0 = (x[0, 0].to(torch.float64) for x in (query, key, value))  # [n, d]
    steps = partial(torch_port.attention_steps, device=device, dtype=torch.float64, memory_limit=math.inf)
    try:
        expected = expected_output(*head0, row.causal, steps)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return _skipped("no memory for the float64 check")
    impls = {}

    def fused():
        return F.scaled_dot_product_attention(query, key, value, is_causal=row.causal)

    impls["fused"] = run_cell(row, "fused", fused, device, args, flops, expected)

    def math_port():
        return torch_port.scaled_dot_product_attention(
            query, key, value, is_causal=row.causal, device=device, dtype=dtype, memory_limit=math.inf
        )

    itemsize = torch.empty((), dtype=dtype).element_size()
    need = (MATH_LIVE_MATRICES * itemsize + 1) * heads * n * n * 1.1  # + the boolean mask, + 10%
    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, _ = torch.cuda.mem_get_info(device)
        if need > free:
            impls["math"] = Timing(
                status="skipped", note=f"needs ~{need / 2**30:.0f} GiB, {free / 2**30:.0f} GiB free"
            )
            return impls
    impls["math"] = run_cell(row, "math", math_port, device, args, flops, expected)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return impls


def _fmt(x: float | None, spec: str) -> str:
    return "" if x is None else format(x, spec)


def format_report(rows: list[Row], device: torch.device, args, seconds: float) -> str:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        where = f"{props.name}, {props.total_memory / 2**30:.0f} GiB, CUDA {torch.version.cuda}"
    else:
        where = "CPU (smoke mode: no GPU numbers)"
    lines = [
        "# GPU bench: torch's fused kernel against torch_port's explicit math",
        "",
        f"Written by `scripts/gpu-bench` on"
        f" {datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"
        f" in {seconds:.0f} s. {where}; torch {torch.__version__}. Batch 1, {args.heads} heads;"
        " float32 with TF32 off.",
        "",
        "| dtype | d | n | causal | fused ms | fused TFLOP/s | fused peak MiB | math ms | math TFLOP/s"
        " | math peak MiB | fused speed-up | check (fused / math) | fused kernel |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        fused, math_ = row.impls["fused"], row.impls["math"]
        cells = [row.dtype, str(row.d), str(row.n), "yes" if row.causal else "no"]
        for t in (fused, math_):
            if t.status == "ok":
                rate = _fmt(t.tflops, ".1f" if t.tflops >= 1 else ".3f")
                cells += [_fmt(t.median_ms, ".2f"), rate, _fmt(t.peak_mib, ".0f")]
            else:
                cells += [f"{t.status}: {t.note}", "", ""]
        ok = fused.status == math_.status == "ok"
        cells.append(f"{math_.median_ms / fused.median_ms:.1f}x" if ok else "")
        cells.append(" / ".join(_check_text(t) for t in (fused, math_)))
        cells.append(fused.kernel or "")
        lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        "- median ms: CUDA-event time of one pass (wall clock on a CPU) after two warm-up passes,"
        f" median of at least {args.repeats} runs (more, up to {args.max_repeats}, while a cell's"
        f" runs total under {args.cell_budget:g} s).",
        "- TFLOP/s counts 4·H·n²·d flops per pass, causal passes too (they need about half).",
        "- peak MiB: torch.cuda.max_memory_allocated during one pass, above the inputs (output included).",
        "- fused speed-up: math ms / fused ms.",
        "- check: the share of compare.py's error budget, 16·(u + u_float64)·error_scale, that head 0's"
        " output uses against float64 on the same rounded inputs; over 100% is FAILED.",
        "- fused kernel: the aten op scaled_dot_product_attention dispatched to, seen by torch's profiler.",
        "- skipped math cells: the explicit steps hold about six [1, H, n, n] matrices at once; a size"
        " that would not fit in free GPU memory is not attempted.",
        "",
    ]
    return "\n".join(lines)


def _check_text(t: Timing) -> str:
    if t.budget_used is None:
        return "-"
    return f"{100 * t.budget_used:.1f}%" if t.status != "FAILED" else f"FAILED {100 * t.budget_used:.0f}%"


if __name__ == "__main__":
    sys.exit(main())
