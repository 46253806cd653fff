"""The command lines' shared parts: a parser that says a bad command line in one line, and the
argument types the benches share. cli.py and the benches (bench/run.py, bench/gpu.py) import this
module; it imports nothing of the package, so neither command has to import the other."""

from __future__ import annotations

import argparse
import math
import sys


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a bad command line said in one line (exit 2) instead of usage and error."""

    def error(self, message: str):  # type: ignore[override]
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def integers(text: str) -> list[int]:
    """An argparse type: comma-separated positive integers, sorted, each once."""
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"takes comma-separated positive integers, not {text!r}")
    return values


def names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    """Comma-separated names from `allowed`, each once (the type of --ports and --dtypes)."""
    chosen = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [p for p in chosen if p not in allowed]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown[0] if unknown else text!r};"
                                         f" choose from {', '.join(allowed)}")  # fmt: skip
    return chosen


def positive(kind):
    """An argparse type: a finite `kind` (int or float) > 0."""
    return _bounded(kind, lambda value: value > 0, "> 0")


def not_negative(kind):
    """An argparse type: a finite `kind` (int or float) >= 0."""
    return _bounded(kind, lambda value: value >= 0, ">= 0")


def _bounded(kind, accept, bound: str):
    def parse(text: str):
        value = kind(text)  # a ValueError: argparse says "invalid int value" (or float), by __name__
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be a finite number {bound}, not {text}")
        if not accept(value):
            raise argparse.ArgumentTypeError(f"must be {bound}, not {text}")
        return value

    parse.__name__ = kind.__name__
    return parse
