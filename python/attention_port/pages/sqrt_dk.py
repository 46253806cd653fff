"""`attention-port plot-sqrt-dk`: why attention divides the scores by √d_k, as a plot.

The experiment (the same one as the explorer's √d_k panel): draw query and key rows [n, d_k]
with independent unit-variance entries. Each score q·k is a sum of d_k products of unit variance,
so it has variance d_k and the raw scores spread like √d_k. Softmax of such spread-out scores
saturates: one weight per row approaches 1, the row entropy falls from log(n) towards 0, and
softmax's Jacobian diag(p) − ppᵀ, through which every gradient to the scores passes, shrinks
towards 0. Multiplying by 1/√d_k keeps the spread near 1 whatever d_k is, and none of that happens.

Every softmax here is the numpy reference port's (`reference.attention_steps` with scale 1, and
with the default 1/√d_k). The plot needs matplotlib (the `plot` or `dev` extra).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attention_port import reference
from attention_port.files import output_problem, save_atomic
from attention_port.paths import DOCS

DEFAULT_OUT = DOCS / "sqrt-dk.png"
DIMENSIONS = tuple(2**n for n in range(11))  # d_k = 1 .. 1024
ROWS = 64  # query and key rows per draw
DRAWS = 8  # independent draws averaged per d_k


@dataclass(frozen=True)
class SqrtDkStats:
    """One d_k, with ("scaled") and without ("unscaled") the 1/√d_k factor; means over rows and draws."""

    dk: int
    spread: dict[str, float]  # standard deviation of the logits
    max_weight: dict[str, float]  # the largest weight of each row
    entropy: dict[str, float]  # -sum p log p of each row, nats (log(ROWS) when uniform)
    jacobian: dict[str, float]  # Frobenius norm of diag(p) - p pᵀ for each row


def jacobian_size(weights: np.ndarray) -> np.ndarray:
    """‖diag(p) − ppᵀ‖_F for every row p of weights [..., n] -> [...]."""
    jacobian = np.einsum("...i,ij->...ij", weights, np.eye(weights.shape[-1]))  # [..., n, n] diag(p)
    jacobian = jacobian - weights[..., :, None] * weights[..., None, :]  # [..., n, n]
    return np.sqrt(np.sum(jacobian**2, axis=(-2, -1)))


def measure(dk: int, rows: int = ROWS, draws: int = DRAWS, seed: int = 0) -> SqrtDkStats:
    rng = np.random.Generator(np.random.PCG64([seed, dk]))
    query = rng.standard_normal((draws, rows, dk))  # [D, n, d_k]
    key = rng.standard_normal((draws, rows, dk))  # [D, n, d_k]
    value = np.zeros((draws, rows, 1))  # [D, n, 1]: only the weights are read
    stats: dict[str, dict[str, float]] = {"spread": {}, "max_weight": {}, "entropy": {}, "jacobian": {}}
    for name, scale in (("unscaled", 1.0), ("scaled", None)):
        steps = reference.attention_steps(query, key, value, scale=scale)
        weights = steps.weights  # [D, n, n]
        stats["spread"][name] = float(np.std(steps.logits))
        stats["max_weight"][name] = float(np.mean(np.max(weights, axis=-1)))
        with np.errstate(divide="ignore", invalid="ignore"):
            plogp = np.where(weights > 0, weights * np.log(weights), 0.0)
        stats["entropy"][name] = float(np.mean(-np.sum(plogp, axis=-1)))
        stats["jacobian"][name] = float(np.mean(jacobian_size(weights)))
    return SqrtDkStats(dk, **stats)


def plot(results: list[SqrtDkStats], out: Path) -> None:
    """Four panels against d_k (log scale), both series each; written atomically to `out`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dks = [r.dk for r in results]
    panels = (
        ("spread", "spread of the logits (std)"),
        ("max_weight", "largest softmax weight per row"),
        ("entropy", f"row entropy (nats; uniform = ln {ROWS} = {np.log(ROWS):.2f})"),
        ("jacobian", "softmax Jacobian size ‖diag(p) − ppᵀ‖_F"),
    )
    # Okabe-Ito blue and vermillion, told apart by line style too: readable without colour vision.
    series = (("scaled", "with 1/√d_k", "#0072B2", "-", "o"), ("unscaled", "without", "#D55E00", "--", "s"))
    figure, axes = plt.subplots(1, 4, figsize=(15, 3.6), constrained_layout=True)
    for ax, (field, title) in zip(axes, panels, strict=True):
        for name, label, colour, style, marker in series:
            values = [getattr(r, field)[name] for r in results]
            ax.plot(dks, values, style, color=colour, marker=marker, markersize=4, label=label)
        ax.set_xscale("log", base=2)
        ax.set_xticks([1, 4, 16, 64, 256, 1024], ["1", "4", "16", "64", "256", "1024"])
        ax.set_xlabel("d_k")
        ax.set_title(title, fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    axes[0].legend(loc="upper left")
    figure.suptitle(
        f"Why attention divides by √d_k: random unit-variance q, k ({ROWS} rows, {DRAWS} draws per d_k);"
        " softmax by reference.py",
        fontsize=11,
    )
    try:
        save_atomic(out, lambda scratch: figure.savefig(scratch, dpi=110))
    finally:
        plt.close(figure)


def command_plot_sqrt_dk(args: argparse.Namespace) -> int:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("error: matplotlib is not installed (pip install -e '.[plot]')", file=sys.stderr)
        return 2
    if args.seed < 0:
        print(f"error: --seed must be a whole number >= 0, got {args.seed}", file=sys.stderr)
        return 2
    out = DEFAULT_OUT if args.out is None else Path(args.out)
    if problem := output_problem(out, folder=False):
        print(f"error: --out {out}: {problem}", file=sys.stderr)
        return 2
    results = [measure(dk, seed=args.seed) for dk in DIMENSIONS]
    try:
        plot(results, out)
    except OSError as error:
        print(f"error: --out {out}: cannot be written ({error.strerror or error})", file=sys.stderr)
        return 2
    print(f"{'d_k':>5}  {'max weight: scaled':>18}  {'unscaled':>8}  {'jacobian: scaled':>16}  unscaled")
    for r in results:
        print(
            f"{r.dk:>5}  {r.max_weight['scaled']:>18.3f}  {r.max_weight['unscaled']:>8.3f}"
            f"  {r.jacobian['scaled']:>16.3f}  {r.jacobian['unscaled']:>8.3f}"
        )
    print(f"wrote {out}")
    return 0
