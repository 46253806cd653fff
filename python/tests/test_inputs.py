"""Malformed input that only Python can be given, the size and rank limits, and random malformed
trees that both languages must refuse with the same kind and message: each gets an
AttentionInputError with a kind from the shared list, never another exception."""

from __future__ import annotations

import json
import math
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
from attention_port.inputs import DEFAULT_MEMORY_LIMIT, ERROR_KINDS, AttentionInputError

Q = [[1.0, 0.0], [0.5, 2.0]]
K = [[1.0, -1.0], [0.25, 0.5], [2.0, 0.0]]
V = [[1.0], [2.0], [3.0]]
HUGE = 10**400  # a Python int no float64 can hold


def _raises(kind: str, message: str, call):
    with pytest.raises(AttentionInputError) as caught:
        call()
    assert (caught.value.kind, str(caught.value)) == (kind, message)


@pytest.mark.parametrize(
    "port", [reference.scaled_dot_product_attention, torch_port.scaled_dot_product_attention]
)
@pytest.mark.parametrize(
    ("arguments", "options", "kind", "message"),
    [
        (([[HUGE, 0.0], [0.5, 2.0]], K, V), {}, "type",
         "query[0][0] is a number beyond the float64 range, expected a number"),
        ((Q, K, [[1.0], [-HUGE], [3.0]]), {}, "type",
         "value[1][0] is a number beyond the float64 range, expected a number"),
        ((Q, K, V, [[0.0, HUGE, 0.0], [0.0, 0.0, 0.0]]), {}, "type",
         "attn_mask[0][1] is a number beyond the float64 range, expected a boolean or a number"),
        ((Q, K, V), {"scale": HUGE}, "value",
         "scale must be a finite number, got a number beyond the float64 range"),
        ((Q, K, V), {"softcap": HUGE}, "value",
         "softcap must be a finite number >= 0, got a number beyond the float64 range"),
        ((Q, K, V), {"memory_limit": 0}, "value", "memory_limit must be a number of bytes > 0, got 0"),
        ((Q, K, V), {"memory_limit": None}, "value", "memory_limit must be a number of bytes > 0, got null"),
        ((Q, K, V), {"memory_limit": 100}, "size",
         "the scores [2, 3] need 144 bytes for scores, logits and weights, more than memory_limit = 100;"
         " pass a larger memory_limit to compute them"),
        ((np.zeros((2, 3, 1000, 1)), np.zeros((2, 3, 100000, 1)), np.zeros((2, 3, 100000, 1))), {}, "size",
         "the scores [2, 3, 1000, 100000] need 14400000000 bytes for scores, logits and weights, more than"
         " memory_limit = 2147483648; pass a larger memory_limit to compute them"),
        ((np.array([[1.0, "x"]], dtype=object), K, V), {}, "type",
         "query[0][1] is a string, expected a number"),
    ],
)  # fmt: skip
def test_malformed_python_input_is_an_attention_input_error(port, arguments, options, kind, message):
    assert kind in ERROR_KINDS
    _raises(kind, message, lambda: port(*arguments, **options))


def test_the_size_limit_is_checked_before_anything_is_allocated_and_can_be_raised():
    # 1e6 x 1e6 scores would need 24 TB: refused at once, whatever the memory of the machine.
    query = np.zeros((1, 1)).repeat(1, axis=0)
    big = np.broadcast_to(np.zeros((1, 1)), (1_000_000, 1))  # a view: no memory of its own
    with pytest.raises(AttentionInputError) as caught:
        reference.attention_steps(big, big, big)
    assert caught.value.kind == "size" and "[1000000, 1000000]" in str(caught.value)
    assert DEFAULT_MEMORY_LIMIT == 2**31
    small = reference.attention_steps(Q, K, V, memory_limit=144)  # exactly enough
    assert small.output.shape == (2, 1)
    assert reference.attention_steps(query, query, query, memory_limit=math.inf).output.shape == (1, 1)


def test_object_arrays_are_read_element_by_element():
    expected = reference.scaled_dot_product_attention(Q, K, V)
    as_objects = [np.array(x, dtype=object) for x in (Q, K, V)]
    np.testing.assert_array_equal(reference.scaled_dot_product_attention(*as_objects), expected)
    mask = np.array([[True, False, True], [True, True, False]], dtype=object)
    np.testing.assert_array_equal(
        reference.scaled_dot_product_attention(Q, K, V, mask),
        reference.scaled_dot_product_attention(Q, K, V, mask.astype(bool)),
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda x: torch.tensor(x, dtype=torch.float64, requires_grad=True),
        lambda x: torch.tensor(x, dtype=torch.bfloat16),
        lambda x: torch.tensor(x, dtype=torch.float16),
        lambda x: torch.tensor(x, dtype=torch.float32).t().contiguous().t(),
    ],
    ids=["requires_grad", "bfloat16", "float16", "strided"],
)
def test_reference_reads_torch_tensors_exactly(make):
    # Q, K and V hold numbers every one of these dtypes represents exactly.
    expected = reference.scaled_dot_product_attention(Q, K, V)
    np.testing.assert_array_equal(reference.scaled_dot_product_attention(make(Q), make(K), make(V)), expected)


def test_a_torch_tensor_that_cannot_be_read_is_a_type_error():
    meta = torch.empty((2, 2), device="meta")
    with pytest.raises(AttentionInputError) as caught:
        reference.scaled_dot_product_attention(meta, K, V)
    assert caught.value.kind == "type" and str(caught.value).startswith(
        "query is a Tensor that cannot be read"
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_reference_reads_cuda_tensors():
    expected = reference.scaled_dot_product_attention(Q, K, V)
    on_gpu = [torch.tensor(x, device="cuda") for x in (Q, K, V)]
    np.testing.assert_array_equal(reference.scaled_dot_product_attention(*on_gpu), expected)


# ---- A person's mistakes, against both Python ports (and, at the end, every TypeScript port). ----

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


def nested(depth: int, leaf: object = 1.0) -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


@pytest.mark.parametrize("port", sorted(PORTS))
@pytest.mark.parametrize("argument", ARGUMENTS)
@pytest.mark.parametrize("depth", [65, 2_000, "cycle"])
def test_nesting_deeper_than_64_and_cycles_are_rank_errors(port, argument, depth):
    if depth == "cycle":
        given_input: list = []
        given_input.append(given_input)
    else:
        given_input = nested(depth)
    error = refused(lambda: call_with(PORTS[port], argument, given_input), argument, ("rank",))
    assert str(error) == f"{argument} is nested more than 64 arrays deep; at most 64 dimensions are supported"


@pytest.mark.parametrize("port", sorted(PORTS))
def test_a_float32_array_is_held_to_memory_limit_before_it_is_widened_to_float64(port, tmp_path):
    # A large float32 memmap would need twice its size as float64: refused from its shape, before
    # the copy (which for a big enough file is a raw MemoryError), with the nested copy's words.
    query = np.memmap(tmp_path / "query.f32", dtype=np.float32, mode="w+", shape=(64, 64))
    run = PORTS[port]
    error = refused(lambda: run(query, query, query, memory_limit=1000), "query", ("size",))
    assert str(error) == (
        "query of shape [64, 64] needs 32768 bytes as float64, more than memory_limit = 1000;"
        " pass a larger memory_limit to read it"
    )


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
import * as simd from "%(src)s/simd-node.ts"; // Node's entry: it reads the kernel from disk
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


@pytest.mark.parametrize(
    "port", [reference.scaled_dot_product_attention, torch_port.scaled_dot_product_attention]
)
def test_the_options_of_several_numbers_take_python_arrays_and_tensors_as_lists(port):
    """kv_seqlen, query_offset and sink_logits as numpy arrays or torch tensors read as the lists
    they hold; a window's side 2.0 is the integer 2, as query_offset's is."""
    q, k = np.ones((2, 2, 3, 4)) / 3, np.arange(2 * 2 * 5 * 4).reshape(2, 2, 5, 4) / 40  # [B, H, L, E]
    as_lists = {"kv_seqlen": [5, 2], "query_offset": [2, 1], "sink_logits": [0.5, -1.0], "window": (2, None)}
    as_arrays = {
        "kv_seqlen": np.array([5, 2]),
        "query_offset": torch.tensor([2, 1]),
        "sink_logits": torch.tensor([0.5, -1.0], dtype=torch.float64),
        "window": (2.0, None),
    }
    expected = np.asarray(port(q, k, k, is_causal=True, **as_lists))
    assert np.array_equal(np.asarray(port(q, k, k, is_causal=True, **as_arrays)), expected)
    # One integer stands for every batch index.
    both = np.asarray(port(q, k, k, kv_seqlen=np.int64(3)))
    assert np.array_equal(both, np.asarray(port(q, k, k, kv_seqlen=[3, 3])))


INTEGER = "an integer from 0 to 2^53 - 1"
SIDE = f"{INTEGER}, or null (unbounded)"


@pytest.mark.parametrize(
    "port", [reference.scaled_dot_product_attention, torch_port.scaled_dot_product_attention]
)
@pytest.mark.parametrize(
    ("options", "kind", "message"),
    [
        ({"window": (HUGE, 0)}, "value", f"window[0] must be {SIDE}, got a number beyond the float64 range"),
        ({"window": (True, 0)}, "value", f"window[0] must be {SIDE}, got a boolean"),
        ({"kv_seqlen": np.array([1.5, 2.0])}, "value", f"kv_seqlen[0] must be {INTEGER}, got 1.5"),
        ({"sink_logits": np.array([[1.0], [2.0]])}, "value", "sink_logits[0] must be a number, got an array"),
        ({"sink_logits": [True, 1.0]}, "value", "sink_logits[0] must be a number, got a boolean"),
        ({"query_offset": [2, 2**53]}, "value", f"query_offset[1] must be {INTEGER}, got 9007199254740992"),
        ({"kv_seqlen": 6}, "value",
         "kv_seqlen is 6, more than key's length Lk = 5: it counts the valid keys (key [2, 2, 5, 4])"),
    ],
)  # fmt: skip
def test_a_window_sinks_and_key_counts_name_the_number_that_is_wrong(port, options, kind, message):
    q, k = np.ones((2, 2, 3, 4)), np.ones((2, 2, 5, 4))  # [B, H, L, E]
    _raises(kind, message, lambda: port(q, k, k, **options))
