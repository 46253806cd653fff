"""The bench's report: bench.md (also printed), bench.json (everything, with the machine) and
bench.png (GFLOP/s against n; needs matplotlib, the `bench` extra), each written to a temporary
file and renamed into place."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
from dataclasses import asdict
from pathlib import Path

import numpy as np

from attention_port.files import save_atomic, write_atomic


def describe_machine() -> dict:
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
    memory_kib = _proc_field("/proc/meminfo", "MemTotal")
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_gib": None if memory_kib is None else round(int(memory_kib.split()[0]) / 1024**2, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch_version,
        "node": None,  # run.py fills it in from the Node workers' own report of their version
        "load_average_start": load_average(),  # 1-minute; other work on the machine skews the times
    }


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # pragma: no cover - not Unix
        return None


def _proc_field(path: str, name: str) -> str | None:
    """The value of the first `name: value` line of a /proc file, or None (no such file or line)."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line.split(":", 1)[1].strip() for line in lines if line.split(":")[0].strip() == name), None)


def write_report(out: Path, machine, settings, results, memory, targets, skipped, failed: int,
                 limits: dict, seconds: float, plot: bool, ports: dict[str, str]) -> list[Path]:  # fmt: skip
    """Write bench.json, bench.md and (unless plot is False) bench.png; print the markdown. `ports`:
    every port's name and what it is, in the port table's order."""
    order = {p: i for i, p in enumerate(ports)}
    results = sorted(
        results,
        key=lambda r: (r.kind, r.causal, r.d, r.n, r.window or (), order[r.port], r.dtype != "float64"),
    )
    prefill = [r for r in results if r.kind == "prefill" and r.window is None]
    plot_note = "not written (--no-plot)" if not plot else write_plot(prefill, out / "bench.png", settings)
    document = {
        "format": "attention-port-bench",
        "version": 3,
        "date": machine["date"],
        "machine": machine,
        "settings": settings,
        "ports": {name: what for name, what in ports.items() if name in settings["ports"]},
        "results": [asdict(r) for r in results],
        "memory": [asdict(m) for m in memory],
        "limits": limits,
        "targets": targets,
        "skipped": skipped,
        "failed": failed,
        "plot": None if plot_note else str(out / "bench.png"),
        "seconds": round(seconds, 1),
    }
    markdown = format_markdown(document, results, plot_note, order)
    write_atomic(out / "bench.json", json.dumps(document, indent=1, allow_nan=False) + "\n")
    write_atomic(out / "bench.md", markdown)
    print(markdown)
    return [out / "bench.md", out / "bench.json"] + ([] if plot_note else [out / "bench.png"])


def _load_note(machine: dict, threads: int) -> list[str]:
    start, end = machine.get("load_average_start"), machine.get("load_average_end")
    if start is None or end is None:
        return []
    note = f"Load average (1 min): {start:.2f} at the start, {end:.2f} at the end"
    # The workers run one at a time, so the bench itself adds about `threads` to the load.
    if max(start, end) > threads + 0.5:
        note += "; other work was running on this machine, so the times are noisy (pessimistic)"
    return [note + "."]


def _ms(x: float) -> str:
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"


def _versions(machine: dict) -> str:
    found = {name: v for port in machine.get("versions", {}).values() for name, v in port.items()}
    return ", ".join(
        f"{name} {found[name]}" for name in ("onnxruntime-node", "onnxruntime-web") if name in found
    )


def format_markdown(report: dict, results: list, plot_note: str | None, order: dict) -> str:
    m, s = report["machine"], report["settings"]
    peers = _versions(m)
    prefill = [r for r in results if r.kind == "prefill" and r.window is None]
    limits = report.get("limits") or {}
    lines = [
        "# attention-port bench",
        "",
        f"{m['date']}; {m['cpu']}, {m['cores']} cores ({m['usable_cores']} usable), {m['memory_gib']} GiB;"
        f" Python {m['python']}, numpy {m['numpy']}, torch {m['torch']}, Node {m['node']}"
        + (f", {peers}" if peers else "")
        + ".",
        f"Single-head self-attention, query/key/value [n, {s['d']}]"
        + (f" and [{s['odd_shape'][0]}, {s['odd_shape'][1]}]" if s["odd_shape"] else "")
        + f", seed {s['seed']};"
        f" {s['threads']} thread(s) per worker; each port in its own process.",
        "Ports: " + "; ".join(f"{name} ({what})" for name, what in report["ports"].items()) + ".",
        *_load_note(m, s["threads"]),
        "",
        "## Time",
        "",
        "| port | dtype | causal | n | d | median ms | runs | GFLOP/s | of peak | x numpy | check | kernel |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in prefill:
        head = f"| {r.port} | {r.dtype} | {'yes' if r.causal else 'no'} | {r.n} | {r.d} |"
        if r.status != "ok":
            lines.append(f"{head} FAILED | | | | | {_cell_text(r.problem)} | {r.backend or ''} |")
            continue
        ratio = "" if r.vs_numpy is None else f"{r.vs_numpy:.2f}" + ("†" if r.dtype != "float64" else "")
        lines.append(
            f"{head} {_ms(r.median_ms)} | {len(r.runs_ms)} | {r.gflops:.2f} | {_share(r)} | {ratio} |"
            f" ok ({100 * r.budget_used:.1f}%) | {r.backend or ''} |"
        )
    lines += [
        "",
        f"- median ms: median of the timed runs after a warm-up; at least {s['repeats']} runs, more (up to"
        f" {s['max_repeats']}) while a cell's runs total under {s['cell_budget_s']:g} s, so slow cells have"
        f" exactly {s['repeats']}.",
        "- GFLOP/s counts 4·n²·d flops per pass, for causal passes too (they do about half the work),"
        " so a causal speed-up shows as a higher rate.",
        "- of peak: GFLOP/s over the 128-bit SIMD multiply-add peak measured in this run (Limits below);"
        " native ports use wider vectors where the CPU has them and may pass it.",
        "- x numpy: numpy float64's median / this median at the same n, d and causal (above 1: faster than"
        " numpy). † numpy has no float32, so float32 rows are compared with numpy float64.",
        "- check: the share of compare.py's error budget the output used against numpy float64,"
        " |output - numpy| <= 16·(u + u_float64)·error_scale; over 100% is FAILED and shows no time.",
        "- kernel: the aten op torch's scaled_dot_product_attention dispatched to, seen by torch's profiler;"
        " for webgpu, the adapter it ran on (a CPU emulation such as SwiftShader says so: its times are"
        " not a GPU's).",
    ]
    if s["typescript_max_n"] < max(s["sizes"]) and "typescript" in s["ports"]:
        lines.append(f"- The readable typescript port is timed up to n={s['typescript_max_n']} only"
                     " (it holds the n x n matrices in nested arrays and is slow).")  # fmt: skip
    if s["typescript_max_n"] < max(s["sizes"]) and "webgpu" in s["ports"]:
        lines.append(f"- webgpu is timed up to n={s['typescript_max_n']} only (on a CPU emulation such as"
                     " SwiftShader a call at n=4096 takes minutes).")  # fmt: skip
    lines += _gflops_pivot(prefill, order)
    lines += _decode_table([r for r in results if r.kind == "decode" and r.window is None], s)
    lines += _window_table(results, s, order)
    lines += _limits_lines(limits)
    if report["memory"]:
        lines += [
            "",
            "## Peak memory (fresh process, one pass, float64, not causal)",
            "",
            "| port | n | peak RSS MiB | idle MiB | above idle MiB | note |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for row in report["memory"]:
            head = f"| {row['port']} | {row['n']} |"
            if row["status"] == "ok":
                lines.append(
                    f"{head} {row['peak_mib']:.1f} | {row['idle_mib']:.1f} | {row['above_idle_mib']:.1f} | |"
                )
            else:
                text = "not run" if row["status"] == "not run" else "FAILED"
                lines.append(f"{head} {text} | | | {_cell_text(row['note'])} |")
        lines += [
            "",
            "- peak RSS: the pass's process at exit (VmHWM); idle: a process of the same kind that imported"
            " the same modules and did nothing else (Python ports: Python with the port's imports;"
            " Node ports: Node with bench/worker.ts and the port's module).",
        ]
    lines += ["", "## Targets", ""]
    lines += [f"- {t['status']}: {t['name']}: {t['detail']}" for t in report["targets"]]
    if report["skipped"]:
        lines += ["", "## Skipped", ""]
        lines += [f"- {port}: {why}" for port, why in report["skipped"].items()]
    lines += ["", f"Plot: {plot_note or 'bench.png'}. All numbers: bench.json.", ""]
    return "\n".join(lines)


def _share(r) -> str:
    return "" if r.share is None else f"{100 * r.share:.0f}%"


LIMIT_NAMES = {
    "native_read_gbps": "native read",
    "wasm_read_gbps": "WebAssembly read",
    "wasm_madd_gflops": "128-bit peak",
}


def _decode_table(rows: list, s: dict) -> list[str]:
    """One decode step per row: time, the key and value bytes it read per second, and that
    rate's share of the read bandwidth measured in this run."""
    if not rows:
        return []
    hq, hkv, e = s["decode_shape"]
    web = {(r.dtype, r.n): r.median_ms for r in rows if r.port == "onnxruntime-web" and r.status == "ok"}
    lines = [
        "",
        f"## Decode: one step, query [1, {hq}, 1, {e}] against key and value [1, {hkv}, keys, {e}]",
        "",
        "| port | dtype | keys | median ms | runs | K+V GB/s | of bandwidth | x onnxruntime-web | check"
        " | kernel |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        head = f"| {r.port} | {r.dtype} | {r.n} |"
        if r.status != "ok":
            lines.append(f"{head} FAILED | | | | | {_cell_text(r.problem)} | {r.backend or ''} |")
            continue
        base = web.get((r.dtype, r.n))
        versus = "" if base is None else f"{base / r.median_ms:.2f}"
        of = "" if r.share is None else f"{_share(r)} ({LIMIT_NAMES[r.limit]})"
        lines.append(
            f"{head} {_ms(r.median_ms)} | {len(r.runs_ms)} | {r.read_gbps:.1f} | {of} | {versus} |"
            f" ok ({100 * r.budget_used:.1f}%) | {r.backend or ''} |"
        )
    lines += [
        "",
        f"- K+V GB/s: the bytes of key and value one step reads (2·{hkv}·keys·{e} numbers of the dtype)"
        " over its median time. A decode step does 4 flops per number read: bound by memory, not arithmetic.",
        "- of bandwidth: that rate over the read bandwidth measured in this run (Limits below), WebAssembly's"
        " for the ports that run in a JavaScript engine, native for the others. A cache that fits the"
        " last-level cache is read faster than memory streams, so a share can pass 100%.",
        "- No mask: a step's one query row comes after every key, so causality hides none.",
    ]
    return lines


def _window_table(results: list, s: dict, order: dict) -> list[str]:
    """The windowed rows, each beside the pass it is measured against: a causal prefill with window
    (left, 0) against the plain causal pass at the same n (ideal about n / (2 (left + 1))), and a
    decode step at a position with window (left, 0) against a step over `left` keys (ideal 1x)."""
    windowed = [r for r in results if r.window is not None]
    if not windowed:
        return []
    ok = {(r.port, r.dtype, r.kind, r.n, r.d, r.causal, r.window): r for r in results if r.status == "ok"}
    lines = [
        "",
        "## Windows: each windowed row beside the pass it replaces",
        "",
        "| port | dtype | row | window | median ms | runs | check | against | its median ms | ratio |",
        "|---|---|---|---|---:|---:|---|---|---:|---:|",
    ]
    for r in sorted(windowed, key=lambda r: (r.kind != "prefill", order[r.port], r.dtype != "float64")):
        left = r.window[0]
        if r.kind == "prefill":
            row, against = f"causal prefill, n={r.n}", f"causal, no window, n={r.n}"
            base = ok.get((r.port, r.dtype, "prefill", r.n, r.d, True, None))
        else:
            row, against = f"decode step at position {r.n - 1}", f"decode step over {left} keys"
            base = ok.get((r.port, r.dtype, "decode", left, r.d, False, None))
        head = f"| {r.port} | {r.dtype} | {row} | ({left}, {r.window[1]}) |"
        if r.status != "ok":
            lines.append(f"{head} FAILED | | {_cell_text(r.problem)} | {against} | | |")
            continue
        base_ms = "" if base is None else _ms(base.median_ms)
        # prefill: how many times faster the window makes it; decode: how many times the base step's time.
        ratio = "" if base is None else (
            f"{base.median_ms / r.median_ms:.2f}x faster" if r.kind == "prefill"
            else f"{r.median_ms / base.median_ms:.2f}x the time"
        )  # fmt: skip
        lines.append(
            f"{head} {_ms(r.median_ms)} | {len(r.runs_ms)} | ok ({100 * r.budget_used:.1f}%) | {against}"
            f" | {base_ms} | {ratio} |"
        )
    lines += [
        "",
        "- A windowed prefill: a causal pass whose row i sees keys i - left .. i only (left + 1 keys, the"
        " contract's window (left, 0)); the plain causal pass's row sees i + 1, so the ideal speed-up is"
        " about n / (2 (left + 1)): 8x at n = 16,384 with left = 1023. Goal for simd.ts: >= 6x.",
        "- A windowed decode step: its one row at the position shown (the last of position + 1 keys in the"
        " cache) sees the window's left + 1 keys; the ideal is the time of a step over that many keys, 1x."
        " Goal for simd.ts: within 1.25x. The onnxruntime peers' graphs score every key and mask outside"
        " the window (peers.py), so their ratio shows what a window costs a graph without one.",
    ]
    return lines


def _limits_lines(limits: dict) -> list[str]:
    if not limits:
        return []
    lines = ["", "## Limits (measured in this run)", ""]
    if "native_read_gbps" in limits:
        lines.append(f"- native read bandwidth: {limits['native_read_gbps']:.1f} GB/s (numpy's sum of a"
                     f" float32 buffer of {limits['buffer_mib']:.0f} MiB)")  # fmt: skip
    if "wasm_read_gbps" in limits:
        lines.append(f"- WebAssembly read bandwidth: {limits['wasm_read_gbps']:.1f} GB/s (a 128-bit SIMD"
                     f" sum with 8 accumulators over {limits['buffer_mib']:.0f} MiB)")  # fmt: skip
    if "wasm_madd_gflops" in limits:
        lines.append(f"- 128-bit SIMD multiply-add peak: {limits['wasm_madd_gflops']:.1f} GFLOP/s float32 (12"
                     " independent f32x4 multiply-adds a round, one thread)")  # fmt: skip
    lines += [f"- {name}: {why}" for name, why in limits.items() if name.endswith("problem")]
    return lines


def _gflops_pivot(results: list, order: dict) -> list[str]:
    """GFLOP/s with one column per shape: n for the main d, NxD for any other."""
    main_d = max((r.d for r in results), key=lambda d: sum(r.d == d for r in results), default=0)
    columns = sorted({(r.d != main_d, r.n, r.d) for r in results})
    names = [f"n={n}" if d == main_d else f"{n}x{d}" for _, n, d in columns]
    rows: dict[tuple, dict[tuple, str]] = {}
    for r in results:
        key = (r.causal, order[r.port], r.port, r.dtype != "float64", r.dtype)
        rows.setdefault(key, {})[(r.d != main_d, r.n, r.d)] = (
            f"{r.gflops:.2f}" if r.status == "ok" else "FAILED"
        )
    lines = [
        "",
        "### GFLOP/s at a glance",
        "",
        "| port | dtype | causal | " + " | ".join(names) + " |",
        "|---|---|---|" + "---:|" * len(names),
    ]
    for key in sorted(rows):
        causal, _, port, _, dtype = key
        cells = " | ".join(rows[key].get(column, "") for column in columns)
        lines.append(f"| {port} | {dtype} | {'yes' if causal else 'no'} | {cells} |")
    return lines


def _cell_text(text: str | None) -> str:
    return (text or "").replace("|", "\\|").replace("\n", " ")


def write_plot(results: list, path: Path, settings: dict) -> str | None:
    """GFLOP/s against n (log-log), one line per port and dtype, one panel per causal setting, at
    the main d only. Returns None when written, else why not."""
    try:
        import matplotlib
    except ImportError:
        return "not written: matplotlib is not installed (pip install -e '.[bench]')"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in results if r.status == "ok" and r.d == settings["d"]]
    if not ok:
        return "not written: no cell to plot"
    panels = sorted({r.causal for r in ok})
    figure, axes = plt.subplots(
        1, len(panels), figsize=(6.5 * len(panels) + 2.5, 4.8), squeeze=False, sharey=True
    )
    ports = list(dict.fromkeys(r.port for r in ok))
    colors = {port: plt.get_cmap("tab10")(i % 10) for i, port in enumerate(ports)}
    for axis, causal in zip(axes[0], panels, strict=True):
        for port in ports:
            for dtype in ("float64", "float32"):
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
    axes[0][0].set_ylabel(f"GFLOP/s (4·n²·{settings['d']} flops per pass)")
    # The legend beside the lines, not on them.
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    figure.suptitle(
        f"attention-port bench: single-head self-attention, {settings['threads']} thread(s) per port"
    )
    figure.tight_layout()
    try:
        save_atomic(path, lambda scratch: figure.savefig(scratch, dpi=120))
    finally:
        plt.close(figure)
    return None
