"""Is a timed output right, and were the targets met?

Every output is held to compare.py's rule against numpy float64 on the same float64 inputs:
|output - numpy| <= K * (u_port + u_float64) * error_scale, element-wise, with error_scale as the
oracle defines it (compare.float64_error_scale) and the two unit roundoffs summed because numpy is
itself a port with a budget of its own (as compare.judge_pair holds two ports to each other). A
cell over budget is FAILED and its time is never reported.

The targets are goals for the fast ports, printed as met or not met (never the exit status). Each
is one line of TARGETS built from a few kinds of measurement, so a new port's goals are a few
lines more.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attention_port import reference
from attention_port.harness import compare

ROWS = 2048  # expected_output's block of query rows for a long prompt


@dataclass
class Expected:
    """The numpy float64 reference for one (n, d, causal)."""

    output: np.ndarray  # [n, d]
    error_scale: np.ndarray  # [n, d]  the oracle's yardstick, from float64 weights


def expected_output(
    query, key, value, causal: bool, attention_steps=reference.attention_steps, **options
) -> Expected:
    """numpy float64 arrays [n, d]; gpu.py passes float64 tensors on the GPU with torch_port's
    attention_steps, so the n x n steps stay where the data is and only [n, d] comes back.
    `options`: a windowed cell's window and query_offset, as the oracle takes them. A long
    prompt goes in blocks of ROWS query rows (each block's rows at their own positions), so that
    the reference at n = 16,384 holds [ROWS, n] steps, not [n, n]: every row's answer is its own."""
    n = query.shape[0]
    if isinstance(query, np.ndarray) and query.ndim == 2 and n > ROWS:
        offset = options.pop("query_offset", 0)
        parts = [
            expected_output(query[i : i + ROWS], key, value, causal, attention_steps,
                            query_offset=offset + i, **options)
            for i in range(0, n, ROWS)
        ]  # fmt: skip
        return Expected(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("output", "error_scale")))
    steps = attention_steps(query, key, value, is_causal=causal, **options)
    scale = 1.0 / math.sqrt(query.shape[-1])
    allowed = steps.logits > -math.inf  # [n, n]  the keys causality (and a window) leave
    error_scale = compare.float64_error_scale(query, key, value, steps.weights, scale, allowed)
    return Expected(
        *(x if isinstance(x, np.ndarray) else x.cpu().numpy() for x in (steps.output, error_scale))
    )


def expected_decode(query, key, value, causal: bool = False, **options) -> Expected:
    """One decode step: query [1, hq, 1, e], key and value [1, hkv, n, e] with grouped-query
    heads, checked as the expanded problem (each key/value head repeated for its query heads,
    torch's repeat_interleave), which is what grouped-query attention computes; `options`: a
    windowed step's window and query_offset."""
    group = query.shape[-3] // key.shape[-3]
    key, value = (np.repeat(x, group, axis=-3) for x in (key, value))  # [1, hq, n, e]
    return expected_output(query, key, value, causal, **options)


def check_output(got: np.ndarray, expected: Expected, dtype: str) -> tuple[float | None, str | None]:
    """(budget used, None) when the output keeps to compare.py's rule, else (budget used, problem)."""
    if got.size != expected.output.size:
        return None, f"output has {got.size} numbers, expected {expected.output.size}"
    unit_roundoff = compare.UNIT_ROUNDOFF[dtype] + compare.UNIT_ROUNDOFF["float64"]
    budget = compare.K * unit_roundoff * expected.error_scale  # compare.py's bound, K u error_scale
    step = compare.check_step("output", got.reshape(expected.output.shape), expected.output, budget)
    if step.passed:
        return step.budget_used, None
    used = "all" if not np.isfinite(step.budget_used) else f"{100 * step.budget_used:.0f}%"
    return step.budget_used, (
        f"wrong output: {used} of the error budget"
        f" (output{list(step.index or [])} = {step.actual!r}, numpy float64 gives {step.expected!r})"
        + (f"; {step.problem}" if step.problem else "")
    )


# ---------------------------------------------------------------------------------------------
# Targets


class NotMeasured(Exception):
    """A target's cell was not measured in this run (its port or size was not asked for)."""


@dataclass(frozen=True)
class Measured:
    """What one run measured, looked up by what a target needs."""

    results: list  # run.CellResult
    memory: list  # run.MemoryResult
    limits: dict | None = None  # run.measure_limits

    def cell(self, port: str, dtype: str, n: int, causal: bool = False, d: int = 64, kind: str = "prefill",
             window: tuple[int, int] | None = None):  # fmt: skip
        for r in self.results:
            key = (r.port, r.dtype, r.n, r.d, r.causal, r.kind, r.window)
            if key == (port, dtype, n, d, causal, kind, window) and r.status == "ok":
                return r
        windowed = f" window {window}" if window else ""
        raise NotMeasured(f"{port} {kind} {dtype} n={n} d={d}{' causal' if causal else ''}{windowed}")

    def decode(self, port: str, dtype: str, keys: int, window: tuple[int, int] | None = None):
        for r in self.results:
            key = (r.port, r.dtype, r.n, r.kind, r.window)
            if key == (port, dtype, keys, "decode", window) and r.status == "ok":
                return r
        raise NotMeasured(f"{port} decode {dtype} at {keys} keys" + (f" window {window}" if window else ""))

    def limit(self, name: str) -> float:
        if not (self.limits or {}).get(name):
            raise NotMeasured(f"the limit {name}")
        return self.limits[name]

    def memory_at(self, port: str, n: int):
        for m in self.memory:
            if (m.port, m.n) == (port, n) and m.status == "ok":
                return m
        raise NotMeasured(f"{port} memory pass at n={n}")


Check = Callable[[Measured], tuple[bool, str]]  # (met, what was measured); may raise NotMeasured


def rate_at_least(port: str, dtype: str, gflops: float, n: int = 1024) -> tuple[str, Check]:
    def check(m: Measured) -> tuple[bool, str]:
        cell = m.cell(port, dtype, n)
        return cell.gflops >= gflops, f"{cell.gflops:.2f} GFLOP/s"

    return f"{port} {dtype} >= {gflops:g} GFLOP/s at n={n}", check


def faster_than(port: str, other: str, dtype: str, times: float, n: int = 1024) -> tuple[str, Check]:
    def check(m: Measured) -> tuple[bool, str]:
        fast, slow = m.cell(port, dtype, n), m.cell(other, dtype, n)
        speedup = slow.median_ms / fast.median_ms
        return speedup >= times, f"{speedup:.2f}x ({fast.median_ms:.1f} ms vs {slow.median_ms:.1f} ms)"

    return f"{port} {dtype} >= {times:g}x {other} at n={n}", check


def causal_speedup(port: str, times: float, n: int = 4096) -> tuple[str, Check]:
    def check(m: Measured) -> tuple[bool, str]:
        full, causal = m.cell(port, "float64", n), m.cell(port, "float64", n, causal=True)
        speedup = full.median_ms / causal.median_ms
        return (
            speedup >= times,
            f"{speedup:.2f}x ({causal.median_ms:.1f} ms causal vs {full.median_ms:.1f} ms)",
        )

    return f"{port} float64 causal >= {times:g}x faster than not causal at n={n}", check


def window_speedup(
    port: str, dtype: str, times: float, n: int = 16384, left: int = 1023
) -> tuple[str, Check]:
    """A causal prefill with window (left, 0) against the plain causal pass at the same n: the
    window leaves left + 1 keys a row of the n / 2 causality leaves on average, so the ideal is
    about n / (2 (left + 1)) (8x at n = 16,384, left = 1023)."""

    def check(m: Measured) -> tuple[bool, str]:
        plain = m.cell(port, dtype, n, causal=True)
        windowed = m.cell(port, dtype, n, causal=True, window=(left, 0))
        speedup = plain.median_ms / windowed.median_ms
        return speedup >= times, (
            f"{speedup:.2f}x ({windowed.median_ms:.1f} ms windowed vs {plain.median_ms:.1f} ms causal)"
        )

    return (
        f"{port} {dtype} causal prefill with window ({left}, 0) >= {times:g}x the causal pass at n={n}",
        check,
    )


def window_decode_within(port: str, dtype: str, times: float, position: int = 16384,
                         left: int = 4096) -> tuple[str, Check]:  # fmt: skip
    """A decode step at `position` with window (left, 0) against a step over `left` keys: the
    window makes the step's cost its window's, whatever the cache holds (ideal 1x)."""

    def check(m: Measured) -> tuple[bool, str]:
        windowed = m.decode(port, dtype, position + 1, window=(left, 0))
        base = m.decode(port, dtype, left)
        ratio = windowed.median_ms / base.median_ms
        return ratio <= times, (
            f"{ratio:.2f}x ({windowed.median_ms:.3f} ms windowed vs {base.median_ms:.3f} ms over {left} keys)"
        )

    name = f"{port} {dtype} decode at position {position} with window ({left}, 0)"
    name += f" within {times:g}x a step over {left} keys"
    return name, check


def memory_within(port: str, mib: float, n: int) -> tuple[str, Check]:
    def check(m: Measured) -> tuple[bool, str]:
        row = m.memory_at(port, n)
        return row.above_idle_mib <= mib, (
            f"{row.above_idle_mib:.1f} MiB above idle"
            f" ({row.peak_mib:.1f} MiB peak, idle {row.idle_mib:.1f} MiB)"
        )

    return f"{port} one float64 pass at n={n} within {mib:g} MiB of an idle process", check


def close_rate(port: str, other: str, within: float, what: str, n: int = 1024, d: int = 64,
               other_n: int = 1024, other_d: int = 64) -> tuple[str, Check]:  # fmt: skip
    """port's float64 rate at (n, d) within `within` (a fraction) of other's at (other_n, other_d)."""

    def check(m: Measured) -> tuple[bool, str]:
        cell, base = m.cell(port, "float64", n, d=d), m.cell(other, "float64", other_n, d=other_d)
        ratio = cell.gflops / base.gflops
        return ratio >= 1 - within, f"{ratio:.0%} ({cell.gflops:.2f} vs {base.gflops:.2f} GFLOP/s)"

    return f"{what}: float64 within {within:.0%} of {other if other != port else 'the aligned rate'}", check


def decode_faster_than(port: str, other: str, dtype: str, times: float, keys: int,
                       how: str = "") -> tuple[str, Check]:  # fmt: skip
    """`how`, when given, says how the step was run (a resident cache, the whole cache each call)."""

    def check(m: Measured) -> tuple[bool, str]:
        fast, slow = m.decode(port, dtype, keys), m.decode(other, dtype, keys)
        speedup = slow.median_ms / fast.median_ms
        return speedup >= times, f"{speedup:.2f}x ({fast.median_ms:.3f} ms vs {slow.median_ms:.3f} ms)"

    return f"{port} {dtype} decode >= {times:g}x {other} at {keys} keys{how}", check


def decode_bandwidth_share(port: str, dtype: str, share: float, keys: int,
                           how: str = "") -> tuple[str, Check]:  # fmt: skip
    def check(m: Measured) -> tuple[bool, str]:
        cell, bandwidth = m.decode(port, dtype, keys), m.limit("wasm_read_gbps")
        got = cell.read_gbps / bandwidth
        return got >= share, f"{got:.0%} ({cell.read_gbps:.1f} GB/s of {bandwidth:.1f} GB/s)"

    name = f"{port} {dtype} decode at {keys} keys >= {share:.0%} of the WebAssembly read bandwidth{how}"
    return name, check


def peak_share(port: str, dtype: str, share: float, n: int = 1024) -> tuple[str, Check]:
    def check(m: Measured) -> tuple[bool, str]:
        cell, peak = m.cell(port, dtype, n), m.limit("wasm_madd_gflops")
        got = cell.gflops / peak
        return got >= share, f"{got:.0%} ({cell.gflops:.1f} GFLOP/s of {peak:.1f})"

    return f"{port} {dtype} at n={n}, one thread, >= {share:.0%} of the 128-bit multiply-add peak", check


FLASH = "typescript-flash"
SIMD = "typescript-simd"
# The decode targets time simd.ts's row that runs a step as a generator does: one token appended to
# its resident cache, then attended (typescript-simd-copy is the flat entry handed the whole cache).
RESIDENT = " (simd.ts: one token appended to its resident cache; onnxruntime-web: handed the whole cache)"
TARGETS: list[tuple[str, Check]] = [
    faster_than(FLASH, "typescript", "float64", 3.5),
    rate_at_least(FLASH, "float64", 3.5),
    memory_within(FLASH, 32, n=4096),
    causal_speedup(FLASH, 1.7),
    memory_within(FLASH, 64, n=16384),
    close_rate(f"{FLASH}-nested", FLASH, 0.10, "flash.ts's nested-array entry at n=1024"),
    close_rate(FLASH, FLASH, 0.25, f"{FLASH} at n=1000, E = Ev = 80", n=1000, d=80),
    rate_at_least(SIMD, "float32", 35),
    faster_than(SIMD, "onnxruntime-web", "float32", 1.2),
    rate_at_least(SIMD, "float64", 17),
    faster_than(f"{SIMD}-2w", SIMD, "float32", 1.7, n=4096),
    memory_within(SIMD, 64, n=16384),
    causal_speedup(SIMD, 1.8),
    close_rate(SIMD, SIMD, 0.25, f"{SIMD} at n=1000, E = Ev = 80", n=1000, d=80),
    close_rate(f"{SIMD}-nested", SIMD, 0.10, "simd.ts's nested-array entry at n=1024"),
    decode_faster_than(SIMD, "onnxruntime-web", "float32", 2.0, keys=4096, how=RESIDENT),
    decode_bandwidth_share(SIMD, "float32", 0.60, keys=4096, how=" (its resident cache)"),
    peak_share(SIMD, "float32", 0.75),
    faster_than(SIMD, "onnxruntime-web", "float32", 1.8),
    window_speedup(SIMD, "float32", 6.0),
    window_speedup(SIMD, "float64", 6.0),
    window_decode_within(SIMD, "float32", 1.25),
    window_decode_within(SIMD, "float64", 1.25),
]


def check_targets(measured: Measured, targets: list[tuple[str, Check]] = TARGETS) -> list[dict]:
    report = []
    for name, check in targets:
        try:
            met, detail = check(measured)
        except NotMeasured as missing:
            report.append({"name": name, "status": "n/a", "detail": f"not measured: {missing}"})
            continue
        report.append({"name": name, "status": "met" if met else "not met", "detail": detail})
    return report
