"""The multi-head attention layer and RoPE: every Python port on the fixtures' layer and RoPE cases,
the rule's budget (an error just past it fails), RoPE's exact properties, the adapters, and torch's
nn.MultiheadAttention through them (agreeing where it is defined, NaN where it is not)."""

from __future__ import annotations

import inspect
import time

import numpy as np
import pytest
import torch

from attention_port import adapters, layer, torch_layer
from attention_port.golden import reader
from attention_port.harness import compare, runners
from attention_port.harness.compare import PortAnswer
from attention_port.inputs import AttentionInputError
from attention_port.paths import FIXTURES

CASES = reader.load_fixtures(FIXTURES, kinds=("layer", "rope"))
VALID = [c for c in CASES if not c.expects_error]


def test_the_fixtures_hold_layer_and_rope_cases():
    kinds = {c.kind for c in CASES}
    assert kinds == {"layer", "rope"} and len(VALID) >= 14
    assert all(c.kind == "attention" for c in reader.load_fixtures(FIXTURES))  # the core's by default


@pytest.mark.parametrize("port", [runners.numpy_port(), runners.torch_port("cpu", "float64"),
                                  runners.torch_port("cpu", "float32")], ids=lambda p: p.name)  # fmt: skip
def test_python_ports_pass_every_layer_and_rope_case(port):
    answers = port.run(CASES).answers
    by_id = {c.id: c for c in CASES}
    failed = [
        v
        for v in (compare.judge(by_id[i], port.name, port.dtype, a) for i, a in answers.items())
        if not v.passed
    ]
    assert not failed, compare.format_verdict(failed[0])


def test_the_torch_layer_takes_the_numpy_layers_arguments_then_a_device_and_a_dtype():
    for numpy_function, torch_function in (
        (layer.multi_head_attention, torch_layer.multi_head_attention),
        (layer.apply_rotary, torch_layer.apply_rotary),
    ):
        numpy_parameters = inspect.signature(numpy_function).parameters
        torch_parameters = dict(inspect.signature(torch_function).parameters)
        assert list(torch_parameters) == [*numpy_parameters, "device", "dtype"]
        for name, parameter in numpy_parameters.items():
            assert (parameter.kind, parameter.default) == (
                torch_parameters[name].kind,
                torch_parameters[name].default,
            )


@pytest.mark.parametrize(
    "options",
    [
        {"attn_mask": [[True, False, True, True]] * 4, "softcap": 2.0, "scale": 0.7, "need_weights": True},
        {"is_causal": True, "rope": {"interleaved": True}, "need_weights": True, "return_cache": True},
        {
            "is_causal": True,
            "past_key": np.ones((2, 3, 2)),
            "past_value": np.ones((2, 3, 3)),
            "return_cache": True,
        },
    ],
    ids=["mask", "rope", "cache"],
)
def test_the_torch_layer_hands_every_argument_to_the_six_steps_as_numpys_does(options):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 6))
    weights = {"w_q": rng.standard_normal((8, 6)), "w_k": rng.standard_normal((4, 6)),
               "w_v": rng.standard_normal((6, 6)), "w_o": rng.standard_normal((5, 12)),
               "b_q": rng.standard_normal(8), "b_k": rng.standard_normal(4),
               "b_v": rng.standard_normal(6), "b_o": rng.standard_normal(5)}  # fmt: skip
    arguments = {**weights, "num_heads": 4, "num_kv_heads": 2, **options}
    ours = vars(layer.multi_head_attention(x, **arguments))
    theirs = vars(torch_layer.multi_head_attention(x, **arguments))
    assert [n for n, a in ours.items() if a is not None] == [n for n, a in theirs.items() if a is not None]
    for name, part in ours.items():
        if part is not None:
            assert theirs[name].dtype == torch.float64 and np.allclose(theirs[name].numpy(), part, rtol=1e-12)


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.id)
def test_an_error_just_past_the_budget_fails(case):
    budget = case.expected.budgets["float64"].output
    cell = np.unravel_index(int(np.argmax(budget)), budget.shape)
    for share, passes in ((0.99, True), (1.01, False)):
        output = case.expected.output.copy()
        output[cell] += share * budget[cell] if budget[cell] > 0 else (0.0 if passes else 1e-300)
        steps = {"output": output}
        if case.expected.weights is not None:
            steps["weights"] = case.expected.weights
        for name in ("present_key", "present_value"):
            if getattr(case.expected, name) is not None:
                steps[name] = getattr(case.expected, name)
        assert compare.judge(case, "p", "float64", PortAnswer(steps=steps)).passed is passes


def test_the_layer_budget_is_not_flat():
    budgets = [c.expected.budgets["float64"].output for c in VALID if c.kind == "layer"]
    sizes = np.concatenate([b[b > 0] for b in budgets])
    assert sizes.max() / sizes.min() > 10  # it follows the intermediate values


def test_a_bfloat16_phase_fails_at_large_positions():
    case = next(c for c in VALID if c.id == "rope_half_split")
    x, positions = case.inputs["x"], case.inputs["positions"]
    coarse = (
        torch.tensor(positions, dtype=torch.bfloat16).to(torch.float64).numpy()
    )  # 16000 -> 16000, 4095 -> 4096
    wrong = layer.apply_rotary(x, coarse)
    assert not compare.judge(case, "p", "float32", PortAnswer(steps={"output": wrong})).passed


def test_rope_position_zero_is_the_identity_and_the_conventions_are_one_permutation():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 8))
    positions = np.array([0.0, 3.0, 50.0, 4095.0, 16000.0])
    half = layer.apply_rotary(x, positions)
    assert np.array_equal(half[..., 0, :], x[..., 0, :])
    order = np.r_[0:8:2, 1:8:2]  # even features first: interleaved pairs become half-split pairs
    interleaved = layer.apply_rotary(x, positions, interleaved=True)
    assert np.array_equal(interleaved[..., order], layer.apply_rotary(x[..., order], positions))
    partial = layer.apply_rotary(x, positions, rotary_dim=4)
    assert np.array_equal(partial[..., 4:], x[..., 4:])
    assert not np.allclose(half[..., 3, :], interleaved[..., 3, :])


def test_adapters_round_trip_the_three_layouts():
    rng = np.random.default_rng(4)
    packed = rng.standard_normal((24, 8))
    parts = adapters.from_packed(packed, np.arange(24.0))
    assert np.array_equal(np.concatenate([parts["w_q"], parts["w_k"], parts["w_v"]]), packed)
    assert np.array_equal(parts["b_k"], np.arange(8.0, 16.0))
    conv, _ = adapters.from_conv1d(packed.T)
    assert np.array_equal(conv, packed)
    gqa = adapters.from_packed(rng.standard_normal((16, 8)), sizes=(8, 4, 4))
    assert gqa["w_k"].shape == (4, 8)


def _module(seed: int, embed: int = 8, heads: int = 2) -> torch.nn.MultiheadAttention:
    torch.manual_seed(seed)
    module = torch.nn.MultiheadAttention(embed, heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        module.in_proj_bias.normal_()
        module.out_proj.bias.normal_()
    return module.train()  # not the fast path: its own kernel


def test_torch_layer_matches_nn_multihead_attention_where_it_is_defined():
    module = _module(5)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    torch_mask = torch.rand(2 * 2, 5, 5) < 0.3  # true = ignore, [N·H, L, S]
    torch_mask[:, :, 0] = False  # every row keeps a key
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    mask = adapters.torch_mha_mask(torch_mask.numpy(), padding.numpy(), num_heads=2)
    ours = torch_layer.multi_head_attention(
        x, **torch_layer.from_torch_mha(module), attn_mask=mask, need_weights=True
    )
    for need_weights in (True, False):
        theirs, weights = module(
            x, x, x, attn_mask=torch_mask, key_padding_mask=padding,
            need_weights=need_weights, average_attn_weights=False,
        )  # fmt: skip
        difference = (ours.output - theirs).abs().max().item()
        assert difference < 1e-13, difference
        if need_weights:
            assert (ours.weights - weights).abs().max().item() < 1e-15
    # The same boolean tensor read SDPA's way (true = may attend) is another mask: the trap.
    trap = torch_layer.multi_head_attention(
        x, **torch_layer.from_torch_mha(module), attn_mask=torch_mask.numpy().reshape(2, 2, 5, 5)
    )
    assert (trap - ours.output).abs().max().item() > 0.1


def test_nn_multihead_attention_gives_nan_for_a_fully_masked_row_where_the_layer_gives_b_o():
    module = _module(6)
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    torch_mask = torch.zeros(4, 4, dtype=torch.bool)
    torch_mask[2] = True  # query 2 may attend to nothing
    theirs, _ = module(x, x, x, attn_mask=torch_mask, need_weights=True)
    mask = adapters.torch_mha_mask(torch_mask.numpy(), num_heads=2)
    ours = torch_layer.multi_head_attention(x, **torch_layer.from_torch_mha(module), attn_mask=mask)
    assert torch.isnan(theirs[0, 2]).all()  # the documented divergence: need_weights' plain softmax
    assert torch.equal(ours[0, 2], module.out_proj.bias.detach())
    assert (ours[0, [0, 1, 3]] - theirs[0, [0, 1, 3]]).abs().max().item() < 1e-13


def test_a_float_one_zero_mask_is_added_not_read_as_booleans():
    case = next(c for c in VALID if c.id == "layer_float_one_zero_trap")
    arguments = {n: v for n, v in case.inputs.items() if n not in ("x_q", "x_kv", "attn_mask")}
    params = {n: v for n, v in case.params.items()}
    as_bool = layer.multi_head_attention(
        case.inputs["x_q"], **arguments, **params, attn_mask=case.inputs["attn_mask"] > 0
    )
    answer = PortAnswer(steps={"output": as_bool})
    assert not compare.judge(case, "bool-reader", "float64", answer).passed


@pytest.mark.parametrize("case_id", ["rope_half_split", "layer_fully_masked_row"])
def test_exact_cells_take_the_value_or_its_dtype_rounding_and_nothing_else(case_id):
    case = next(c for c in VALID if c.id == case_id)
    budget = case.expected.budgets["float32"].output
    exact = budget == 0
    assert exact.any()
    steps = {} if case.expected.weights is None else {"weights": case.expected.weights}
    rounded = case.expected.output.astype(np.float32).astype(np.float64)
    for output in (case.expected.output, np.where(exact, rounded, case.expected.output)):
        assert compare.judge(case, "p", "float32", PortAnswer(steps={**steps, "output": output})).passed
    off = case.expected.output.copy()
    cell = tuple(np.argwhere(exact)[0])
    off[cell] = np.nextafter(np.float32(rounded[cell]), np.float32(np.inf))  # one float32 step away
    assert not compare.judge(case, "p", "float32", PortAnswer(steps={**steps, "output": off})).passed


# The layer's inputs checked as carefully as the core's, in the words (Python's spelling) that
# typescript/test/layer.test.ts expects of the TypeScript layer.
EYE = {"w_q": np.eye(2), "w_k": np.eye(2), "w_v": np.eye(2), "w_o": np.eye(2)}
LAYERS = [layer.multi_head_attention, torch_layer.multi_head_attention]
HUGE = {  # 1 MiB of inputs whose projections need 8 GiB: x [4096, 1], w_q and w_k [131072, 1]
    "x_q": np.zeros((4096, 1)), "w_q": np.zeros((131072, 1)), "w_k": np.zeros((131072, 1)),
    "w_v": np.ones((1, 1)), "w_o": np.ones((1, 1)),
}  # fmt: skip


@pytest.mark.parametrize("mha", LAYERS, ids=["numpy", "torch"])
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rope": {"theta": None}}, "theta must be a finite number > 0, got null"),
        ({"rope": {"interleaved": None}}, "interleaved must be a boolean, got null"),
        ({"need_weights": "yes"}, "need_weights must be a boolean, got a string"),
        ({"need_weights": None}, "need_weights must be a boolean, got null"),
        ({"return_cache": 1}, "return_cache must be a boolean, got 1"),
        ({"memory_limit": 0}, "memory_limit must be a number of bytes > 0, got 0"),
        ({"memory_limit": None}, "memory_limit must be a number of bytes > 0, got null"),
    ],
)
def test_the_layer_refuses_a_wrong_option_with_kind_value(mha, options, message):
    with pytest.raises(AttentionInputError) as caught:
        mha([[1.0, 2.0]], **EYE, num_heads=1, **options)
    assert (caught.value.kind, str(caught.value)) == ("value", message)


@pytest.mark.parametrize("mha", LAYERS, ids=["numpy", "torch"])
def test_the_layer_takes_numpy_integers_wherever_it_takes_python_integers(mha):
    plain = np.asarray(mha([[1.0, 2.0]], **EYE, num_heads=1, num_kv_heads=1, rope={"rotary_dim": 2}))
    numpy_ints = mha(
        [[1.0, 2.0]], **EYE, num_heads=np.int64(1), num_kv_heads=np.int32(1), rope={"rotary_dim": np.int64(2)}
    )
    np.testing.assert_array_equal(np.asarray(numpy_ints), plain)
    rotated = layer.apply_rotary([[[1.0, 2.0]]], [3], rotary_dim=np.int64(2))
    np.testing.assert_array_equal(rotated, layer.apply_rotary([[[1.0, 2.0]]], [3], rotary_dim=2))
    with pytest.raises(AttentionInputError, match="num_heads must be a positive integer, got 2"):
        mha([[1.0, 2.0]], **EYE, num_heads=2.0)  # an integer, not a float that is whole
    with pytest.raises(AttentionInputError, match="num_heads must be a positive integer, got a boolean"):
        mha([[1.0, 2.0]], **EYE, num_heads=np.True_)


@pytest.mark.parametrize("mha", LAYERS, ids=["numpy", "torch"])
def test_a_layer_whose_projections_exceed_memory_limit_is_refused_before_they_are_made(mha):
    started = time.perf_counter()
    with pytest.raises(AttentionInputError) as caught:
        mha(HUGE["x_q"], **{n: w for n, w in HUGE.items() if n != "x_q"}, num_heads=1)
    assert time.perf_counter() - started < 1.0  # refused at once, not after 8 GiB of work
    assert caught.value.kind == "size"
    assert str(caught.value) == (
        "the layer needs 8590032896 bytes as float64 for queries [1, 4096, 131072], keys [1, 4096, 131072],"
        " values [1, 4096, 1], merged heads [4096, 1] and output [4096, 1], more than memory_limit ="
        " 2147483648; pass a larger memory_limit to compute them"
    )
    # The limit is the caller's: a smaller one refuses a small layer, and the core is held to it too.
    with pytest.raises(AttentionInputError, match="^the layer needs 80 bytes .* memory_limit = 50;"):
        mha([[1.0, 2.0]], **EYE, num_heads=1, memory_limit=50)
    with pytest.raises(AttentionInputError, match=r"^the scores \[1, 8, 8\] need 1536 bytes .* = 1000;"):
        mha([[1.0, 2.0]] * 8, **EYE, num_heads=1, memory_limit=1000)  # the layer's own 640 bytes fit
