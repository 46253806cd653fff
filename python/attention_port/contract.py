"""The contract as data: the files of contract/ (at the top of the checkout, shipped in the wheel).

What both languages must agree on is declared there once, as JSON: the options, the words of the
two spellings, the check levels, the port table and the learner protocol. Python reads the files
through `load`, and the options as records (`Option`: CORE_OPTIONS, CORE_CHECK_ORDER,
LAYER_OPTIONS, ROPE_OPTIONS); what TypeScript and the docs need is generated from them by
`attention-port contract` (attention_port/pages/generated.py) and held fresh by a test.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from attention_port.paths import CONTRACT


@functools.cache
def load(name: str) -> dict:
    """contract/<name>.json, parsed once per process."""
    return json.loads((CONTRACT / f"{name}.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Option:
    """One option of contract/options.json: its names, what values it takes, its default, the
    error a wrong value raises, and where a fixture case holds it."""

    python: str  # snake_case: the keyword argument
    javascript: str  # camelCase: the options object's property
    type: str  # "boolean", "number", "integer", "integers", "numbers", "window", "mask", "tensor" or "object"
    default: object  # None, False, 0.0, ...: the JSON value as Python reads it
    doc: str  # one line: the TypeScript doc comment
    fixture: str  # "every", "set", "inputs" or "none": where a case holds it
    fixture_note: str | None = None  # what its value in a case's params means (the fixture schema's words)
    required: bool = False  # no default: the caller must give it (the layer's num_heads)
    nullable: bool = False  # None is a value of its own (the default's)
    finite: bool = False
    minimum: float | None = None  # inclusive
    exclusive_minimum: float | None = None
    maximum: float | None = None  # inclusive
    error_kind: str | None = None  # the AttentionInputError's kind for a wrong value
    error_message: str | None = None  # "{name} must be ..., got {value}"
    # (kind, message) of the errors an option of several numbers may raise besides its own: one of
    # its numbers wrong (a window's side, a sink logit), its shape not fitting the tensors', an
    # integer of it beyond key's length (kv_seqlen).
    element_error: tuple[str, str] | None = None
    shape_error: tuple[str, str] | None = None
    limit_error: tuple[str, str] | None = None

    @property
    def in_params(self) -> bool:
        """A fixture case holds it among its params (always, or where the case sets it)."""
        return self.fixture in ("every", "set")


def _option(record: dict) -> Option:
    if record.get("core"):  # the core's option, which the layer passes on: declared there
        return CORE_OPTIONS[record["python"]]
    error = record.get("error", {})
    return Option(
        python=record["python"],
        javascript=record["javascript"],
        type=record["type"],
        default=record.get("default"),
        doc=record["doc"],
        fixture=record["fixture"],
        fixture_note=record.get("fixtureNote"),
        required=record.get("required", False),
        nullable=record.get("nullable", False),
        finite=record.get("finite", False),
        minimum=record.get("minimum"),
        exclusive_minimum=record.get("exclusiveMinimum"),
        maximum=record.get("maximum"),
        error_kind=error.get("kind"),
        error_message=error.get("message"),
        element_error=_error(record, "elementError"),
        shape_error=_error(record, "shapeError"),
        limit_error=_error(record, "limitError"),
    )


def _error(record: dict, field: str) -> tuple[str, str] | None:
    error = record.get(field)
    return None if error is None else (error["kind"], error["message"])


# The attention core's options, in the order the contract declares them (the order of the
# TypeScript options type and of the docs' table), by their Python names.
CORE_OPTIONS: dict[str, Option] = {o.python: o for o in map(_option, load("options")["core"])}
# The scalar options in the order they are checked, before any tensor is read: the first failure
# is raised (attn_mask, a tensor, is read after query, key and value).
CORE_CHECK_ORDER: tuple[Option, ...] = tuple(
    CORE_OPTIONS[name] for name in load("options")["checkOrder"]["core"]
)
# The layer's options (multi_head_attention), the core's among them as the core declares them, and
# RoPE's (apply_rotary, and the layer's `rope` object). Their checks run among the layer's shape
# checks (rotary_dim's range is the heads' feature size), in layer_inputs.py's order.
LAYER_OPTIONS: dict[str, Option] = {o.python: o for o in map(_option, load("options")["layer"])}
ROPE_OPTIONS: dict[str, Option] = {o.python: o for o in map(_option, load("options")["rope"])}
