"""The protocol between `attention-port check` and the process that runs a learner's code.

The harness side (runner.py, which asks) and the Python process (worker.py, which answers) read this
module; the Node process (typescript/learner/worker.ts) reads typescript/learner/protocol.ts. The names both
sides must agree on (the steps, each message's fields) are in one file that both modules load,
contract/learner-protocol.json; the options, with their JavaScript spellings, are
contract/options.json's.

1. The harness starts the process with the learner's module path and the number of the answer file
   descriptor on its command line, in an empty working folder of its own. The answers travel on
   that descriptor alone, so the learner's own stdout and stderr (its print and console.log) are
   free: the harness reads them on a pipe of their own and shows them under the case that printed.
2. The process's first answer: {"hello": {"function", "takesOptions", "optionNames", "layer",
   "rotary"}} or {"fatal": "one line"}.
3. Then, for each request line on stdin, one answer line. A request holds one case's inputs and the
   options it sets, never its expected values:
       {"id", "valid", "output_shape", "inputs": {"query", "key", "value"}, "options": {...}}
   valid: the case has expected values (else its inputs are handed over as written, to be refused);
   output_shape: the expected output's shape (for the (output, weights) diagnosis), or null;
   options: only those the case sets, by their Python names (attn_mask among them), so the
   learner's own defaults apply to the rest; "same_query_key": true (only when set) asks the
   process to give the learner one array as both query and key, as scaledDotProductAttention(Q, Q,
   V) does. A tensor of a valid case is {"dtype", "shape", "data"}
   with data flat, row-major, so a tensor with a zero-size dim keeps its shape: the process gives
   it to the learner with that shape ({shape, data} in JavaScript, a numpy array in Python), where
   nested arrays would lose it ([2, 0, 8] is [[], []]); an invalid case's inputs are nested as
   written. The answer is one of
       {"id", "steps": {name: {"shape", "data"}}}   output, and scores/logits/weights when returned
       {"id", "threw": {"name", "message", "kind", "deliberate", "where"}}  the function threw
           kind: an AttentionInputError's (or the learner's own); deliberate: thrown on purpose (a
           throw / raise of the learner's), not a crash in its math; where: "line N of FILE", the
           innermost line of the learner's code it came from, or null
       {"id", "bad": "one line"}                     what it returned is not nested numbers
   A "steps" or "threw" answer carries "changed": [names] when the call changed any argument it was
   given (query, key, value, attn_mask) in place: the process keeps a copy of each before the call.
   Numbers are written as in the fixtures ("NaN", "Infinity", "-Infinity"; -0.0 keeps its sign).
4. A layer or RoPE case (the levels after the attention core's, run when the file has the layer or
   RoPE) comes as {"id", "kind": "layer" or "rope", "valid", "output_shape", "inputs", "options"}:
   inputs by their Python names (x_q, x_kv, w_q ... b_o, attn_mask; or x and positions), null where
   the case gives none; options those the case sets (num_heads always; any other of the layer's
   or RoPE's options of contract/options.json only where not at its default). The hello
   says what the file has: "layer" and "rotary" name its layer and RoPE functions, or are null;
   "function" is null when it has no attention function of its own; "layerPast" is true when its
   layer takes a KV cache (Python: past_key and past_value among its parameters; JavaScript, whose
   options object has no names to read: called once on a one-token case with a past and
   returnCache, it returns an object with presentKey). Only then are the cache's cases sent, with
   past_key and past_value among the inputs. "layerOptionNames" (Python only; absent or null:
   any) lists the names its layer takes by keyword: a layer case setting an option it does not
   name (a window, say) is not sent. The answer's steps are output (and weights with
   need_weights, present_key and present_value with return_cache): the names in layerSteps.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from attention_port.contract import CORE_OPTIONS, LAYER_OPTIONS, ROPE_OPTIONS
from attention_port.golden.reader import decode_numbers, encode_numbers
from attention_port.paths import LEARNER_PROTOCOL

if TYPE_CHECKING:
    from attention_port.golden.reader import FixtureCase

PROTOCOL = json.loads(LEARNER_PROTOCOL.read_text(encoding="utf-8"))
STEP_NAMES: tuple[str, ...] = tuple(PROTOCOL["steps"])
# The options a request may set, by their Python names: those a fixture case holds.
OPTION_NAMES: tuple[str, ...] = tuple(o.python for o in CORE_OPTIONS.values() if o.fixture != "none")
HELLO_FIELDS: tuple[str, ...] = tuple(PROTOCOL["hello"])
REQUEST_FIELDS: tuple[str, ...] = tuple(PROTOCOL["request"])
THREW_FIELDS: tuple[str, ...] = tuple(PROTOCOL["threw"])  # a "threw" answer's, in this order
# The layer's and RoPE's options (by their Python names) at their declared defaults
# (contract/options.json): a request leaves these out.
LAYER_DEFAULTS: dict[str, object] = {
    name: option.default
    for name, option in {**LAYER_OPTIONS, **ROPE_OPTIONS}.items()
    if option.in_params and not option.required
}
LAYER_REQUEST_FIELDS: tuple[str, ...] = tuple(PROTOCOL["layerRequest"])
LAYER_STEPS: tuple[str, ...] = tuple(PROTOCOL["layerSteps"])  # what a layer's answer may hold


def answer_line(message: dict) -> bytes:
    """One answer as the process writes it: strict JSON and a newline."""
    return f"{json.dumps(message, allow_nan=False)}\n".encode()


def threw_answer(
    case_id: str, *, name: str, message: str, kind: str | None, deliberate: bool, where: str | None
) -> dict:
    """The answer for a function that threw (step 4): what it threw, whether on purpose, and where."""
    threw = {"name": name, "message": message, "kind": kind, "deliberate": deliberate, "where": where}
    return {"id": case_id, "threw": {field: threw[field] for field in THREW_FIELDS}}


def read_answer(line: str) -> dict | None:
    """The message of an answer line, or None when it is not a JSON object."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _is_default(value: object, default: object) -> bool:
    """`value` is an option's default (contract/options.json): None and the booleans by identity,
    a number by its value (0 and 0.0 alike; True is not 1)."""
    if default is None or isinstance(default, bool):
        return value is default
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == default


def options_set(case: FixtureCase) -> dict[str, object]:
    """The options a case sets (those not at their default), by their Python names. A learner is
    given only these, so its own defaults apply to the rest."""
    held = {name: case.inputs[name] for name in OPTION_NAMES if CORE_OPTIONS[name].fixture == "inputs"}
    chosen = {**held, **case.params}
    return {
        name: value for name, value in chosen.items() if not _is_default(value, CORE_OPTIONS[name].default)
    }


def _tensor(x: np.ndarray) -> dict:
    """A valid case's input as a request carries it: {"dtype", "shape", "data"}, data flat."""
    dtype = "bool" if x.dtype == np.bool_ else "float64"
    return {"dtype": dtype, "shape": list(x.shape), "data": encode_numbers(x.reshape(-1))}


def request(case: FixtureCase, *, same_query_key: bool = False) -> str:
    """The request line for one case: its inputs and the options it sets, never its expected values.
    With `same_query_key` the learner is given one array as both query and key (the case's query
    and key hold the same values)."""
    valid = case.expected is not None
    if case.kind != "attention":
        return layer_request(case)
    given = _tensor if valid else encode_numbers
    options = {
        name: given(value) if name == "attn_mask" else encode_numbers(value)
        for name, value in options_set(case).items()
    }
    values = {
        "id": case.id,
        "valid": valid,
        "output_shape": list(case.expected.output.shape) if valid else None,
        "inputs": {name: given(case.inputs[name]) for name in ("query", "key", "value")},
        "options": options,
    }
    values["same_query_key"] = same_query_key
    return json.dumps({name: values[name] for name in REQUEST_FIELDS}, allow_nan=False) + "\n"


def read_input(entry: object, valid: bool) -> object:
    """A request's input back: a numpy array for a valid case, the nested values as written else."""
    if not valid:
        return decode_numbers(entry)
    dtype = bool if entry["dtype"] == "bool" else np.float64
    return np.array(decode_numbers(entry["data"]), dtype=dtype).reshape(entry["shape"])


def layer_options_set(case: FixtureCase) -> dict[str, object]:
    """The options a layer or RoPE case's request carries: num_heads always, the rest where a case
    sets them (not at their default), by their Python names."""
    return {
        name: value
        for name, value in case.params.items()
        if name == "num_heads" or not _at_default(name, value)
    }


def layer_request(case: FixtureCase) -> str:
    """The request line for a layer or RoPE case (step 4)."""
    valid = case.expected is not None
    given = _tensor if valid else encode_numbers
    options = {name: encode_numbers(value) for name, value in layer_options_set(case).items()}
    values = {
        "id": case.id,
        "kind": case.kind,
        "valid": valid,
        "output_shape": list(case.expected.output.shape) if valid else None,
        "inputs": {name: None if x is None else given(x) for name, x in case.inputs.items()},
        "options": options,
    }
    return json.dumps({name: values[name] for name in LAYER_REQUEST_FIELDS}, allow_nan=False) + "\n"


def _at_default(name: str, value: object) -> bool:
    default = LAYER_DEFAULTS.get(name, object())
    return type(value) is type(default) and value == default
