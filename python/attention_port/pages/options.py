"""What the TypeScript ports and the docs need of the options' declaration (contract/options.json),
rendered for `attention-port contract` (pages/generated.py): typescript/src/generated/options.ts
(the options' types, the table the checks walk, the defaults, the options a fixture case holds)
and the options table of docs/design.md.
"""

from __future__ import annotations

import json
import textwrap

from attention_port.contract import CORE_CHECK_ORDER, CORE_OPTIONS, LAYER_OPTIONS, ROPE_OPTIONS, Option

TYPESCRIPT = "typescript/src/generated/options.ts"

_HEADER = """\
// Generated from contract/options.json by `attention-port contract`: do not edit. Change the
// declaration, then run `attention-port contract` (scripts/generate-contract) to write this again.
"""

# What each type of option takes in TypeScript: `Mask`, `Tensor` and `Rope` are the generic
# interfaces' parameters, the forms inputs.ts and layer-inputs.ts name; `Integers` is declared
# beside them (an integer, or nested arrays of them: one per batch index).
_TS_TYPES = {
    "boolean": "boolean",
    "number": "number",
    "integer": "number",
    "integers": "Integers",
    "numbers": "readonly number[] | Float64Array | Float32Array",
    "window": "readonly [left: number | null, right: number | null]",
    "mask": "Mask",
    "tensor": "Tensor",
    "object": "Rope",
}


def _js_value(x: object) -> str:
    """A JSON value as a TypeScript literal: null, true, 0, 2147483648."""
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return json.dumps(x)


def _py_value(x: object) -> str:
    """A JSON value as Python writes it: None, False, 0.0."""
    return repr(x)


def _doc_comment(text: str, indent: str) -> list[str]:
    """`/** text */` on one line where it fits in 110 columns (Biome's), else wrapped to fit."""
    one = f"{indent}/** {text} */"
    if len(one) <= 110:
        return [one]
    lines = textwrap.wrap(text, width=110 - len(indent) - len("/** ") - len(" */"))
    return (
        [f"{indent}/** {lines[0]}"]
        + [f"{indent} * {line}" for line in lines[1:-1]]
        + [f"{indent} * {lines[-1]} */"]
    )


def _property(option: Option) -> list[str]:
    return [
        *_doc_comment(option.doc, "  "),
        f"  readonly {option.javascript}{'' if option.required else '?'}: {_ts_type(option)};",
    ]


def _ts_type(option: Option) -> str:
    return _TS_TYPES[option.type] + (" | null" if option.nullable else "")


def _check_record(option: Option, indent: str = "  ", key: bool = False) -> list[str]:
    fields = {
        "name": json.dumps(option.javascript),
        "type": json.dumps(option.type),
        "nullable": _js_value(option.nullable),
        "finite": _js_value(option.finite),
        "minimum": _js_value(option.minimum),
        "exclusiveMinimum": _js_value(option.exclusive_minimum),
        "maximum": _js_value(option.maximum),
        "kind": json.dumps(option.error_kind),
        "message": json.dumps(option.error_message),
    }
    opening = f"{indent}{option.javascript}: {{" if key else f"{indent}{{"
    errors = [
        line
        for name, error in _several_errors(option).items()
        for line in _error_record(name, error, indent + "  ")
    ]
    lines = [line for name, value in fields.items() for line in _field(name, value, indent + "  ")]
    return [opening, *lines, *errors, f"{indent}}},"]


def _field(name: str, value: str, indent: str) -> list[str]:
    """`name: value,`, the value on a line of its own where the whole is wider than Biome's 110."""
    one = f"{indent}{name}: {value},"
    return [one] if len(one) <= 110 else [f"{indent}{name}:", f"{indent}  {value},"]


def _several_errors(option: Option) -> dict[str, tuple[str, str] | None]:
    """An option's errors beside its own, by their names in OptionCheck: one of its numbers wrong,
    its shape not fitting the tensors', an integer beyond key's length."""
    return {"element": option.element_error, "shape": option.shape_error, "limit": option.limit_error}


def _error_record(name: str, error: tuple[str, str] | None, indent: str) -> list[str]:
    """`name: { kind, message },` as Biome lays it out: on one line where it fits in 110 columns."""
    if error is None:
        return [f"{indent}{name}: null,"]
    kind, message = (json.dumps(part) for part in error)
    one = f"{indent}{name}: {{ kind: {kind}, message: {message} }},"
    if len(one) <= 110:
        return [one]
    inner = indent + "  "
    return [
        f"{indent}{name}: {{",
        f"{inner}kind: {kind},",
        *_field("message", message, inner),
        f"{indent}}},",
    ]


def _checked(options: list[Option]) -> list[Option]:
    """The options that have an error of their own (the core's, which the layer passes on, have
    theirs in the core)."""
    return [o for o in options if o.error_message is not None and o.python not in CORE_OPTIONS]


def render_typescript() -> str:
    """typescript/src/generated/options.ts: what inputs.ts, the fixture readers and the kit take
    from the declaration."""
    options = list(CORE_OPTIONS.values())
    layer, rope = list(LAYER_OPTIONS.values()), list(ROPE_OPTIONS.values())
    every_check = [*CORE_CHECK_ORDER, *_checked(layer), *_checked(rope)]
    scalar_types = sorted({o.type for o in every_check})
    kinds = sorted(
        {o.error_kind for o in every_check}
        | {error[0] for o in every_check for error in _several_errors(o).values() if error is not None}
    )
    kind_union = " | ".join(json.dumps(k) for k in kinds)
    in_params = [o for o in options if o.in_params]
    in_cases = [o for o in options if o.fixture != "none"]
    lines = [
        _HEADER.rstrip("\n"),
        "",
        "/** An integer, or nested arrays of them: one per batch index, [B...] (queryOffset, kvSeqlen). */",
        "export type Integers = number | readonly Integers[];",
        "",
        "/** The attention core's options as the ports take them. `Mask` is the mask's form: nested or",
        " * shaped for the nested entries (AttentionOptions), flat for the flat ones (FlatAttentionOptions);",
        " * inputs.ts gives both their public names. */",
        "export interface CoreOptions<Mask> {",
        *(line for o in options for line in _property(o)),
        "}",
        "",
        "/** The layer's options (multiHeadAttention), the core's among them; layer.ts gives it its public",
        " * name, LayerOptions. */",
        "export interface LayerOptionsOf<Mask, Tensor, Rope> {",
        *(line for o in layer for line in _property(o)),
        "}",
        "",
        "/** RoPE's options (applyRotary, and the layer's `rope`); layer-inputs.ts names it RopeOptions. */",
        "export interface RotaryOptions {",
        *(line for o in rope for line in _property(o)),
        "}",
        "",
        "/** An option as inputs.ts checks it: its type and range, and the kind and words of the error a",
        " * wrong value throws ({name}: the option, {value}: what was given, in words; other blanks are",
        " * the checking code's). */",
        "export interface OptionCheck {",
        "  readonly name: string;",
        f"  readonly type: {' | '.join(json.dumps(t) for t in scalar_types)};",
        "  readonly nullable: boolean; // null is a value of its own, the default's",
        "  readonly finite: boolean;",
        "  readonly minimum: number | null; // inclusive",
        "  readonly exclusiveMinimum: number | null;",
        "  readonly maximum: number | null; // inclusive",
        f"  readonly kind: {kind_union};",
        "  readonly message: string;",
        "  // An option of several numbers: the error of one of them ({name}: its path, window[0]), of its",
        "  // shape against the tensors' ({shape}, {batch}, {heads}, {query}, {key}) and of an integer",
        "  // beyond key's length ({length}); null where the option has none.",
        *(
            f"  readonly {name}: {{ readonly kind: {kind_union}; readonly message: string }} | null;"
            for name in ("element", "shape", "limit")
        ),
        "}",
        "",
        "/** The core's scalar options in the order they are checked, before any tensor is read: the first",
        " * failure is thrown. */",
        "export const CORE_CHECKS: readonly OptionCheck[] = [",
        *(line for o in CORE_CHECK_ORDER for line in _check_record(o)),
        "];",
        "",
        "/** The layer's options that have checks of their own (the core checks its own), by name; the",
        " * layer checks them among its shapes, in layer-inputs.ts's order. */",
        "export const LAYER_CHECKS = {",
        *(line for o in _checked(layer) for line in _check_record(o, key=True)),
        "} as const satisfies Readonly<Record<string, OptionCheck>>;",
        "",
        "/** RoPE's options' checks, by name: rotaryDim's range is the heads' feature size. */",
        "export const ROPE_CHECKS = {",
        *(line for o in _checked(rope) for line in _check_record(o, key=True)),
        "} as const satisfies Readonly<Record<string, OptionCheck>>;",
        "",
        "/** RoPE's options' defaults (rotaryDim null: the feature size E). */",
        "export const ROPE_DEFAULTS = {",
        *(f"  {o.javascript}: {_js_value(o.default)}," for o in rope),
        "} as const;",
        "",
        "/** Each option's default, taken where the caller gives none (or undefined). */",
        "export const CORE_DEFAULTS = {",
        *(f"  {o.javascript}: {_js_value(o.default)}," for o in options),
        "} as const;",
        "",
        "/** The options a fixture case holds, by their names in the file (Python's) and in TypeScript:",
        ' * `held` is "inputs" (a tensor among its inputs), "every" (among the params of every case) or',
        ' * "set" (only in the cases that set it). */',
        "export const FIXTURE_OPTIONS = [",
        *(
            f"  {{ python: {json.dumps(o.python)}, javascript: {json.dumps(o.javascript)},"
            f" held: {json.dumps(o.fixture)} }},"
            for o in in_cases
        ),
        "] as const;",
        "",
        "/** A fixture case's options as the TypeScript readers give them (golden/reader.ts, the kit),",
        " * as written: an invalid case may hold anything. (A type, not an interface: it is a record of",
        " * strings too.) */",
        "export type FixtureOptions = {",
        *(
            line
            for o in in_params
            for line in (
                ([] if o.fixture == "every" else ["  /** Only where the case sets it. */"])
                + [f"  readonly {o.javascript}{'' if o.fixture == 'every' else '?'}: unknown;"]
            )
        ),
        "};",
    ]
    return "\n".join(lines) + "\n"


def _range(option: Option) -> str:
    """The values an option takes, in its error's words ("a finite number >= 0")."""
    if option.error_message is None:
        return f"a {option.type}" + (", or None / null" if option.nullable else "")
    words = option.error_message.removeprefix("{name} must be ").removesuffix(", got {value}")
    return words + (", or None / null" if option.nullable else "")


def _default(option: Option) -> str:
    python, javascript = _py_value(option.default), _js_value(option.default)
    return f"`{python}`" if python == javascript else f"`{python}` / `{javascript}`"


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def design_table() -> list[str]:
    """The lines of docs/design.md's options table (section 3, the public names)."""
    rows = [
        "| Python | TypeScript | takes | default | a fixture case holds it | what it does |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    held = {"every": "always", "set": "where it sets it", "inputs": "among its inputs", "none": "never"}
    for o in CORE_OPTIONS.values():
        cells = [f"`{o.python}`", f"`{o.javascript}`", _range(o), _default(o), held[o.fixture], o.doc]
        rows.append("| " + " | ".join(_markdown_cell(c) for c in cells) + " |")
    return rows
