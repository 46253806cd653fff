"""The options as contract/options.json declares them: the ports take each of the core's by its
Python name with its default and refuse wrong values in the declared order of checks, in the
declared words; the layer's and RoPE's checks keep their words. (The TypeScript twin is in
typescript/test/inputs.test.ts; the invalid-input fixtures hold both languages to the messages.)"""

from __future__ import annotations

import inspect

import pytest

from attention_port import reference, torch_port
from attention_port.contract import CORE_CHECK_ORDER, CORE_OPTIONS
from attention_port.inputs import AttentionInputError
from attention_port.layer_inputs import RopeOptions, check_heads, check_return_cache, check_rope

Q = [[1.0, 0.0], [0.5, 2.0]]
K = [[1.0, -1.0], [0.25, 0.5], [2.0, 0.0]]
V = [[1.0], [2.0], [3.0]]
PORTS = [
    reference.scaled_dot_product_attention,
    reference.attention_steps,
    torch_port.scaled_dot_product_attention,
    torch_port.attention_steps,
]
TORCH_OWN = {"device", "dtype"}  # the torch port's options of its own, not the contract's


@pytest.mark.parametrize("port", PORTS, ids=lambda port: f"{port.__module__}.{port.__name__}")
def test_a_port_takes_every_core_option_by_its_python_name_with_the_declared_default(port):
    parameters = inspect.signature(port).parameters
    options = {name: p for name, p in parameters.items() if name not in ("query", "key", "value", *TORCH_OWN)}
    assert list(options) == list(CORE_OPTIONS), "the ports take the options in the declaration's order"
    for name, parameter in options.items():
        default = CORE_OPTIONS[name].default
        assert parameter.default == default and type(parameter.default) is type(default), name


def test_every_option_with_an_error_is_checked_once():
    with_error = [option.python for option in CORE_OPTIONS.values() if option.error_message is not None]
    assert sorted(option.python for option in CORE_CHECK_ORDER) == sorted(with_error)
    assert len(set(CORE_CHECK_ORDER)) == len(CORE_CHECK_ORDER)


@pytest.mark.parametrize(
    "port", [reference.scaled_dot_product_attention, torch_port.scaled_dot_product_attention]
)
def test_the_first_wrong_option_in_the_declared_order_is_the_one_refused(port):
    # A string is no value of any scalar option; with the options from the i-th on all wrong, the
    # i-th is the one named.
    for i, first in enumerate(CORE_CHECK_ORDER):
        wrong = {option.python: "yes" for option in CORE_CHECK_ORDER[i:]}
        with pytest.raises(AttentionInputError) as caught:
            port(Q, K, V, **wrong)
        assert caught.value.kind == first.error_kind
        assert str(caught.value) == first.error_message.format(name=first.python, value="a string")


def test_query_offset_is_returned_as_an_int_and_two_point_zero_is_an_integer():
    out = reference.scaled_dot_product_attention(Q, K, V, is_causal=True, query_offset=1.0)
    assert (out == reference.scaled_dot_product_attention(Q, K, V, is_causal=True, query_offset=1)).all()
    with pytest.raises(AttentionInputError, match="query_offset must be an integer"):
        reference.scaled_dot_product_attention(Q, K, V, query_offset=1.5)


@pytest.mark.parametrize(
    ("check", "message"),
    [
        (lambda: check_heads(0, None), "num_heads must be a positive integer, got 0"),
        (lambda: check_heads(2, True), "num_kv_heads must be a positive integer, got a boolean"),
        (lambda: check_rope(3, 4), "rope must be an object of theta, rotary_dim and interleaved, got 3"),
        (lambda: check_rope({"theta": 0}, 4), "theta must be a finite number > 0, got 0"),
        (lambda: check_rope({"theta": None}, 4), "theta must be a finite number > 0, got null"),
        (lambda: check_rope({"theta": 1, "interleaved": 1}, 4), "interleaved must be a boolean, got 1"),
        (lambda: check_rope({"interleaved": None}, 4), "interleaved must be a boolean, got null"),
        (lambda: check_rope({"rotary_dim": 3}, 4),
         "rotary_dim must be an even integer from 2 to the feature size 4, got 3"),
        (lambda: check_return_cache("yes"), "return_cache must be a boolean, got a string"),
    ],
)  # fmt: skip
def test_the_layer_and_rope_refuse_wrong_options_in_their_declared_words(check, message):
    with pytest.raises(AttentionInputError) as caught:
        check()
    assert (caught.value.kind, str(caught.value)) == ("value", message)


def test_rope_takes_exactly_the_declared_rope_options_with_their_defaults():
    assert check_rope({}, 4) == RopeOptions(theta=10000.0, rotary_dim=4, interleaved=False)
    with pytest.raises(AttentionInputError, match="rope has an unknown option 'base'"):
        check_rope({"base": 10.0}, 4)
