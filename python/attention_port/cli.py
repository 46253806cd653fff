"""`attention-port generate | verify | check | ...`: the project's commands, with the exit codes of
EXIT_CODES below (also printed by --help)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path

from attention_port import paths
from attention_port.args import OneLineParser
from attention_port.extras import MissingExtra
from attention_port.files import output_problem, write_atomic
from attention_port.golden import reader as fixtures
from attention_port.golden.cases import FIXTURE_CASES, LEVELS, level_of
from attention_port.harness import compare
from attention_port.harness import runners as ports
from attention_port.harness.node import DEFAULT_TIMEOUT, NodeError, NodeUnavailable, checked_node
from attention_port.paths import FIXTURES as DEFAULT_FIXTURES
from attention_port.paths import NotACheckout
from attention_port.port_table import BY_NAME as PORT_ROWS
from attention_port.port_table import render as render_port_table

EXIT_CODES = """exit codes:
  0  every port passed every case (cases outside the contract are reported apart)
  1  a port failed a case, or its run did not finish (crash, time-out, malformed results);
     generate --check: the fixtures are stale; side-by-side --check: the page is stale;
     contract --check: a file generated from contract/ is stale;
     check: a level you attempted fails
  2  the job could not run, said in one line: unusable fixtures, no usable Node, a torch
     device this machine lacks, or a wrong command line (check: the file could not be run)
  141  the output was closed before the report ended (`| head`): nothing more is said"""
ALL_PORTS = tuple(ports.PORTS)
# verify's summary ends with what it proves: the ports against the files, whose sha256 says only
# that they agree with the manifest; regenerating them is what proves the oracle wrote them.
TRUSTED = "; judged against the fixtures' expected values (only `generate --check` proves them the oracle's)"


class UsageError(Exception):
    """A command line that asks for something that does not exist (exit 2, one line)."""


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


MAX_SECONDS = 86400.0  # a day: past it a time-out is a typo, and past ~24 days poll() overflows


def seconds_problem(option: str, seconds: float) -> str | None:
    """Why `seconds` cannot be the time-out `option` gives, or None: a finite number > 0, and at
    most a day (1e10 would overflow the waits of threading and subprocess)."""
    if not (math.isfinite(seconds) and seconds > 0):
        return f"{option} must be a finite number of seconds > 0, got {seconds:g}"
    if seconds > MAX_SECONDS:
        return f"{option} must be at most {MAX_SECONDS:g} seconds (a day), got {seconds:g}"
    return None


# ---------------------------------------------------------------------------------------------
# generate


def command_generate(args: argparse.Namespace) -> int:
    from attention_port.golden import capture, generate  # the oracle's mpmath: the `harness` extra

    if args.out is None and not paths.IN_CHECKOUT and not args.check:
        return _error(
            "generate outside a checkout needs --out DIR (the default folder is the installed"
            f" package's own, {DEFAULT_FIXTURES}, which it never writes into)"
        )
    out = DEFAULT_FIXTURES if args.out is None else Path(args.out)
    if args.check:
        if problem := output_problem(out, folder=True):
            return _error(f"--out {out}: {problem}")
        note, capture_stale = capture.generate_note(check=True)
        print(note)
        if capture_stale:
            print(f"fixtures in {out} are stale (the real model's capture); run `attention-port generate`")
            return 1
        stale = generate.stale_files(out)
        if stale:
            print(
                f"fixtures in {out} are stale ({len(stale)} differences, e.g. {stale[0]});"
                " run `attention-port generate`"
            )
            return 1
        print(f"fixtures in {out} are fresh")
        return 0
    started = time.perf_counter()
    print(capture.generate_note(check=False)[0])
    count = generate.write_fixtures(out)
    print(f"wrote {count} cases to {out} in {time.perf_counter() - started:.1f} s")
    return 0


# ---------------------------------------------------------------------------------------------
# verify


def _selected_cases(args: argparse.Namespace) -> list:
    """The fixture cases --case (ids, comma-separated or repeated) and --tag pick; all by default."""
    ids = [i.strip() for given in args.case or [] for i in given.split(",") if i.strip()]
    if args.case and not ids:  # as --ports: an empty list is a slip, not "every case"
        raise UsageError("--case names no case; give case ids (attention-port verify --list shows them)")
    cases = fixtures.load_fixtures(args.fixtures, ids or None, kinds=fixtures.KINDS)
    if args.tag:
        known = {tag for case in cases for tag in case.tags}
        if unknown := sorted(set(args.tag) - known):
            raise UsageError(f"no case has the tag {unknown[0]!r}; tags: {', '.join(sorted(known))}")
        cases = [case for case in cases if set(args.tag) <= set(case.tags)]
    return cases


def _list_cases(cases: list) -> int:
    """--list: one line per case: its id, its level of `attention-port check`, and its tags."""
    width = max((len(case.id) for case in cases), default=0)
    for case in cases:
        level = level_of(case.tags)
        print(f"{case.id:<{width}}  level {level:>2} ({LEVELS[level - 1].name})  {' '.join(case.tags)}")
    print(f"{len(cases)} cases")
    return 0


def _warn_if_stale(folder: Path, cases: list, args: argparse.Namespace) -> None:
    """A warning line when the fixture files differ from what cases.py and the oracle give today
    (a case edited, the oracle changed, and nobody ran `attention-port generate`), and one when
    the folder's cases are not the table's (one added or dropped in the folder or the table)."""
    from attention_port.golden import generate

    stale = generate.stale_cases(cases)
    if stale:
        print(
            f"warning: {len(stale)} fixture case(s) in {folder} differ from cases.py and the oracle"
            f" (e.g. {stale[0]}); run `attention-port generate` to refresh them",
            file=sys.stderr,
        )
    if args.case:  # the cases asked for by id are in the folder (load_fixtures said so)
        return
    wanted = [case.id for case in FIXTURE_CASES if set(args.tag or ()) <= set(case.tags)]
    on_disk = {case.id for case in cases}
    missing = [i for i in wanted if i not in on_disk]
    extra = sorted(on_disk - {case.id for case in FIXTURE_CASES})
    if missing or extra:
        parts = [f"lacks {len(missing)} case(s) of cases.py (e.g. {missing[0]})"] if missing else []
        parts += [f"holds {len(extra)} case(s) cases.py does not (e.g. {extra[0]})"] if extra else []
        print(
            f"warning: {folder} {' and '.join(parts)}; run `attention-port generate` to refresh it",
            file=sys.stderr,
        )


def _check_torch_device(device: str | None) -> None:
    """A --device torch can put a tensor on, or UsageError in one line (before any port runs)."""
    if device is None:
        return
    import torch

    try:
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, ValueError) as error:
        text = str(error).strip()
        first = text.splitlines()[0] if text else type(error).__name__
        raise UsageError(f"--device {device}: torch cannot use this device here ({first})") from None


def _default_ports() -> list[str]:
    """Every port that can run here: the torch ports only where torch imports, the WebGPU port
    only where it can run (Chromium, playwright); one line on stderr says why each one left out
    is. Named in --ports, a port runs or the job cannot (exit 2)."""
    from attention_port.harness.browser import unavailable_reason

    names = list(ALL_PORTS)
    try:
        import attention_port.torch_port  # noqa: F401  (torch itself, and its version's check)
    except MissingExtra as error:
        print(f"note: the torch ports are left out: {error}", file=sys.stderr)
        names = [name for name in names if name not in ports.DEVICE_PORTS]
    if (reason := unavailable_reason()) is not None:
        for name in (row.name for row in PORT_ROWS.values() if row.runs_in == "browser"):
            print(f"note: the {name} port is left out: {reason}", file=sys.stderr)
        names = [name for name in names if PORT_ROWS[name].runs_in != "browser"]
    return names


def command_verify(args: argparse.Namespace) -> int:
    given = ",".join(ALL_PORTS) if args.ports is None else args.ports
    names = [p.strip() for p in given.split(",") if p.strip()]
    if not names:
        return _error(f"--ports names no port; choose from {', '.join(ALL_PORTS)}")
    unknown = [p for p in names if p not in ALL_PORTS]
    if unknown:
        return _error(f"unknown port {unknown[0]!r}; choose from {', '.join(ALL_PORTS)}")
    twice = [p for n, p in enumerate(names) if p in names[:n]]
    if twice:
        return _error(f"--ports names {twice[0]!r} twice")
    if problem := seconds_problem("--node-timeout", args.node_timeout):
        return _error(problem)
    dtypes = None if args.dtypes is None else [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if dtypes == []:  # as --ports: an empty list is a slip, not "the defaults"
        return _error(f"--dtypes names no dtype; choose from {', '.join(compare.UNIT_ROUNDOFF)}")
    if dtypes and (bad := [d for d in dtypes if d not in compare.UNIT_ROUNDOFF]):
        return _error(f"unknown dtype {bad[0]!r}; choose from {', '.join(compare.UNIT_ROUNDOFF)}")
    if dtypes and args.ports is not None and not set(ports.DEVICE_PORTS) & set(names):
        return _error(
            f"--dtypes sets the torch ports' dtypes, and --ports {args.ports} names none"
            f" ({', '.join(ports.DEVICE_PORTS)}); each other port computes in its own dtype"
        )
    if not Path(args.fixtures).is_dir():
        return _error(f"--fixtures {args.fixtures}: no such folder")
    if args.json not in (None, "-") and (problem := output_problem(Path(args.json), folder=False)):
        return _error(f"--json {args.json}: {problem}")  # said before any port runs
    cases = _selected_cases(args)
    if args.list:
        return _list_cases(cases)
    if args.ports is None:
        names = _default_ports()
    _warn_if_stale(Path(args.fixtures), cases, args)
    by_id = {case.id: case for case in cases}

    if set(ports.DEVICE_PORTS) & set(names):
        _check_torch_device(args.device)
    runs_in = {PORT_ROWS[name].runs_in for name in names}
    if runs_in & {"node", "browser"}:
        try:
            checked_node(args.node_timeout)  # no usable Node: the job cannot run (exit 2, one line)
        except NodeUnavailable as error:
            return _error(str(error))
    if "browser" in runs_in:
        from attention_port.harness.browser import unavailable_reason

        if (reason := unavailable_reason()) is not None:
            in_browser = [name for name in names if PORT_ROWS[name].runs_in == "browser"]
            return _error(f"the {' and '.join(in_browser)} port cannot run: {reason}")

    verdicts: list[compare.CaseVerdict] = []
    broken: list[str] = []  # ports that could not run at all, one line each
    runs: dict[str, tuple[ports.Port, ports.PortRun, float]] = {}  # by port name, with its seconds
    options = ports.PortOptions(Path(args.fixtures), args.device, dtypes, args.node_timeout)
    for port in ports.build_ports(names, options):
        started = time.perf_counter()
        try:
            run = port.run(cases)
        except NodeError as error:
            broken.append(f"FAIL  {port.name}: {error}")
            continue
        runs[port.name] = (port, run, time.perf_counter() - started)
        verdicts += ports.judged(port, run, by_id)
    verdicts += _cross_checks([(port, run) for port, run, _ in runs.values()], by_id)

    order = {case.id: n for n, case in enumerate(cases)}
    verdicts.sort(key=lambda v: order[v.case_id])
    failed = sum(compare.failed(v) for v in verdicts) + len(broken)
    passed = sum(v.passed for v in verdicts)
    outside = sum(v.outside is not None for v in verdicts)
    if args.json:
        report = {
            "fixtures": str(args.fixtures),
            "ports": {
                name: {"dtype": port.dtype, "seconds": seconds, **run.notes, **run.about}
                for name, (port, run, seconds) in runs.items()
            },
            "broken": broken,
            "results": [v.to_json() for v in verdicts],
            "passed": passed,
            "failed": failed,
            "outside_contract": outside,
        }
        text = json.dumps(report, indent=1, allow_nan=False) + "\n"
        if args.json == "-":
            sys.stdout.write(text)
        else:
            try:
                write_atomic(Path(args.json), text)
            except OSError as error:
                return _error(f"--json {args.json}: cannot be written ({error.strerror or error})")
    if args.json != "-":
        # By default only what went wrong has a line of its own; a case outside the contract is no
        # failure, and is counted in the summary (-v lists every case, those too).
        shown = [v for v in verdicts if args.verbose or compare.failed(v)]
        for verdict in shown:
            line = compare.format_verdict(verdict)
            if not verdict.passed:
                line += f"  -- {by_id[verdict.case_id].description}"
            print(line)
        for line in broken:
            print(line)
        if shown or broken:
            print()
        if args.by_level:
            _print_levels(verdicts, by_id)
        _print_port_summary(verdicts, runs)
        print(_summary_line(passed, failed, outside, args.verbose))
    return 0 if failed == 0 else 1


def _summary_line(passed: int, failed: int, outside: int, verbose: bool) -> str:
    """verify's last line: "12 passed, 0 failed, 27 outside the contract (-v lists them)", and
    what a pass proves (TRUSTED)."""
    line = f"{passed} passed, {failed} failed"
    if outside:
        line += f", {outside} outside the contract" + ("" if verbose else " (-v lists them)")
    return line + TRUSTED


def _cross_checks(runs: list[tuple[ports.Port, ports.PortRun]], by_id: dict) -> list[compare.CaseVerdict]:
    """TypeScript (WebGPU too) against torch float64 directly, as well as each against the truth."""
    reference = next(
        ((p, r) for p, r in runs if p.kind == ports.CROSS_REFERENCE and p.dtype == "float64"), None
    )
    if reference is None:
        return []
    torch_port, torch_run = reference
    verdicts = []
    for port, run in runs:
        if PORT_ROWS[port.kind].language != "typescript":
            continue
        pair = f"{port.name}~{torch_port.name}"
        for case_id, answer in run.answers.items():
            if by_id[case_id].kind != "attention":  # the layer's and RoPE's: held to the oracle only
                continue
            verdict = compare.judge_pair(
                by_id[case_id], pair, port.dtype, answer, torch_run.answers[case_id], torch_port.dtype
            )
            verdicts.append(verdict)
    return verdicts


def _print_levels(verdicts: list[compare.CaseVerdict], by_id: dict) -> None:
    """--by-level: per port and level of `attention-port check`, the most budget a case used."""
    print(f"{'port':<36} {'level':<42} cases  outside  max budget used")
    for name in dict.fromkeys(v.port for v in verdicts):
        for number, level in enumerate(LEVELS, 1):
            mine = [v for v in verdicts if v.port == name and level_of(by_id[v.case_id].tags) == number]
            if not mine:
                continue
            budgets = [v.budget_used for v in mine if v.budget_used is not None]
            shown = compare.format_budget(max(budgets)) if budgets else "-"
            outside = sum(v.outside is not None for v in mine)
            print(
                f"{name:<36} {f'{number:>2} {level.name}'[:42]:<42} {len(mine):>5}  {outside:>7}  {shown:>15}"
            )
    print()


def _print_port_summary(
    verdicts: list[compare.CaseVerdict], runs: dict[str, tuple[ports.Port, ports.PortRun, float]]
) -> None:
    names = list(dict.fromkeys(v.port for v in verdicts))
    width = max([36, *map(len, names)])  # a cross-check's name joins two ports' names
    print(f"{'port':<{width}} cases  failed  max budget used")
    for name in names:
        mine = [v for v in verdicts if v.port == name]
        budgets = [v.budget_used for v in mine if v.budget_used is not None]
        shown = compare.format_budget(max(budgets, default=0.0))
        seconds = ""  # none for a cross-check
        if name in runs:
            _, run, elapsed = runs[name]
            inside = f", {run.notes['node_ms']:.0f} ms inside Node" if "node_ms" in run.notes else ""
            if "browser_ms" in run.notes:
                inside = f", {run.notes['browser_ms']:.0f} ms inside Chromium on {run.about['adapter']}"
            seconds = f"  ({elapsed:.2f} s{inside})"
        failed = sum(compare.failed(v) for v in mine)
        print(f"{name:<{width}} {len(mine):>5}  {failed:>6}  {shown:>15}{seconds}")


# ---------------------------------------------------------------------------------------------


def command_side_by_side(args: argparse.Namespace) -> int:
    from attention_port import paths
    from attention_port.pages import side_by_side

    paths.require_checkout("side-by-side")  # it writes docs/side-by-side.md and lesson-steps.json
    written = f"{side_by_side.OUTPUT} and {side_by_side.STEPS_OUTPUT}"
    if args.check:
        if side_by_side.is_fresh():
            print(f"{written} are up to date")
            return 0
        print(f"{written} are not both up to date; run `attention-port side-by-side`")
        return 1
    side_by_side.write()
    print(f"wrote {written}")
    return 0


def command_contract(args: argparse.Namespace) -> int:
    from attention_port import paths
    from attention_port.pages import generated

    paths.require_checkout("contract")  # it writes files of the checkout from contract/
    if args.check:
        stale = generated.stale()
        if not stale:
            print("every file generated from contract/ is up to date")
            return 0
        print(f"not up to date with contract/: {', '.join(stale)}; run `attention-port contract`")
        return 1
    written = generated.write()
    print(f"wrote {', '.join(written)}" if written else "every file generated from contract/ was up to date")
    return 0


def command_check(args: argparse.Namespace) -> int:
    from attention_port.learner import check
    from attention_port.learner.runner import parse_memory

    if problem := seconds_problem("--timeout", args.timeout):
        return _error(problem)
    try:
        memory = parse_memory(args.memory)
    except ValueError as error:
        return _error(str(error))
    run = check.watch if args.watch else check.check
    return run(
        Path(args.path),
        Path(args.fixtures),
        timeout=args.timeout,
        memory=memory,
        run_all=args.all,
        start=args.start,
        dtype=args.dtype,
    )


def command_conformance_page(args: argparse.Namespace) -> int:
    from attention_port.pages import conformance

    try:
        cases = fixtures.load_fixtures(args.fixtures)
    except fixtures.FixtureError as error:
        return _error(str(error))
    return conformance.command_conformance_page(Path(args.results), Path(args.out), cases)


def command_explore(args: argparse.Namespace) -> int:
    from attention_port.pages import explore

    return explore.command_explore(args)


def command_ports(args: argparse.Namespace) -> int:
    print(render_port_table())
    return 0


def command_plot_sqrt_dk(args: argparse.Namespace) -> int:
    from attention_port.pages import sqrt_dk

    return sqrt_dk.command_plot_sqrt_dk(args)


def make_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="attention-port",
        description="Scaled dot-product attention ports checked against golden fixtures.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)

    generate = commands.add_parser("generate", help="write the fixtures from the case table")
    add = generate.add_argument
    add("--out", default=None,
        help=f"fixture folder (default: {DEFAULT_FIXTURES} in a checkout; outside one, --out is needed"
        " to write, and --check reads the installed fixtures)")  # fmt: skip
    add("--check", action="store_true", help="only check that the folder is fresh")
    generate.set_defaults(handler=command_generate)

    ports_command = commands.add_parser("ports", help="print the port table: what verify can run")
    ports_command.set_defaults(handler=command_ports)

    verify = commands.add_parser("verify", help="run every port on every case and report")
    add = verify.add_argument
    add("--fixtures", default=str(DEFAULT_FIXTURES), help="fixture folder (default: %(default)s)")
    add("--ports", default=None,
        help=f"comma-separated, from: {', '.join(ALL_PORTS)} (default: all that can run here)")  # fmt: skip
    add("--device", default=None, help="torch device (default: cuda, then mps, then cpu)")
    add(
        "--dtypes",
        help="torch dtypes (default: float64,float32, plus float16,bfloat16 on cuda; float32 on mps)",
    )
    add("--case", action="append", metavar="IDS", help="run only these cases (comma-separated; repeatable)")
    add("--tag", action="append", help="run only the cases with this tag (repeatable: all of them)")
    add("--list", action="store_true", help="list the selected cases with their tags, run nothing")
    add("--json", metavar="FILE", help="also write a JSON report to FILE ('-': stdout only)")
    add("--node-timeout", type=float, default=DEFAULT_TIMEOUT,
        help="seconds the TypeScript run may take (default: %(default)g)")  # fmt: skip
    add("--by-level", action="store_true",
        help="also print, per port and level of `check`, the most budget a case used")  # fmt: skip
    add("-v", "--verbose", action="store_true",
        help="print every case's line, passes and cases outside the contract too"
        " (default: failures, then one line per port and the summary)")  # fmt: skip
    verify.set_defaults(handler=command_verify)

    pages = commands.add_parser("side-by-side", help="write docs/side-by-side.md from the two readable ports")
    pages.add_argument("--check", action="store_true", help="only check that the page is up to date")
    pages.set_defaults(handler=command_side_by_side)

    contract = commands.add_parser(
        "contract", help="write the TypeScript and docs generated from the contract's declaration (contract/)"
    )
    contract.add_argument("--check", action="store_true", help="only check that they are up to date")
    contract.set_defaults(handler=command_contract)

    mine = commands.add_parser(
        "check",
        help="check your own attention implementation, level by level",
        description="Check your own attention implementation against the fixtures, level by level"
        " (docs/learn.md). check bounds the time, memory, processes and output of your code, so that"
        " a bug cannot hurt your machine; it is not a security sandbox: your code runs as you.",
    )
    mine.add_argument("path", help="a .ts/.mts/.js/.mjs module or a .py file (see docs/learn.md)")
    mine.add_argument("--all", action="store_true", help="run every level, not only up to the first failure")
    mine.add_argument("--timeout", type=float, default=10.0, help="seconds one case may take (default: 10)")
    mine.add_argument(
        "--fixtures", default=str(DEFAULT_FIXTURES), help="fixture folder (default: %(default)s)"
    )
    mine.add_argument(
        "--memory",
        default="2GiB",
        help="memory your code may use, e.g. 4GiB or 1536MiB (default: 2GiB; check adds what Node or"
        " Python maps for itself)",
    )
    mine.add_argument(
        "--start",
        action="store_true",
        help="a guided first run: what each level teaches, then the check, and the lesson lines to read",
    )
    mine.add_argument(
        "--watch", action="store_true", help="check again each time the file is saved; Ctrl-C stops"
    )
    mine.add_argument(
        "--dtype", choices=tuple(compare.UNIT_ROUNDOFF), default="float64",
        help="the dtype your function computes in: the rule's precision and range (default: float64)",
    )  # fmt: skip
    mine.set_defaults(handler=command_check)

    page = commands.add_parser(
        "conformance-page", help="write docs/conformance.md from the peers' verdicts (scripts/conformance)"
    )
    page.add_argument("--results", required=True, help="the JSON file typescript/conformance/peers.ts wrote")
    page.add_argument("--out", default="docs/conformance.md", help="the page (default: %(default)s)")
    page.add_argument(
        "--fixtures", default=str(DEFAULT_FIXTURES), help="fixture folder (default: %(default)s)"
    )
    page.set_defaults(handler=command_conformance_page)

    # Listed here for --help; `bench` parses its own options (bench/run.py), imported only when it runs.
    commands.add_parser(
        "bench",
        add_help=False,
        help="time every port and the onnxruntime peers side by side (each in its own process);"
        " `attention-port bench --help` for its options",
    )

    explore = commands.add_parser(
        "explore", help="the attention explorer in the browser (serve it, or --build one HTML file)"
    )
    explore.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    explore.add_argument(
        "--build", nargs="?", const="", metavar="DIR",
        help="write DIR/index.html instead of serving (default DIR: docs/explorer)",
    )  # fmt: skip
    explore.add_argument("--fixtures", default=None, help="fixture folder (default: fixtures/)")
    explore.set_defaults(handler=command_explore)

    plot_sqrt_dk = commands.add_parser("plot-sqrt-dk", help="plot why attention divides by sqrt(d_k)")
    plot_sqrt_dk.add_argument("--out", default=None, help="PNG file (default: docs/sqrt-dk.png)")
    plot_sqrt_dk.add_argument("--seed", type=int, default=0, help="input seed (default: 0)")
    plot_sqrt_dk.set_defaults(handler=command_plot_sqrt_dk)

    return parser


EXIT_PIPE_CLOSED = 141  # what a shell shows for a command ended by SIGPIPE


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:
        # The reader went away (`verify -v | head -1`): stop quietly. stdout is pointed at devnull
        # so that the interpreter's last flush of it at exit does not fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):  # a stream that is not a file (a test's)
                os.dup2(devnull, stream.fileno())
        os.close(devnull)
        return EXIT_PIPE_CLOSED


def _main(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:
        from attention_port.bench.run import main as bench_main

        return bench_main(argv[1:])
    args = make_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (fixtures.FixtureError, UsageError, NodeError, MissingExtra, NotACheckout) as error:
        return _error(str(error))
    except KeyboardInterrupt:
        return _error("interrupted")


if __name__ == "__main__":
    sys.exit(main())
