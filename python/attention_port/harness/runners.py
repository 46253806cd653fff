"""Run each port on the fixture cases and collect its answers for compare.py to judge, or the
verdicts a port's own language gave.

PORTS builds, for each row of the port table (port_table.py) that `verify --ports` can name, one
Port per dtype it runs in: a row that runs in Node through cli.ts, one that runs in a browser
through browser.py, and a Python port through its entry in PYTHON_RUNNERS. A Port is a report
name, the row it came from, the dtype it computes in and a function from cases to a PortRun (the
answers, the verdicts, and notes such as the time spent inside Node). The TypeScript ports of a
run share one Node process, which judges them with the conformance kit (the WebGPU port's page
judges it alike): a case it passed cleanly (an invalid one refused with its kind and message too)
or found outside the contract comes back as its verdict, the rest as answers (kit-cases.ts says
which). The ports themselves
(reference.py, torch_port.py, the TypeScript files) know nothing of fixtures.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attention_port.golden.reader import FixtureCase, decode_numbers
from attention_port.harness import compare
from attention_port.harness.compare import STEPS, CaseVerdict, PortAnswer, StepCheck
from attention_port.harness.node import DEFAULT_TIMEOUT, NodeError, NodeSession
from attention_port.inputs import AttentionInputError
from attention_port.port_table import BY_NAME, ROWS, PortRow

# What a results document may hold for a case: the core's steps, and the layer's cache.
ANSWERED = (*STEPS, "present_key", "present_value")


@dataclass(frozen=True)
class PortRun:
    """One port's answers on a list of cases, by case id, the verdicts its own language gave (a
    case has one or the other; with both, the verdict is the report's and the answer is there for
    a cross-check), and what else the run measured."""

    answers: dict[str, PortAnswer]
    verdicts: dict[str, CaseVerdict] = field(default_factory=dict)
    notes: dict[str, float] = field(default_factory=dict)  # e.g. node_ms: the time inside Node
    about: dict[str, str] = field(default_factory=dict)  # e.g. adapter: the GPU the WebGPU port ran on


@dataclass(frozen=True)
class Port:
    name: str  # as the report prints it, e.g. "torch-cpu-float32"
    kind: str  # its row in PORTS, e.g. "torch"
    dtype: str  # the dtype it computes in, for the unit roundoff
    run: Callable[[list[FixtureCase]], PortRun]


def _layer_answer(layer_module, case: FixtureCase, **extra) -> PortAnswer:
    """A layer or RoPE case through a Python port's multi_head_attention or apply_rotary."""
    inputs, params = case.inputs, case.params
    try:
        if case.kind == "rope":
            output = layer_module.apply_rotary(inputs["x"], inputs["positions"], **params, **extra)
            return PortAnswer(steps={"output": _as_float64(output)})
        arguments = {name: value for name, value in inputs.items() if name not in ("x_q", "x_kv")}
        result = layer_module.multi_head_attention(
            inputs["x_q"], inputs["x_kv"], **arguments, **params, **extra
        )
        if params["need_weights"] or params.get("return_cache"):
            parts = {
                "output": result.output,
                "weights": result.weights,
                "present_key": result.present_key,
                "present_value": result.present_value,
            }
            return PortAnswer(steps={n: _as_float64(x) for n, x in parts.items() if x is not None})
        return PortAnswer(steps={"output": _as_float64(result)})
    except AttentionInputError as error:
        return PortAnswer(error=(error.kind, str(error)))
    except Exception as error:  # a port that breaks is reported, not raised
        return PortAnswer(crash=f"{type(error).__name__}: {error}")


def _as_float64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor
        import torch

        return x.detach().to("cpu", torch.float64).numpy()
    return np.asarray(x, dtype=np.float64)


def call_arguments(case: FixtureCase) -> tuple[tuple[object, object, object], dict[str, object]]:
    """A case as a port is called with it: (query, key, value), and every option by name in one
    record (attn_mask with the rest), so that a new option of the contract travels without a change
    here."""
    inputs = case.inputs
    return (inputs["query"], inputs["key"], inputs["value"]), {
        "attn_mask": inputs["attn_mask"],
        **case.params,
    }


def _answer(compute: Callable[..., dict[str, np.ndarray]], case: FixtureCase) -> PortAnswer:
    """Call a Python port on one case's inputs and options; sort what happens into an answer."""
    tensors, options = call_arguments(case)
    try:
        return PortAnswer(steps=compute(*tensors, **options))
    except AttentionInputError as error:
        return PortAnswer(error=(error.kind, str(error)))
    except Exception as error:  # a port that breaks is reported, not raised
        return PortAnswer(crash=f"{type(error).__name__}: {error}")


def numpy_port() -> Port:
    from attention_port import layer, reference

    def compute(*args, **kwargs) -> dict[str, np.ndarray]:
        steps = reference.attention_steps(*args, **kwargs)
        return {name: getattr(steps, name) for name in STEPS}

    def run(cases: list[FixtureCase]) -> PortRun:
        return PortRun(
            {
                case.id: _answer(compute, case) if case.kind == "attention" else _layer_answer(layer, case)
                for case in cases
            }
        )

    return Port("numpy", "numpy", "float64", run)


def torch_port(device: str, dtype: str) -> Port:
    import torch

    from attention_port import torch_layer
    from attention_port import torch_port as port

    torch_dtype = getattr(torch, dtype)

    def compute(*args, **kwargs) -> dict[str, np.ndarray]:
        steps = port.attention_steps(*args, **kwargs, device=device, dtype=torch_dtype)
        return {name: getattr(steps, name).detach().to("cpu", torch.float64).numpy() for name in STEPS}

    def answer(case: FixtureCase) -> PortAnswer:
        if case.kind == "attention":
            return _answer(compute, case)
        return _layer_answer(torch_layer, case, device=device, dtype=torch_dtype)

    def run(cases: list[FixtureCase]) -> PortRun:
        with port.tf32_disabled():
            return PortRun({case.id: answer(case) for case in cases})

    return Port(f"torch-{device}-{dtype}", "torch", dtype, run)


def torch_sdpa_port(device: str, dtype: str) -> Port:
    """torch's production kernel, on the cases whose semantics it shares (others are left out)."""
    import torch

    from attention_port import torch_port as port

    torch_dtype = getattr(torch, dtype)

    def compute(*args, **kwargs) -> dict[str, np.ndarray]:
        output = port.torch_sdpa(*args, **kwargs, device=device, dtype=torch_dtype)
        return {"output": output.detach().to("cpu", torch.float64).numpy()}

    def shares_semantics(case: FixtureCase) -> bool:
        if case.expects_error or case.kind != "attention":
            return False
        tensors, options = call_arguments(case)
        try:
            return port.sdpa_shares_semantics(*tensors, **options, device=device, dtype=torch_dtype)
        except AttentionInputError:
            return True  # the kernel's run then reports the error, as every other port's does

    def run(cases: list[FixtureCase]) -> PortRun:
        with port.tf32_disabled():
            return PortRun({case.id: _answer(compute, case) for case in cases if shares_semantics(case)})

    return Port(f"torch-sdpa-{device}-{dtype}", "torch-sdpa", dtype, run)


def decode_tensor(entry: object) -> np.ndarray:
    """A {"shape", "data"} tensor as the TypeScript CLI writes it (data flat, row-major)."""
    if not isinstance(entry, dict) or "shape" not in entry or "data" not in entry:
        raise ValueError("a step is not a {shape, data} object")
    shape = entry["shape"]
    data = np.array(decode_numbers(entry["data"]), dtype=np.float64)
    if data.size != int(np.prod(shape)):
        raise ValueError(
            f"step data holds {data.size} numbers but its shape {shape} needs {int(np.prod(shape))}"
        )
    return data.reshape(shape)


def decode_typescript_answer(entry: object) -> PortAnswer:
    """One case's answer as the TypeScript CLI wrote it."""
    if not isinstance(entry, dict):
        return PortAnswer(crash="malformed result (not an object)")
    if "error" in entry:
        error = entry["error"]
        if not isinstance(error, dict) or not isinstance(error.get("kind"), str):
            return PortAnswer(crash="malformed error result")
        return PortAnswer(error=(error["kind"], str(error.get("message", ""))))
    if "crash" in entry:
        return PortAnswer(crash=str(entry["crash"]))
    try:
        return PortAnswer(steps={name: decode_tensor(entry[name]) for name in ANSWERED if name in entry})
    except (ValueError, TypeError) as error:
        return PortAnswer(crash=f"malformed result: {error}")


def _number(x: object) -> float | None:
    return None if x is None else float(x)  # "NaN", "Infinity" and "-Infinity" too


def decode_step(entry: dict) -> StepCheck:
    """One step's check as the kit's judge gave it (judge.ts's StepCheck)."""
    index = entry["index"]
    return StepCheck(
        str(entry["step"]),
        bool(entry["passed"]),
        float(entry["budgetUsed"]),
        float(entry["maxAbsError"]),
        None if index is None else tuple(int(i) for i in index),
        _number(entry["actual"]),
        _number(entry["expected"]),
        entry["problem"],
    )


def decode_verdict(case: FixtureCase, port: str, dtype: str, entry: object) -> CaseVerdict:
    """The kit's verdict on a case cli.ts passed cleanly or found outside the contract, as compare.py
    words it: the output's figures, every step's check; an invalid case refused with its kind and
    message is a pass with no steps, as compare.py's own."""
    case_id = case.id
    if not isinstance(entry, dict) or entry.get("verdict") not in ("pass", "outside"):
        raise ValueError("a verdict is not a pass or a case outside the contract")
    if entry["verdict"] == "outside":
        return CaseVerdict(case_id, port, dtype, False, problem=entry["problem"], outside=entry["problem"])
    if case.expects_error:
        if entry["steps"] or entry["problem"] is not None:
            raise ValueError("a refusal's verdict has steps or a problem")
        return CaseVerdict(case_id, port, dtype, True)
    steps = [decode_step(step) for step in entry["steps"]]
    output = steps[-1]
    return CaseVerdict(
        case_id,
        port,
        dtype,
        True,
        budget_used=output.budget_used,
        max_abs_error=output.max_abs_error,
        index=output.index,
        actual=output.actual,
        expected=output.expected,
        problem=output.problem,
        steps=steps,
    )


def decode_reply(reply: dict, cases: list[FixtureCase], port: Port, who: str, clock: str) -> PortRun:
    """A TypeScript port's reply (cli.ts's, or the WebGPU page's): its verdicts, its answers, and
    the time it spent on them, as the note `clock` (node_ms, browser_ms)."""
    answers = {i: decode_typescript_answer(a) for i, a in reply["answers"].items()}
    verdicts = {}
    for case in cases:
        if case.id in reply["verdicts"]:
            try:
                verdicts[case.id] = decode_verdict(case, port.name, port.dtype, reply["verdicts"][case.id])
            except (ValueError, TypeError, KeyError, IndexError) as error:
                raise NodeError(f"{who} wrote a malformed verdict for {case.id!r}: {error}") from None
        elif case.id not in answers:
            raise NodeError(f"{who} wrote no result for case {case.id!r}")
    elapsed = reply.get("elapsed_ms")
    notes = {clock: float(elapsed)} if isinstance(elapsed, (int, float)) else {}  # all cases
    about = {"adapter": str(reply["adapter"])} if "adapter" in reply else {}
    return PortRun(answers, verdicts, notes, about)


def judged(port: Port, run: PortRun, by_id: dict[str, FixtureCase]) -> list[CaseVerdict]:
    """Every case of a run judged: the verdict the port's own language gave where there is one,
    else compare.py's on its answer."""
    verdicts = list(run.verdicts.values())
    answered = [i for i in run.answers if i not in run.verdicts]
    return verdicts + [compare.judge(by_id[i], port.name, port.dtype, run.answers[i]) for i in answered]


def typescript_port(
    fixtures_dir,
    name: str = "typescript",
    timeout: float = DEFAULT_TIMEOUT,
    session: NodeSession | None = None,
    every_answer: bool = False,
) -> Port:
    """A port of the table that runs in Node, through cli.ts, in the first dtype of its row: in
    `session` (one Node process for several ports), else in a process of its own. every_answer:
    every attention case's answer comes back too, for a cross-check."""
    row = BY_NAME[name]
    session = session or NodeSession(fixtures_dir, [row.name], timeout)

    def run(cases: list[FixtureCase]) -> PortRun:
        reply = session.request(row.name, [case.id for case in cases], every_answer)
        return decode_reply(reply, cases, port, f"the TypeScript port ({row.name})", "node_ms")

    port = Port(row.name, row.name, row.dtypes[0], run)
    return port


def webgpu_port(fixtures_dir, timeout: float = DEFAULT_TIMEOUT, every_answer: bool = False) -> Port:
    """webgpu.ts in headless Chromium (browser.py), every case in one page load, in float32, judged
    there by the conformance kit as cli.ts judges the Node ports. every_answer: every attention
    case's answer comes back too, for a cross-check."""
    from attention_port.harness import browser

    def run(cases: list[FixtureCase]) -> PortRun:
        reply = browser.run_webgpu(fixtures_dir, [case.id for case in cases], timeout, every_answer)
        return decode_reply(reply, cases, port, "the WebGPU port", "browser_ms")

    port = Port("webgpu", "webgpu", "float32", run)
    return port


# ---------------------------------------------------------------------------------------------
# The table


@dataclass(frozen=True)
class PortOptions:
    """What `verify` says about how to run the ports."""

    fixtures_dir: Path
    device: str | None = None  # torch device; default: cuda, then mps, then cpu
    dtypes: list[str] | None = None  # torch dtypes; default: what the device supports
    node_timeout: float = DEFAULT_TIMEOUT
    node_session: NodeSession | None = None  # the one Node process of the run's TypeScript ports
    every_answer: bool = False  # the TypeScript ports send every answer too, for the cross-check


def _torch_runs(options: PortOptions) -> list[tuple[str, str]]:
    """(device, dtype) pairs: float64 and float32, plus float16 and bfloat16 on CUDA."""
    from attention_port.torch_port import default_device, supported_dtypes

    device = options.device or str(default_device())
    dtypes = options.dtypes or [str(d).removeprefix("torch.") for d in supported_dtypes(device)]
    return [(device, dtype) for dtype in dtypes]


# The port the TypeScript ports are also checked against directly, in float64 (typescript~torch-...).
CROSS_REFERENCE = "torch"
# The ports that run on verify's --device (their rows' device).
DEVICE_PORTS = tuple(row.name for row in ROWS if row.device)
# The Python ports, each by its own runner (they differ in what they are called with).
PYTHON_RUNNERS: dict[str, Callable[[PortOptions], list[Port]]] = {
    "numpy": lambda options: [numpy_port()],
    "torch": lambda options: [torch_port(*run) for run in _torch_runs(options)],
    "torch-sdpa": lambda options: [torch_sdpa_port(*run) for run in _torch_runs(options)],
}


def _builder(row: PortRow) -> Callable[[PortOptions], list[Port]]:
    if row.runs_in == "node":
        return lambda options: [
            typescript_port(
                options.fixtures_dir,
                row.name,
                options.node_timeout,
                options.node_session,
                options.every_answer,
            )
        ]
    if row.runs_in == "browser":
        return lambda options: [webgpu_port(options.fixtures_dir, options.node_timeout, options.every_answer)]
    return PYTHON_RUNNERS[row.name]


PORTS: dict[str, Callable[[PortOptions], list[Port]]] = {row.name: _builder(row) for row in ROWS}


def build_ports(names: list[str], options: PortOptions) -> list[Port]:
    """The ports `names` give, in order. The TypeScript ones share one Node process, and they (the
    WebGPU port too) send back every attention case's answer where verify cross-checks them against
    torch in float64."""
    in_node = [name for name in names if BY_NAME[name].runs_in == "node"]
    options = dataclasses.replace(
        options,
        node_session=NodeSession(options.fixtures_dir, in_node, options.node_timeout),
        every_answer=CROSS_REFERENCE in names and any(d == "float64" for _, d in _torch_runs(options)),
    )
    return [port for name in names for port in PORTS[name](options)]
