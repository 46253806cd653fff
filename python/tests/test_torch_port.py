"""The PyTorch port against the numpy reference, without fixtures.

What is checked: the port agrees with reference.py step by step (float64 tight, float32 loose) on
the inputs of every valid case in cases.py and on random inputs (ranks 2-5, GQA/MQA, boolean and
float masks with broadcasting, causal square and non-square, softcap, custom scale); fully-masked
rows are exactly +0.0 (weights and output, even with NaN in value); Lq == 0 and Lk == 0; NaN
propagates to the same places; every invalid case of cases.py raises its AttentionInputError kind
and message in both ports; torch's own kernel (torch_sdpa) matches
where sdpa_shares_semantics says it should; device and dtype selection; tf32_disabled. Tests marked
`cuda` run the port on a GPU (float32 with TF32 off, float16, bfloat16) and skip without one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from strategies import attention_inputs
from strategies import random_arrays as random_inputs

from attention_port import reference, torch_port
from attention_port.golden import cases
from attention_port.inputs import AttentionInputError

STEPS = ("scores", "logits", "weights", "output")

# Loose element-wise tolerances for unit tests on O(1) random data; the fixture tests hold the
# ports to compare.py's error-scaled rule instead.
TOLERANCE = {
    torch.float64: {"rtol": 1e-12, "atol": 1e-12},
    torch.float32: {"rtol": 2e-5, "atol": 2e-5},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
    torch.bfloat16: {"rtol": 6e-2, "atol": 6e-2},
}

CPU = "cpu"  # the tests below that are not marked cuda pin the CPU, GPU or not
cuda = pytest.mark.cuda
needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"
)


def assert_steps_match(expected, actual, dtype):
    """Every step of the port (torch tensors) against the reference's (numpy float64 arrays):
    the same shape, NaN and inf in the same cells, and the finite values within the tolerance."""
    for step in STEPS:
        want = torch.from_numpy(getattr(expected, step))
        got = getattr(actual, step).detach().cpu()
        assert got.dtype == dtype, step
        assert got.shape == want.shape, step
        torch.testing.assert_close(
            got.double(), want, equal_nan=True, msg=lambda m, s=step: f"{s}: {m}", **TOLERANCE[dtype]
        )


def assert_exact_positive_zero(tensor):
    assert bool((tensor == 0).all()), tensor
    assert not bool(torch.signbit(tensor).any()), "expected +0.0, found -0.0"


# ---------------------------------------------------------------------------------------------
# Agreement with the reference


def case_arguments(case):
    """A case's drawn (query, key, value) and keyword arguments, as the fixtures hold them."""
    drawn = case.draw_inputs()
    return (drawn["query"], drawn["key"], drawn["value"]), {"attn_mask": drawn["attn_mask"], **case.params}


def cases_with_ids(*ids):
    by_id = {case.id: case for case in cases.VALID_CASES}
    return [pytest.param(by_id[i], id=i) for i in ids]


# Logits of 1e3 and more: float32's rounding of the logits alone moves the weights past the loose
# tolerance. compare.py's rule, scaled to each case, holds float32 there (test_ports_on_fixtures).
LARGE_LOGITS = ("large_logits", "float_mask_large_finite")
# Logits near -1.8e9: float64's own rounding of them (about 4e-7) moves the weights past even the
# float64 tolerance, so the two ports can only be held to compare.py's rule there.
HUGE_LOGITS = ("bool_mask_logits_below_sentinel",)


MATCH_RUNS = [
    pytest.param(case, dtype, id=f"{case.id}-{str(dtype).removeprefix('torch.')}")
    for case in cases.VALID_CASES
    for dtype in (torch.float64, torch.float32)
    if not (dtype == torch.float32 and case.id in LARGE_LOGITS)
    and case.id not in HUGE_LOGITS
    # The extremes of float64 are held by compare.py's rule (test_ports_on_fixtures), which knows
    # the cases outside the contract and beyond float32's range; this test's tolerance does not.
    and "extreme" not in case.tags
]


@pytest.mark.parametrize(("case", "dtype"), MATCH_RUNS)
def test_matches_reference(case, dtype):
    args, kwargs = case_arguments(case)
    expected = reference.attention_steps(*args, **kwargs)
    actual = torch_port.attention_steps(*args, **kwargs, dtype=dtype, device=CPU)
    assert_steps_match(expected, actual, dtype)
    output = torch_port.scaled_dot_product_attention(*args, **kwargs, dtype=dtype, device=CPU)
    torch.testing.assert_close(output, actual.output, rtol=0, atol=0, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(inputs=attention_inputs())
def test_matches_reference_on_random_shapes(inputs):
    """Shapes, heads, lengths (0 included), masks and options drawn at random."""
    query, key, value, mask, options = inputs
    expected = reference.attention_steps(query, key, value, mask, **options)
    actual = torch_port.attention_steps(query, key, value, mask, **options, device=CPU)
    assert_steps_match(expected, actual, torch.float64)


def test_tutorial_form_nested_lists():
    """The tutorial's call: rank-2 nested lists in, a float64 tensor out."""
    query = [[1.0, 0.0], [0.0, 1.0]]
    key = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
    value = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    output = torch_port.scaled_dot_product_attention(query, key, value, device=CPU)
    assert output.dtype == torch.float64
    expected = reference.scaled_dot_product_attention(query, key, value)
    torch.testing.assert_close(output, torch.from_numpy(expected), rtol=1e-15, atol=1e-15)


# ---------------------------------------------------------------------------------------------
# Edges: fully-masked rows, empty axes, NaN


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
@pytest.mark.parametrize("mask_kind", ["bool", "float"])
def test_fully_masked_rows_are_exactly_positive_zero(mask_kind):
    query, key, value = random_inputs(1, (2, 3, 4), (2, 5, 4), (2, 5, 3))
    value[0, 2, 1] = np.nan  # 0 * NaN would leak NaN into the masked row without care
    value[1, 0, 0] = np.inf
    allowed = np.ones((3, 5), dtype=bool)
    allowed[1] = False  # row 1 attends to nothing
    mask = allowed if mask_kind == "bool" else np.where(allowed, 0.0, -np.inf)
    for dtype in (torch.float64, torch.float32):
        steps = torch_port.attention_steps(query, key, value, mask, dtype=dtype, device=CPU)
        assert_exact_positive_zero(steps.weights[:, 1])
        assert_exact_positive_zero(steps.output[:, 1])
        assert bool((steps.logits[:, 1] == -math.inf).all())
        assert_steps_match(reference.attention_steps(query, key, value, mask), steps, dtype)


def test_fully_masked_row_with_nan_query_is_zero():
    """The port masks a NaN score away (boolean mask), so a fully-masked NaN row is still +0.0."""
    query, key, value = random_inputs(2, (3, 4), (5, 4), (5, 2))
    query[1, 0] = np.nan
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    output = torch_port.scaled_dot_product_attention(query, key, value, mask, device=CPU)
    assert_exact_positive_zero(output[1])
    assert bool(torch.isfinite(output).all())


def test_empty_query_length():
    query, key, value = random_inputs(3, (2, 0, 4), (2, 5, 4), (2, 5, 3))
    steps = torch_port.attention_steps(query, key, value, is_causal=True, device=CPU)
    assert steps.scores.shape == (2, 0, 5)
    assert steps.output.shape == (2, 0, 3)


def test_empty_key_length_gives_positive_zero():
    query, key, value = random_inputs(4, (2, 3, 4), (2, 0, 4), (2, 0, 3))
    for kwargs in ({}, {"is_causal": True}, {"attn_mask": np.ones((3, 0), dtype=bool)}):
        steps = torch_port.attention_steps(query, key, value, **kwargs, device=CPU)
        assert steps.weights.shape == (2, 3, 0)
        assert steps.output.shape == (2, 3, 3)
        assert_exact_positive_zero(steps.output)


def test_nan_propagates_to_the_rows_it_touches():
    query, key, value = random_inputs(5, (4, 3), (5, 3), (5, 2))
    query[2, 1] = np.nan
    output = torch_port.scaled_dot_product_attention(query, key, value, device=CPU)
    assert bool(output[2].isnan().all())
    assert bool(torch.isfinite(output[[0, 1, 3]]).all())


@pytest.mark.parametrize(
    ("where", "kwargs"),
    [
        ("query", {}),
        ("key", {}),
        ("value", {}),
        ("key", {"attn_mask": np.array([True, False, True, True, True])}),  # NaN key masked away
        ("key", {"attn_mask": np.array([0.0, -np.inf, 0.0, 0.0, 0.0])}),  # NaN + -inf stays NaN
        ("value", {"is_causal": True}),
    ],
)
def test_nan_positions_match_reference(where, kwargs):
    query, key, value = random_inputs(6, (4, 3), (5, 3), (5, 2))
    {"query": query, "key": key, "value": value}[where][1, 0] = np.nan
    expected = reference.attention_steps(query, key, value, **kwargs)
    actual = torch_port.attention_steps(query, key, value, **kwargs, device=CPU)
    assert_steps_match(expected, actual, torch.float64)


def test_large_negative_float_mask_is_a_number_not_a_mask():
    query, key, value = random_inputs(7, (3, 4), (5, 4), (5, 2))
    mask = np.zeros((3, 5))
    mask[0] = -1e30  # every cell of row 0 equally far down: softmax is uniform, not empty
    output = torch_port.scaled_dot_product_attention(query, key, value, mask, device=CPU)
    torch.testing.assert_close(output[0], torch.from_numpy(value.mean(axis=0)), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Errors: the same kind and message as the reference


# Every invalid case of the table: the fixtures' and those only numpy arrays can hold.
ERROR_CASES = [pytest.param(case, id=case.id) for case in cases.INVALID_CASES + cases.ARRAY_CASES]


def _raised(function, args, kwargs):
    with pytest.raises(AttentionInputError) as caught:
        function(*args, **kwargs)
    return caught.value.kind, str(caught.value)


@pytest.mark.parametrize("case", ERROR_CASES)
def test_errors_are_the_tables(case):
    """The kind and the literal message of the case table, from every Python entry point."""
    args, kwargs = case_arguments(case)
    assert _raised(reference.attention_steps, args, kwargs) == case.error
    assert _raised(torch_port.attention_steps, args, kwargs) == case.error
    assert _raised(torch_port.scaled_dot_product_attention, args, kwargs) == case.error
    assert _raised(torch_port.sdpa_shares_semantics, args, kwargs) == case.error
    assert _raised(torch_port.torch_sdpa, args, kwargs) == case.error


@pytest.mark.parametrize(
    ("argument", "tensor", "message"),
    [
        ("query", torch.ones(2, 2, dtype=torch.bool), "query has dtype bool, expected real numbers"),
        (
            "value",
            torch.ones(2, 2, dtype=torch.complex64),
            "value has dtype complex64, expected real numbers",
        ),
        (
            "attn_mask",
            torch.ones(2, 2, dtype=torch.complex128),
            "attn_mask has dtype complex128, expected booleans or real numbers",
        ),
    ],
)
def test_tensor_dtype_errors_match_reference(argument, tensor, message):
    arguments = {"query": np.ones((2, 2)), "key": np.ones((2, 2)), "value": np.ones((2, 2))}
    arguments[argument] = tensor
    ported = _raised(torch_port.scaled_dot_product_attention, (), arguments)
    assert ported == ("type", message)
    assert _raised(reference.scaled_dot_product_attention, (), arguments) == ported


def test_torch_tensor_inputs_are_checked_like_arrays():
    """Integer tensors count as real numbers; shape errors name the tensors' shapes."""
    query = torch.ones(2, 4, 8, dtype=torch.int32)
    key = torch.ones(2, 5, 6)
    with pytest.raises(AttentionInputError, match=r"key has feature size 6 but query has 8"):
        torch_port.scaled_dot_product_attention(query, key, key)
    output = torch_port.scaled_dot_product_attention(query, torch.ones(2, 5, 8), torch.ones(2, 5, 3))
    assert output.shape == (2, 4, 3)


# ---------------------------------------------------------------------------------------------
# torch's own kernel

# Cases without softcap or sink logits (torch's kernel has neither), without NaN or infinities
# (its fused kernels place them differently) and away from float64's extremes: torch's kernel must
# share our semantics on every one (a window, sink tokens and kv_seqlen folded into its mask).
# HUGE_LOGITS are held to compare.py's rule instead (test_ports_on_fixtures).
SDPA_CASES = [
    pytest.param(case, id=case.id)
    for case in cases.VALID_CASES
    if not {"softcap", "nan", "inf", "extreme"} & set(case.tags)
    and case.id not in HUGE_LOGITS
    and case.params.get("sink_logits") is None
]


def test_torch_sdpa_has_no_sink_logits():
    """Sink logits are not torch's: the kernel shares no semantics with them, and refuses them."""
    query, key, value = random_inputs(3, (2, 3, 4), (2, 5, 4), (2, 5, 4))
    sinks = {"sink_logits": [0.5, -1.0]}
    assert not torch_port.sdpa_shares_semantics(query, key, value, **sinks, device=CPU)
    with pytest.raises(ValueError, match="no sink logits"):
        torch_port.torch_sdpa(query, key, value, **sinks, device=CPU)


@pytest.mark.parametrize("case", SDPA_CASES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["float64", "float32"])
def test_torch_sdpa_matches_port_where_shared(case, dtype):
    args, kwargs = case_arguments(case)
    assert torch_port.sdpa_shares_semantics(*args, **kwargs, dtype=dtype, device=CPU)
    ported = torch_port.scaled_dot_product_attention(*args, **kwargs, dtype=dtype, device=CPU)
    kernel = torch_port.torch_sdpa(*args, **kwargs, dtype=dtype, device=CPU)
    assert kernel.dtype == dtype
    torch.testing.assert_close(kernel, ported, equal_nan=True, **TOLERANCE[dtype])


@pytest.mark.parametrize("rank", [3, 4])
def test_torch_sdpa_fully_masked_rows_and_empty_keys(rank):
    """Measured on torch 2.13's CPU kernels: +0.0 for a fully-masked row and for Lk == 0."""
    lead = (1,) * (rank - 2)
    query, key, value = random_inputs(8, (*lead, 3, 16), (*lead, 8, 16), (*lead, 8, 16))
    mask = np.ones((3, 8), dtype=bool)
    mask[1] = False
    for args in ((query, key, value, mask), (query, key[..., :0, :], value[..., :0, :])):
        shared = torch_port.sdpa_shares_semantics(*args, device=CPU)
        assert shared == (torch.__version__ >= "2.13")
        if shared:
            kernel = torch_port.torch_sdpa(*args, device=CPU)
            torch.testing.assert_close(kernel, torch_port.scaled_dot_product_attention(*args, device=CPU))
            assert not bool(torch.signbit(kernel[..., 1, :]).any())


def test_sdpa_shares_semantics_asks_rows_with_no_key_for_the_contracts_zero():
    """Where a row sees no key there is no score to decide from (with Lk = 0 none at all, and a
    bound over no scores says nothing): it shares only where torch's answer there is the contract's
    +0.0. With a query near float64's largest number, torch 2.13's CPU kernels give NaN there; with
    one negative value and a mask that hides it from every row, -0.0."""
    query, key, value = np.full((3, 2), 1e308), np.zeros((0, 2)), np.zeros((0, 3))
    ours = torch_port.scaled_dot_product_attention(query, key, value, device=CPU)
    assert bool((ours == 0).all()) and not bool(torch.signbit(ours).any())  # the contract's +0.0
    kernel = torch_port.torch_sdpa(query, key, value, device=CPU)
    zero = bool((kernel == 0).all()) and not bool(torch.signbit(kernel).any())
    assert torch_port.sdpa_shares_semantics(query, key, value, device=CPU) == zero
    if torch.__version__ >= "2.13":
        assert bool(kernel.isnan().all())  # as measured: so not shared
    small = torch_port.sdpa_shares_semantics(np.ones((3, 2)), key, value, device=CPU)
    assert small == (torch.__version__ >= "2.13")  # +0.0 there, as the contract says
    # One key, masked for every row, with a negative value: torch 2.13's CPU kernels give -0.0.
    query, key, value, mask = np.ones((2, 2)), np.ones((1, 2)), np.full((1, 3), -2.0), np.zeros((2, 1), bool)
    kernel = torch_port.torch_sdpa(query, key, value, mask, device=CPU)
    zero = bool((kernel == 0).all()) and not bool(torch.signbit(kernel).any())
    assert torch_port.sdpa_shares_semantics(query, key, value, mask, device=CPU) == zero
    if torch.__version__ >= "2.13":
        assert bool(torch.signbit(kernel).all())  # as measured: so not shared


def test_torch_sdpa_one_dimensional_mask_on_four_dimensional_inputs():
    """torch 2.13's fused CPU kernel raises IndexError for a 1-D mask; torch_sdpa reshapes it."""
    query, key, value = random_inputs(9, (1, 2, 4, 8), (1, 2, 6, 8), (1, 2, 6, 8))
    mask = np.array([True, False, True, True, False, True])
    torch.testing.assert_close(
        torch_port.torch_sdpa(query, key, value, mask, device=CPU),
        torch_port.scaled_dot_product_attention(query, key, value, mask, device=CPU),
    )


@pytest.mark.parametrize(
    ("case", "edit", "kwargs"),
    [
        ("softcap", None, {"softcap": 2.0}),
        ("nan-query", ("query", np.nan), {}),
        ("nan-key", ("key", np.nan), {}),
        ("inf-value", ("value", np.inf), {}),
        ("nan-float-mask", ("mask", np.nan), {}),
        ("inf-float-mask", ("mask", np.inf), {}),
    ],
)
def test_sdpa_shares_semantics_refuses(case, edit, kwargs):
    query, key, value = random_inputs(10, (3, 4), (5, 4), (5, 2))
    mask = np.zeros((3, 5))
    if edit is not None:
        {"query": query, "key": key, "value": value, "mask": mask}[edit[0]][1, 1] = edit[1]
    assert not torch_port.sdpa_shares_semantics(query, key, value, mask, **kwargs, device=CPU)


def test_torch_sdpa_takes_the_ports_keywords_but_no_softcap():
    args = random_inputs(15, (3, 4), (5, 4), (5, 2))
    kwargs = {"is_causal": True, "scale": 0.5, "enable_gqa": False, "softcap": 0.0, "device": CPU}
    torch.testing.assert_close(
        torch_port.torch_sdpa(*args, **kwargs),
        torch_port.scaled_dot_product_attention(*args, **kwargs),
    )
    with pytest.raises(ValueError, match="has no softcap"):
        torch_port.torch_sdpa(*args, softcap=2.0, device=CPU)


def test_sdpa_shares_semantics_checks_inputs():
    with pytest.raises(AttentionInputError, match="softcap must be a finite number >= 0"):
        torch_port.sdpa_shares_semantics(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), softcap="x")


def test_torch_sdpa_checks_inputs_like_the_port():
    args = (np.ones((2, 4, 8)), np.ones((2, 5, 6)), np.ones((2, 5, 6)))
    assert _raised(torch_port.torch_sdpa, args, {}) == _raised(reference.attention_steps, args, {})


# ---------------------------------------------------------------------------------------------
# Devices and dtypes


def test_default_device():
    if torch.cuda.is_available():
        expected = "cuda"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        expected = "mps"
    else:
        expected = "cpu"
    assert torch_port.default_device().type == expected


def test_supported_dtypes():
    f64, f32, f16, bf16 = torch.float64, torch.float32, torch.float16, torch.bfloat16
    assert torch_port.supported_dtypes("cpu") == [f64, f32]
    assert torch_port.supported_dtypes(torch.device("cuda", 0)) == [f64, f32, f16, bf16]
    assert torch_port.supported_dtypes("mps") == [f32]
    assert torch_port.supported_dtypes() == torch_port.supported_dtypes(torch_port.default_device())


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        (("numpy", "numpy", "numpy"), torch.float64),
        (("list", "list", "list"), torch.float64),
        ((torch.float32, torch.float32, torch.float32), torch.float32),
        ((torch.float32, torch.float64, torch.float32), torch.float64),
        ((torch.float32, "numpy", torch.float32), torch.float64),  # numpy arrays count as float64
        ((torch.int64, torch.int64, torch.int64), torch.float64),  # as reference.py reads them
        ((torch.float32, torch.int32, torch.float32), torch.float64),
    ],
)
def test_default_dtype(inputs, expected):
    shapes = ((3, 4), (5, 4), (5, 2))
    made = []
    for kind, shape in zip(inputs, shapes, strict=True):
        if kind == "numpy":
            made.append(np.ones(shape, dtype=np.float32))
        elif kind == "list":
            made.append(np.ones(shape).tolist())
        else:
            made.append(torch.ones(shape, dtype=kind))
    assert torch_port.scaled_dot_product_attention(*made, device=CPU).dtype == expected


def test_dtype_and_device_override():
    query, key, value = random_inputs(11, (3, 4), (5, 4), (5, 2))
    mask = np.linspace(-1.0, 1.0, 15).reshape(3, 5)  # float64 mask, cast to the compute dtype
    steps = torch_port.attention_steps(query, key, value, mask, dtype=torch.float32, device="cpu")
    for step in STEPS:
        assert getattr(steps, step).dtype == torch.float32
        assert getattr(steps, step).device.type == "cpu"
    as_tensors = [torch.from_numpy(x) for x in (query, key, value)]
    assert torch_port.scaled_dot_product_attention(*as_tensors, dtype=torch.float32).dtype == torch.float32


def test_bad_dtypes_are_refused():
    args = (np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(AttentionInputError, match="dtype must be a floating-point torch.dtype"):
        torch_port.scaled_dot_product_attention(*args, dtype=torch.int32)
    # Refused before anything is moved, so this runs without an Apple GPU.
    with pytest.raises(AttentionInputError, match="dtype float64 is not available on mps"):
        torch_port.scaled_dot_product_attention(*args, dtype=torch.float64, device="mps")


def test_mps_defaults_to_float32():
    arrays = [np.ones((2, 2))] * 3
    assert torch_port.resolve_dtype(None, torch.device("mps"), arrays) == torch.float32
    assert torch_port.resolve_dtype(None, torch.device("cpu"), arrays) == torch.float64


HALF_CASES = cases_with_ids(
    "rank4_batch_heads", "gqa_4q_2kv", "bool_mask_per_batch", "float_mask_per_head", "softcap_scale"
)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", HALF_CASES)
def test_cpu_half_precision_on_request(case, dtype):
    """Not in supported_dtypes("cpu"), but computed when asked: the half code path, GPU or not."""
    args, kwargs = case_arguments(case)
    expected = reference.attention_steps(*args, **kwargs)
    actual = torch_port.attention_steps(*args, **kwargs, device=CPU, dtype=dtype)
    assert_steps_match(expected, actual, dtype)
    assert_exact_positive_zero(actual.weights[actual.logits == -math.inf])


def test_inputs_are_not_modified_or_shared():
    query, key, value = random_inputs(12, (3, 4), (5, 4), (5, 2))
    tensors = [torch.from_numpy(x.copy()) for x in (query, key, value)]
    steps = torch_port.attention_steps(*tensors, is_causal=True)
    for original, tensor in zip((query, key, value), tensors, strict=True):
        assert np.array_equal(original, tensor.numpy())
    steps.scores.zero_()
    assert np.array_equal(query, tensors[0].numpy())


def test_tf32_disabled_restores_the_flags():
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.allow_tf32, cudnn.allow_tf32)
    try:
        matmul.allow_tf32, cudnn.allow_tf32 = True, True
        with torch_port.tf32_disabled():
            assert (matmul.allow_tf32, cudnn.allow_tf32) == (False, False)
        assert (matmul.allow_tf32, cudnn.allow_tf32) == (True, True)
        with pytest.raises(KeyError), torch_port.tf32_disabled():
            raise KeyError("restored even when the block raises")
        assert (matmul.allow_tf32, cudnn.allow_tf32) == (True, True)
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before


@pytest.mark.skipif(
    not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9 has no fp32_precision"
)
def test_tf32_disabled_with_the_new_precision_api():
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.fp32_precision, cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision)
    try:
        matmul.fp32_precision = "tf32"  # now the legacy allow_tf32 flags cannot be read
        with torch_port.tf32_disabled():
            assert matmul.fp32_precision == "ieee"
            assert cudnn.conv.fp32_precision == cudnn.rnn.fp32_precision == "ieee"
        assert matmul.fp32_precision == "tf32"
        assert (cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision) == before[1:]
    finally:
        matmul.fp32_precision, cudnn.conv.fp32_precision, cudnn.rnn.fp32_precision = before


# ---------------------------------------------------------------------------------------------
# CUDA (skipped without a GPU)

CUDA_CASES = cases_with_ids(
    "rank4_batch_heads",
    "gqa_4q_2kv",
    "bool_mask_per_batch",
    "float_mask_per_head",
    "causal_wide",
    "causal_with_bool_mask",
    "softcap_scale",
    "cross_attention",
)


@cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", CUDA_CASES)
def test_cuda_matches_reference(case, dtype):
    args, kwargs = case_arguments(case)
    expected = reference.scaled_dot_product_attention(*args, **kwargs)
    with torch_port.tf32_disabled():
        output = torch_port.scaled_dot_product_attention(*args, **kwargs, device="cuda", dtype=dtype)
    assert output.device.type == "cuda" and output.dtype == dtype
    torch.testing.assert_close(output.cpu().double(), torch.from_numpy(expected), **TOLERANCE[dtype])


@cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_cuda_fully_masked_rows_and_empty_keys(dtype):
    query, key, value = random_inputs(13, (2, 3, 16), (2, 8, 16), (2, 8, 16))
    value[0, 0, 0] = np.nan
    mask = np.ones((3, 8), dtype=bool)
    mask[1] = False
    output = torch_port.scaled_dot_product_attention(query, key, value, mask, device="cuda", dtype=dtype)
    assert_exact_positive_zero(output[:, 1].cpu())
    empty = torch_port.scaled_dot_product_attention(
        query, key[:, :0], value[:, :0], device="cuda", dtype=dtype
    )
    assert_exact_positive_zero(empty.cpu())


@cuda
@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_cuda_torch_sdpa_matches_port(dtype):
    query, key, value = random_inputs(14, (2, 4, 16, 64), (2, 2, 16, 64), (2, 2, 16, 64))
    mask = np.random.default_rng(14).random((16, 16)) > 0.2
    np.fill_diagonal(mask, True)  # no fully-masked rows: not measured on CUDA kernels
    kwargs = {"enable_gqa": True, "is_causal": True, "device": "cuda", "dtype": dtype}
    assert torch_port.sdpa_shares_semantics(query, key, value, mask, **kwargs)
    with torch_port.tf32_disabled():
        ported = torch_port.scaled_dot_product_attention(query, key, value, mask, **kwargs)
        kernel = torch_port.torch_sdpa(query, key, value, mask, **kwargs)
    torch.testing.assert_close(kernel.float(), ported.float(), **TOLERANCE[dtype])


@cuda
@needs_cuda
def test_cuda_is_the_default_device():
    assert torch_port.default_device().type == "cuda"
    output = torch_port.scaled_dot_product_attention(np.ones((2, 4)), np.ones((3, 4)), np.ones((3, 2)))
    assert output.device.type == "cuda" and output.dtype == torch.float64
