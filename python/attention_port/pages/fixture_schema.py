"""The params of the fixture case schema (fixtures/schema/case-v5.json), generated from the
options' declaration (contract/options.json) for `attention-port contract` (pages/generated.py).

A case's params are the core's options that a fixture holds (fixture "every" or "set"): `params`
says what each takes, from its type, range and nullability, with its fixtureNote as the property's
description (an option of integers refers to a $defs entry of its own, written here too, since
its arrays nest); `raw_params`, an invalid case's, only which names may appear, since such a case may
hold anything. Every other key of the schema is written by hand and kept as it is, in the file's
formatting (2-space JSON and a final newline), as package.json's exports map is.
"""

from __future__ import annotations

import json

from attention_port.contract import CORE_OPTIONS, Option
from attention_port.golden.reader import CASE_FORMAT, SCHEMA_FILES
from attention_port.paths import REPO_ROOT, SCHEMA_DIR

CASE_SCHEMA = (SCHEMA_DIR / SCHEMA_FILES[CASE_FORMAT]).relative_to(REPO_ROOT).as_posix()


def _property(option: Option) -> dict:
    """The JSON Schema of one option's value in a valid case's params."""
    if option.type == "boolean":
        value: dict = {"type": "boolean"}
    elif option.type in ("number", "integer"):
        value = _bounded(option.type, option)
    elif option.type == "integers":  # an integer, or nested arrays of them (one per batch index)
        value = {"$ref": f"#/$defs/{_integers_def(option)}"}
    elif option.type == "window":  # [left, right], a side null where it is unbounded
        side = {"anyOf": [{"type": "null"}, _bounded("integer", option)]}
        value = {"type": "array", "prefixItems": [side, side], "minItems": 2, "maxItems": 2}
    elif option.type == "numbers":  # numbers as the tensors write them: NaN and the infinities as strings
        value = {"type": "array", "items": {"$ref": "#/$defs/number"}}
    else:  # mask and tensor are inputs, object the layer's: no core option in params has them
        raise ValueError(f"{option.python}: no fixture schema for an option of type {option.type!r}")
    if option.nullable:
        value = {"anyOf": [{"type": "null"}, value]}
    return value if option.fixture_note is None else {"description": option.fixture_note, **value}


def _bounded(type: str, option: Option) -> dict:
    """A number or an integer within the option's bounds."""
    bounds = {
        "minimum": option.minimum,
        "exclusiveMinimum": option.exclusive_minimum,
        "maximum": option.maximum,
    }
    return {"type": type, **{key: bound for key, bound in bounds.items() if bound is not None}}


def _integers_def(option: Option) -> str:
    """The name of the $defs entry of an option of integers' values (recursive: nested arrays)."""
    return f"{option.python}_integers"


def integers_defs() -> dict[str, dict]:
    """The $defs entries the params' integers refer to: an integer in the option's range, or an
    array of such values."""
    return {
        _integers_def(option): {
            "anyOf": [
                _bounded("integer", option),
                {"type": "array", "items": {"$ref": f"#/$defs/{_integers_def(option)}"}},
            ]
        }
        for option in CORE_OPTIONS.values()
        if option.in_params and option.type == "integers"
    }


def params() -> tuple[dict, dict]:
    """`params` and `raw_params`: the core's options a case holds, in the declaration's order,
    those of every case required."""
    held = [option for option in CORE_OPTIONS.values() if option.in_params]
    required = [option.python for option in held if option.fixture == "every"]
    valid = {
        "type": "object",
        "required": required,
        "properties": {option.python: _property(option) for option in held},
        "additionalProperties": False,
    }
    raw = {
        "type": "object",
        "required": required,
        "properties": {option.python: True for option in held},
        "additionalProperties": False,
    }
    return valid, raw


def render_case_schema() -> str:
    """The case schema with its `params` and `raw_params` from the declaration; every other key as
    it is."""
    schema = json.loads((REPO_ROOT / CASE_SCHEMA).read_text(encoding="utf-8"))
    schema["$defs"]["params"], schema["$defs"]["raw_params"] = params()
    schema["$defs"].update(integers_defs())
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
