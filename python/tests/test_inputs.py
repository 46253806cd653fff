"""Malformed input that only Python can be given, and the size limit: each gets an
AttentionInputError with a kind from the shared list, never another exception."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attention_port import reference, torch_port
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
