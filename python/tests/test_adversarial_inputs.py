"""Hostile input to the Python ports (numpy reference and torch_port), each class drawn by
hypothesis: nesting of any depth and cycles, numbers beyond float64 that numpy would quietly make
inf, torch options and tensors torch itself refuses, copies larger than memory_limit, list
subclasses whose own code raises or changes what it returns, and, against every TypeScript port
too, random malformed trees that both languages must refuse with the same kind and message.

Each must end in one AttentionInputError naming the argument, or in the answer for exactly the
values the port read: never a RecursionError, a ValueError from numpy, a RuntimeError from torch,
a hang, or a number made up on the way."""

from __future__ import annotations

import functools
import json
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from attention_port import reference, torch_port
from attention_port.harness.compare import normalize_message
from attention_port.harness.node import find_node
from attention_port.inputs import ERROR_KINDS, AttentionInputError

PORTS = {"numpy": reference.scaled_dot_product_attention, "torch": torch_port.scaled_dot_product_attention}
ARGUMENTS = ("query", "key", "value", "attn_mask")
# A valid problem, [2, 2] x [3, 2] -> [2, 1]; the mask [2, 3] is numeric (0 lets every key in).
VALID = {
    "query": [[1.0, 0.0], [0.5, 2.0]],
    "key": [[1.0, -1.0], [0.25, 0.5], [2.0, 0.0]],
    "value": [[1.0], [2.0], [3.0]],
    "attn_mask": [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
}
REPOSITORY = Path(__file__).resolve().parents[2]


def call_with(port, argument: str, given: object, **options):
    """The valid problem with `argument` replaced by `given`, through `port`."""
    inputs = {**VALID, argument: given}
    return port(inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **options)


def refused(call, argument: str, kinds: tuple[str, ...] = ERROR_KINDS) -> AttentionInputError:
    with pytest.raises(AttentionInputError) as caught:
        call()
    assert caught.value.kind in kinds, (caught.value.kind, str(caught.value))
    assert argument in str(caught.value), str(caught.value)
    return caught.value


def within(seconds: float):
    """Fail an example that runs longer than `seconds`, instead of hanging the run: a reading that
    regresses into walking a cycle never returns. Each example (and each replay while hypothesis
    shrinks) gets its own deadline; SIGALRM interrupts a Python loop."""

    def decorate(test):
        @functools.wraps(test)
        def bounded(*args, **kwargs):
            def expire(signum, frame):
                raise TimeoutError(f"{test.__name__} ran past {seconds} s: a port hangs on its input")

            previous = signal.signal(signal.SIGALRM, expire)
            signal.setitimer(signal.ITIMER_REAL, seconds)
            try:
                return test(*args, **kwargs)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)

        return bounded

    return decorate


def nested(depth: int, leaf: object = 1.0) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@settings(max_examples=60, deadline=None)
@given(
    port=st.sampled_from(sorted(PORTS)),
    argument=st.sampled_from(ARGUMENTS),
    depth=st.one_of(st.integers(65, 20_000), st.just("cycle")),
)
@within(5)
def test_nesting_of_any_depth_and_cycles_are_rank_errors(port, argument, depth):
    # The old reading recursed (RecursionError past about 1,000), looped forever on a cycle, and
    # left rank 65 to numpy's ValueError.
    if depth == "cycle":
        given_input: list = []
        given_input.append(given_input)
    else:
        given_input = nested(depth)
    error = refused(lambda: call_with(PORTS[port], argument, given_input), argument, ("rank",))
    assert str(error) == f"{argument} is nested more than 64 arrays deep; at most 64 dimensions are supported"


@settings(max_examples=20, deadline=None)
@given(port=st.sampled_from(sorted(PORTS)), argument=st.sampled_from(ARGUMENTS), rank=st.integers(65, 80))
def test_a_torch_tensor_of_more_than_64_dimensions_is_a_rank_error(port, argument, rank):
    tensor = torch.zeros((1,) * rank)
    error = refused(lambda: call_with(PORTS[port], argument, tensor), argument, ("rank",))
    assert str(error) == f"{argument} has {rank} dimensions; at most 64 dimensions are supported"


@pytest.mark.skipif(
    np.finfo(np.longdouble).max <= np.finfo(np.float64).max, reason="longdouble is float64 here"
)
@settings(max_examples=80, deadline=None)
@given(
    port=st.sampled_from(sorted(PORTS)),
    argument=st.sampled_from(ARGUMENTS),
    exponent=st.integers(309, 4900),
    negative=st.booleans(),
    as_array=st.booleans(),
    row=st.integers(0, 1),
)
def test_a_longdouble_beyond_float64_is_refused_as_10_to_the_400_is(
    port, argument, exponent, negative, as_array, row
):
    # The old reading cast it to inf without a word; 10**400 was already refused.
    huge = np.longdouble(f"{'-' if negative else ''}1e{exponent}")
    given_input = [list(map(np.longdouble, r)) for r in VALID[argument]]
    given_input[row][0] = huge
    if as_array:
        given_input = np.array(given_input, dtype=np.longdouble)
    error = refused(lambda: call_with(PORTS[port], argument, given_input), argument, ("type",))
    expected = "a boolean or a number" if argument == "attn_mask" and not as_array else "a number"
    assert str(error) == f"{argument}[{row}][0] is a number beyond the float64 range, expected {expected}"


def test_longdoubles_within_float64_are_read_as_their_float64_values():
    as_longdouble = {name: np.array(x, dtype=np.longdouble) for name, x in VALID.items()}
    for port in PORTS.values():
        expected = np.asarray(port(*VALID.values()))
        np.testing.assert_array_equal(np.asarray(port(*as_longdouble.values())), expected)


BAD_DEVICES = st.one_of(
    st.text(min_size=1, max_size=12).filter(lambda s: s.split(":")[0] not in {"cpu", "cuda", "meta", "mps"}),
    st.sampled_from(["bogus", "cpu:x", "cuda:-5", "", " cpu"]),
    st.integers(-5, -1),
    st.just(1.5),
    st.just(object()),
)
BAD_DTYPES = st.one_of(
    st.sampled_from([torch.int32, torch.int64, torch.bool, torch.complex64, torch.uint8]),
    st.sampled_from(["float64", "float32", np.float64, float, 64]),
)


@settings(max_examples=80, deadline=None)
@given(device=BAD_DEVICES)
def test_torch_port_a_device_torch_does_not_know_is_a_value_error(device):
    try:
        torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        pass
    else:
        return  # a device torch knows (a text draw such as "xla"): not this test's input
    error = refused(lambda: torch_port.scaled_dot_product_attention(*VALID.values(), device=device), "device")
    assert error.kind == "value"


@settings(max_examples=30, deadline=None)
@given(dtype=BAD_DTYPES)
def test_torch_port_a_dtype_that_is_not_a_torch_float_is_a_value_error(dtype):
    error = refused(lambda: torch_port.scaled_dot_product_attention(*VALID.values(), dtype=dtype), "dtype")
    assert (error.kind, str(error)) == ("value", f"dtype must be a floating-point torch.dtype, got {dtype!r}")


@pytest.mark.parametrize("port", sorted(PORTS))
@pytest.mark.parametrize("argument", ARGUMENTS)
def test_a_meta_tensor_is_a_type_error_in_both_ports(port, argument):
    meta = torch.zeros(np.shape(VALID[argument]), device="meta")
    error = refused(lambda: call_with(PORTS[port], argument, meta), argument, ("type",))
    assert str(error) == (
        f"{argument} is a Tensor that cannot be read as an array"
        " (it is on the meta device, which holds no values)"
    )


@settings(max_examples=60, deadline=None)
@given(
    port=st.sampled_from(sorted(PORTS)),
    argument=st.sampled_from(ARGUMENTS),
    shape=st.lists(st.integers(1, 4), min_size=2, max_size=4),
    short=st.integers(1, 7),  # the limit stays > 0: the smallest copy needs 8 bytes
)
def test_a_nested_copy_larger_than_memory_limit_is_refused_before_it_is_read(port, argument, shape, short):
    # The arguments before `argument` fit; `argument`'s float64 copy needs `short` bytes too many.
    given_input = np.zeros(shape).tolist()
    needed = 8 * int(np.prod(shape))
    fits = {name: 8 * int(np.prod(np.shape(x))) for name, x in VALID.items()}
    limit = needed - short
    earlier = ARGUMENTS[: ARGUMENTS.index(argument)]
    if any(fits[name] > limit for name in earlier):
        return  # an earlier argument would be refused first: drawn again by other examples
    error = refused(
        lambda: call_with(PORTS[port], argument, given_input, memory_limit=limit), argument, ("size",)
    )
    shape_text = "[" + ", ".join(map(str, shape)) + "]"
    assert str(error) == (
        f"{argument} of shape {shape_text} needs {needed} bytes as float64, more than memory_limit = {limit};"
        " pass a larger memory_limit to read it"
    )


class Changing(list):
    """A list whose length and elements are drawn anew from `choices` at each read; `seen` keeps
    the last length and elements handed out, so the values a port read can be rebuilt."""

    def __init__(self, items, draw):
        super().__init__(items)
        self.draw, self.seen = draw, {}

    def __len__(self):
        length = self.draw([super().__len__(), super().__len__() + 1, max(super().__len__() - 1, 0)])
        self.seen["length"] = length
        return length

    def __getitem__(self, i):
        original = super().__getitem__(i) if 0 <= i < super().__len__() else None
        if isinstance(original, Changing):
            options = [original, [0.0], [1.0, 2.0, 3.0]]
        else:
            options = [original, 0.5, -2.0, "x"]
        value = self.draw(options)
        self.seen[i] = value
        return value


def changing(plain, draw):
    return Changing([changing(x, draw) for x in plain], draw) if isinstance(plain, list) else plain


def snapshot(x):
    """The plain lists a port read from changing(): each with its last length and elements."""
    if not isinstance(x, Changing):
        return x
    return [snapshot(x.seen.get(i)) for i in range(x.seen["length"])]


@settings(max_examples=200, deadline=None)
@given(port=st.sampled_from(sorted(PORTS)), argument=st.sampled_from(ARGUMENTS), data=st.data())
@within(5)
def test_lists_that_change_while_read_give_the_answer_for_what_was_read(port, argument, data):
    def draw(options):
        return options[data.draw(st.integers(0, len(options) - 1))]

    given_input = changing(VALID[argument], draw)
    try:
        answer = call_with(PORTS[port], argument, given_input)
    except AttentionInputError:
        return
    expected = call_with(PORTS[port], argument, snapshot(given_input))
    np.testing.assert_array_equal(np.asarray(answer), np.asarray(expected))


class Raising(list):
    def __getitem__(self, i):
        raise KeyError("a list whose items cannot be read")


class Lying(list):
    def __len__(self):
        return 2**40  # far more than it holds


@settings(max_examples=40, deadline=None)
@given(
    port=st.sampled_from(sorted(PORTS)),
    argument=st.sampled_from(ARGUMENTS),
    kind=st.sampled_from([Raising, Lying]),
    where=st.sampled_from(["argument", "row"]),
)
@within(5)
def test_lists_whose_own_methods_raise_or_lie_are_one_error(port, argument, kind, where):
    rows = VALID[argument]
    given_input = kind(rows) if where == "argument" else [rows[0], kind(rows[1])]
    refused(lambda: call_with(PORTS[port], argument, given_input), argument)


# ---- Both languages: the same malformed input, the same kind and message. ----

JSON_LEAVES = st.one_of(
    st.integers(-3, 3),
    st.floats(-4, 4, allow_nan=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["x", {}]),
)
TREES = st.recursive(JSON_LEAVES, lambda children: st.lists(children, max_size=3), max_leaves=12)


@st.composite
def malformed_problems(draw):
    """A problem with one or more arguments replaced by a random tree (some nested past 64 deep),
    and now and then a memory_limit that the trees' copies may exceed."""
    problem = dict(VALID)
    for argument in draw(st.lists(st.sampled_from(ARGUMENTS), min_size=1, max_size=4, unique=True)):
        tree = draw(TREES)
        problem[argument] = nested(draw(st.sampled_from([0, 0, 1, 2, 63, 64, 70])), tree)
    problem["memory_limit"] = draw(st.sampled_from([2.0**31, 2.0**31, 40.0, 16.0, 8.0]))
    return problem


TYPESCRIPT_ERRORS = """
import * as attention from "%(src)s/attention.ts";
import * as flash from "%(src)s/flash.ts";
import * as simd from "%(src)s/simd-node.ts";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const answers = JSON.parse(text).map((p) =>
  Object.fromEntries(Object.entries({ attention, flash, simd }).map(([name, port]) => {
    try {
      const options = { attnMask: p.attn_mask, memoryLimit: p.memory_limit };
      port.scaledDotProductAttention(p.query, p.key, p.value, options);
      return [name, null];
    } catch (error) {
      return [name, [error.kind ?? error.name, error.message]];
    }
  })),
);
process.stdout.write(JSON.stringify(answers));
"""


def typescript_errors(problems: list[dict]) -> list[dict]:
    """Each problem through every TypeScript port, in one Node process: (kind, message) or None."""
    script = TYPESCRIPT_ERRORS % {"src": REPOSITORY / "typescript" / "src"}
    finished = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", script],
        input=json.dumps(problems),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(finished.stdout)


# Not shrunk: each replay of a batch starts Node, and the assertion names the problem that differs.
@settings(max_examples=5, deadline=None, phases=(Phase.explicit, Phase.generate))
@given(problems=st.lists(malformed_problems(), min_size=40, max_size=40))
@within(30)
def test_both_languages_refuse_malformed_trees_with_the_same_kind_and_message(problems):
    answers = typescript_errors(problems)
    for problem, typescript in zip(problems, answers, strict=True):
        options = {"memory_limit": problem["memory_limit"]}
        inputs = [problem[name] for name in ARGUMENTS]
        try:
            reference.scaled_dot_product_attention(*inputs, **options)
            python = None
        except AttentionInputError as error:
            python = [error.kind, str(error)]
        for port, answer in typescript.items():
            if answer is not None:
                answer = [answer[0], normalize_message(answer[1])]
            assert answer == python, (port, problem)
