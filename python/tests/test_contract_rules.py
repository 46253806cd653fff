"""The contract's rules (cases.CONTRACT; docs/design.md's table of them is generated from it): every
rule has a fixture case carrying its tags, and for the rules about special values and float64's
edges, one of those cases shows the rule in the oracle's expected values (so a tag put on the
wrong case does not count)."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from conftest import ALL_CASES, VALID_CASES

from attention_port.golden import cases
from attention_port.golden.reader import FixtureCase, load_fixtures
from attention_port.paths import FIXTURES

LAYER_CASES = load_fixtures(FIXTURES, kinds=("layer", "rope"))


def _rows(case: FixtureCase):
    """(logits, weights, output, value, scores, mask) per query row, as [Lk], [Lk], [Ev], [Lk, Ev],
    [Lk] and [Lk] or None: batch dims flattened, each query head paired with its key/value head."""
    e = case.expected
    lq, lk = e.logits.shape[-2:]
    heads = math.prod(e.logits.shape[:-2])  # B·Hq (explicit: a zero dim leaves -1 undecided)
    logits = e.logits.reshape(heads, lq, lk)
    scores = e.scores.reshape(heads, lq, lk)
    weights = e.weights.reshape(heads, lq, lk)
    output = e.output.reshape(heads, lq, e.output.shape[-1])  # [B·Hq, Lq, Ev]
    value = case.inputs["value"]
    value = value.reshape(math.prod(value.shape[:-2]), *value.shape[-2:])  # [B·Hkv, Lk, Ev]
    mask = case.inputs["attn_mask"]
    mask = None if mask is None else np.broadcast_to(mask, e.logits.shape).reshape(heads, lq, lk)
    group = heads // value.shape[0] if value.shape[0] else 1  # query heads per key/value head
    for n in range(logits.shape[0]):
        for i in range(lq):
            yield (
                logits[n, i], weights[n, i], output[n, i], value[n // group],
                scores[n, i], None if mask is None else mask[n, i],
            )  # fmt: skip


def _largest_finite(x: np.ndarray) -> float:
    return float(np.abs(x[np.isfinite(x)]).max(initial=0))


def _plus_zero(x: np.ndarray) -> bool:
    return bool(np.all(x == 0) and not np.any(np.signbit(x)))


def _fully_masked(logits: np.ndarray) -> bool:
    return bool(np.all(logits == -np.inf))


def _masked_row_special_value(case) -> bool:
    return any(
        _fully_masked(lg) and np.isnan(v).any() and np.isinf(v).any() and _plus_zero(out)
        for lg, _, out, v, _, _ in _rows(case)
    )


def _nan_value_times_zero(case) -> bool:
    """A row that is not fully masked weighs a NaN value 0 and still gets NaN (0 · NaN)."""
    for lg, w, out, v, _, _ in _rows(case):
        if _fully_masked(lg):
            continue
        for j, t in zip(*np.nonzero(np.isnan(v)), strict=True):
            if w[j] == 0 and math.isnan(out[t]):
                return True
    return False


def _inf_times_zero_in_scores(case) -> bool:
    q, k = case.inputs["query"], case.inputs["key"]
    return not (np.isnan(q).any() or np.isnan(k).any()) and bool(np.isnan(case.expected.scores).any())


def _inf_times_zero_scale(case) -> bool:
    e = case.expected
    return (
        case.params["scale"] == 0
        and bool(np.isnan(e.logits[np.isinf(e.scores)]).all())
        and np.isinf(e.scores).any()
    )


def _inf_logit_row(case) -> bool:
    return any((lg == np.inf).any() and np.isnan(out).all() for lg, _, out, _, _, _ in _rows(case))


def _softcap_maps_inf(case) -> bool:
    cap, e = case.params["softcap"], case.expected
    infinite = np.isinf(e.scores)
    return bool(cap and infinite.any() and np.all(np.abs(e.logits[infinite]) == cap))


def _inf_value(case) -> bool:
    """A positive weight on an inf value gives ±inf; a weight of 0 on it (row not masked) NaN."""
    seen = set()
    for lg, w, out, v, _, _ in _rows(case):
        if _fully_masked(lg) or np.isnan(v).any():
            continue
        for j, t in zip(*np.nonzero(np.isinf(v)), strict=True):
            if w[j] > 0 and np.isinf(out[t]):
                seen.add("inf")
            if w[j] == 0 and math.isnan(out[t]):
                seen.add("nan")
    return seen == {"inf", "nan"}


def _mask_over_nan(kind: str) -> Callable[[FixtureCase], bool]:
    """A NaN score whose logit is -inf, in a case excluding cells by `kind` only."""

    def holds(case) -> bool:
        mask = case.inputs["attn_mask"]
        if kind == "bool" and (mask is None or mask.dtype != bool):
            return False
        if kind == "causal" and (mask is not None or not case.params["is_causal"]):
            return False
        rows = list(_rows(case))
        return any(np.any(np.isnan(s) & (lg == -np.inf)) for lg, _, _, _, s, _ in rows) and any(
            np.any(np.isnan(s)) and not np.isnan(out).any() for _, _, out, _, s, _ in rows
        )

    return holds


def _float_mask_keeps_nan(case) -> bool:
    return any(
        m is not None and m.dtype != bool and np.any(np.isnan(s) & (m == -np.inf) & np.isnan(lg))
        for lg, _, _, _, s, m in _rows(case)
    )


def _large_finite_mask(case) -> bool:
    """A row whose every mask value is finite and at most -1e4 still has weights summing to 1."""
    return any(
        m is not None and m.dtype != bool and np.all(np.isfinite(m) & (m <= -1e4)) and math.isclose(sum(w), 1)
        for _, w, _, _, _, m in _rows(case)
    )


def _offset(case) -> int:
    """The case's one query_offset (0 for a per-batch one: the rules below are about one offset)."""
    offset = case.params.get("query_offset", 0)
    return offset if isinstance(offset, int) else 0


def _sinks(case) -> np.ndarray | None:
    sinks = case.params.get("sink_logits")
    return None if sinks is None else np.array(sinks, dtype=np.float64)


def _sink_rows(case, sink: Callable[[float], bool]):
    """The rows of the heads whose sink logit `sink` accepts: (logits, weights, output) per row."""
    sinks = _sinks(case)
    if sinks is None:
        return []
    e = case.expected
    heads = e.logits.shape[-3] if e.logits.ndim >= 3 else 1
    logits = e.logits.reshape(-1, heads, *e.logits.shape[-2:])  # [B, Hq, Lq, Lk]
    weights = e.weights.reshape(logits.shape)
    output = e.output.reshape(-1, heads, *e.output.shape[-2:])  # [B, Hq, Lq, Ev]
    return [
        (logits[b, h, i], weights[b, h, i], output[b, h, i])
        for b in range(logits.shape[0])
        for h in range(heads)
        if sink(sinks[h])
        for i in range(logits.shape[-2])
    ]


def _sink_takes_a_share(case) -> bool:
    """A row that sees keys, with a finite sink, whose weights sum to less than 1."""
    return any(
        not _fully_masked(lg) and np.isfinite(w).all() and w.sum() < 1 - 1e-9
        for lg, w, _ in _sink_rows(case, math.isfinite)
    )


def _sink_special(value: float) -> Callable[[FixtureCase], bool]:
    """A head whose sink logit is `value` (NaN or +inf) gives NaN in every row that sees a key, and
    +0.0 in a row that sees none."""

    def witness(case) -> bool:
        rows = _sink_rows(case, lambda s: s == value or (math.isnan(value) and math.isnan(s)))
        seeing = [np.isnan(out).all() for lg, _, out in rows if not _fully_masked(lg)]
        hidden = [_plus_zero(out) for lg, _, out in rows if _fully_masked(lg)]
        return bool(seeing) and all(seeing) and bool(hidden) and all(hidden)

    return witness


def _offset_moves_the_causal_rule(case) -> bool:
    """Without a mask, exactly the cells j > i + P are -inf, and some of them are (P > 0)."""
    e = case.expected
    if not (case.params["is_causal"] and _offset(case) > 0 and case.inputs["attn_mask"] is None):
        return False
    lq, lk = e.logits.shape[-2:]
    hidden = ~np.tri(lq, lk, k=_offset(case), dtype=bool)  # [Lq, Lk]
    return bool(hidden.any() and np.array_equal(e.logits == -np.inf, np.broadcast_to(hidden, e.logits.shape)))


def _offset_fully_masked_row(case) -> bool:
    rows = list(_rows(case))
    empty = [_fully_masked(lg) and _plus_zero(out) for lg, _, out, _, _, _ in rows]
    return _offset(case) > 0 and any(empty) and not all(empty)


# What a case must show, in its inputs and the oracle's values, to exercise a rule its tags claim.
WITNESSES: dict[str, Callable[[FixtureCase], bool]] = {
    "fully-masked-zero": lambda c: any(
        _fully_masked(lg) and _plus_zero(w) and _plus_zero(out) for lg, w, out, _, _, _ in _rows(c)
    ),
    "no-keys-zero": lambda c: c.expected.logits.shape[-1] == 0 and c.expected.output.size > 0
    and _plus_zero(c.expected.output),
    "fully-masked-special-value": _masked_row_special_value,
    "causal": lambda c: c.params["is_causal"] and c.expected.logits.shape[-2] != c.expected.logits.shape[-1],
    "query-offset": _offset_moves_the_causal_rule,
    "query-offset-fully-masked": _offset_fully_masked_row,
    "query-offset-needs-causal": lambda c: not c.params["is_causal"] and _offset(c) > 0
    and not np.any(c.expected.logits == -np.inf),
    "softmax-stable": lambda c: _largest_finite(c.expected.logits) > 709,  # exp overflows past it
    "nan-value": _nan_value_times_zero,
    "inf-times-zero": _inf_times_zero_in_scores,
    "inf-times-zero-scale": _inf_times_zero_scale,
    "inf-logit": _inf_logit_row,
    "softcap-inf": _softcap_maps_inf,
    "inf-value": _inf_value,
    "bool-mask-over-nan": _mask_over_nan("bool"),
    "causal-over-nan": _mask_over_nan("causal"),
    "float-mask-keeps-nan": _float_mask_keeps_nan,
    "large-finite-mask": _large_finite_mask,
    "intermediate-overflow": lambda c: bool(
        _largest_finite(c.inputs["value"]) > 1e308
        and np.isfinite(c.expected.output).all()
    ),
    "score-overflow": lambda c: c.expected.score_bound > np.finfo(np.float64).max,
    "sink-logits": _sink_takes_a_share,
    "sink-fully-hidden": lambda c: any(
        _fully_masked(lg) and _plus_zero(out) for lg, _, out in _sink_rows(c, math.isfinite)
    ),
    "sink-nan": _sink_special(math.nan),
    "sink-inf": _sink_special(math.inf),
    "kv-seqlen": lambda c: 0 in np.ravel(c.params.get("kv_seqlen", [])) and any(
        _fully_masked(lg) and _plus_zero(out) for lg, _, out, _, _, _ in _rows(c)
    ),
    "ragged-offset": lambda c: isinstance(c.params.get("query_offset"), list) and c.params["is_causal"],
}  # fmt: skip


def _layer_rows_equal_bias(case) -> bool:
    """Some query row of the layer's output is b_o exactly (or 0 without a bias)."""
    if case.kind != "layer":
        return False
    output, bias = case.expected.output, case.inputs["b_o"]
    rows = output.reshape(-1, output.shape[-1])
    return bool(np.any(np.all(rows == (0.0 if bias is None else bias), axis=-1)))


def _rope_rows_unmoved(case) -> bool:
    """Some row at position 0 is x itself, bit for bit."""
    if case.kind != "rope":
        return False
    x, out, positions = case.inputs["x"], case.expected.output, case.inputs["positions"]
    at_zero = positions == 0  # [L] or [B..., L]
    zero = np.broadcast_to(
        at_zero if at_zero.ndim == 1 else at_zero[..., None, :], x.shape[:-1]
    )  # [B..., H, L]
    return bool(zero.any() and np.array_equal(out[zero], x[zero]))


def _rope_tail_unmoved(case) -> bool:
    """The features past rotary_dim are x's, bit for bit."""
    if case.kind != "rope" or case.params["rotary_dim"] is None:
        return False
    dim, x, out = case.params["rotary_dim"], case.inputs["x"], case.expected.output
    return dim < x.shape[-1] and np.array_equal(out[..., dim:], x[..., dim:])


WITNESSES.update({
    "layer-fully-masked": _layer_rows_equal_bias,
    "rope-position-zero": _rope_rows_unmoved,
    "rope-partial": _rope_tail_unmoved,
})  # fmt: skip


def _carriers(rule: cases.Rule, among) -> list:
    kinds = {"layer", "rope"} & set(rule.tags)
    pool = LAYER_CASES if kinds else among  # a layer or RoPE rule is held by cases of those kinds
    return [case for case in pool if set(rule.tags) <= set(case.tags)]


@pytest.mark.parametrize("rule", cases.CONTRACT, ids=lambda r: r.id)
def test_every_rule_of_the_contract_has_a_fixture_case(rule):
    carriers = _carriers(rule, ALL_CASES)
    assert carriers, f"no fixture case carries the tags {rule.tags} of rule {rule.id!r}: add one to cases.py"
    witness = WITNESSES.get(rule.id)
    if witness is not None:
        valid = [case for case in carriers if not case.expects_error]
        shown = [case.id for case in valid if witness(case)]
        assert shown, f"rule {rule.id!r}: none of {[c.id for c in carriers]} shows it in its expected values"


def test_the_rules_and_their_witnesses_are_well_formed():
    ids = [rule.id for rule in cases.CONTRACT]
    assert len(set(ids)) == len(ids), "rule ids are unique"
    for rule in cases.CONTRACT:
        assert rule.tags and set(rule.tags) <= set(cases.TAGS), rule.id
    assert set(WITNESSES) <= set(ids), "a witness for a rule that is not in the contract"


def test_a_witness_is_not_fooled_by_a_case_without_the_rule():
    """Each witness refuses a plain case (rank2_square: no mask, no special value), so that a
    witness that always says yes would be caught."""
    plain = next(case for case in VALID_CASES if case.id == "rank2_square")
    fooled = [rule_id for rule_id, witness in WITNESSES.items() if witness(plain)]
    assert fooled == []


def test_a_fully_masked_row_is_plus_zero_even_where_value_holds_nan_and_inf():
    """The fixtures hold such rows with +0.0 (the oracle's answer), in a boolean, a float and a
    causal mask: a port or a learner that multiplies the zero weights by the values gives NaN."""
    shown = [c.id for c in VALID_CASES if "fully_masked" in c.tags and _masked_row_special_value(c)]
    assert {"fully_masked_bool_nan_inf_value", "fully_masked_float_nan_inf_value",
            "fully_masked_causal_nan_inf_value"} <= set(shown)  # fmt: skip


def test_the_offsets_p_minus_1_p_and_p_plus_1_give_three_different_outputs():
    """The same inputs with query_offset P - 1, P and P + 1: an off-by-one in a port's offset (or a
    port reading the offset as Lk - Lq, or as the count of cached keys minus one) fails one of them."""
    by_id = {case.id: case for case in VALID_CASES}
    trio = [by_id[f"decode_chunk_offset_p{suffix}"] for suffix in ("_minus_1", "", "_plus_1")]
    assert [_offset(case) for case in trio] == [4, 5, 6]
    for name in ("query", "key", "value"):
        assert all(np.array_equal(case.inputs[name], trio[0].inputs[name]) for case in trio), name
    outputs = [case.expected.output for case in trio]
    for a in range(3):
        for b in range(a + 1, 3):
            assert not np.allclose(outputs[a], outputs[b]), (trio[a].id, trio[b].id)


def _decode_cases():
    return [case for case in VALID_CASES if "decode" in case.tags]


@pytest.mark.parametrize(
    ("mistake", "wrong_options"),
    [
        ("top-left causal (the offset ignored)", lambda case: {"query_offset": 0}),
        ("causal_lower_right whatever the offset", lambda case: {"query_offset": _lower_right(case)}),
        ("the offset off by one", lambda case: {"query_offset": _offset(case) + 1}),
        ("the offset applied without is_causal", lambda case: {"is_causal": True}),
    ],
)
def test_a_port_making_a_decode_mistake_fails_a_decode_case(mistake, wrong_options):
    """The decode cases are traps: each common mistake gives, on at least one of them, an output
    outside the float64 budget (computed by the numpy port with the mistake made)."""
    from attention_port import reference

    failed = []
    for case in _decode_cases():
        inputs = case.inputs
        options = {**case.params, **wrong_options(case)}
        output = reference.scaled_dot_product_attention(
            inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **options
        )
        error = np.abs(output - case.expected.output)
        if np.any(~(error <= case.expected.budgets["float64"].output)):
            failed.append(case.id)
    assert failed, f"no decode case catches a port with {mistake}"


def _lower_right(case) -> int:
    lq, lk = case.expected.logits.shape[-2:]
    return max(lk - lq, 0)


def test_a_ragged_batch_decoded_in_one_call_gives_each_sequence_alone():
    """The oracle's values: each sequence of ragged_decode_batch is, bit for bit, that sequence
    decoded alone (its padding hidden by kv_seqlen, its row at its own query_offset), and the
    chunked prefill across the window's edge is the full windowed pass's rows."""
    by_id = {case.id: case for case in VALID_CASES}
    batch = by_id["ragged_decode_batch"].expected
    for b, length in enumerate(cases.RAGGED_KEYS):
        alone = by_id[f"ragged_decode_sequence_{b}"].expected
        assert np.array_equal(batch.output[b], alone.output[0])
        assert np.array_equal(batch.weights[b, ..., :length], alone.weights[0])
        assert not batch.weights[b, ..., length:].any()  # the padding: weight +0.0
    chunk = by_id["window_chunk_across_edge"].expected.output  # rows 5-7
    assert np.array_equal(chunk, by_id["window_left_3_causal"].expected.output[5:])


def test_each_window_and_its_neighbours_one_key_wider_and_narrower_differ():
    """The off-by-one pairs share their inputs: a window one key too wide or too narrow on either
    side gives another output in each of rows 3-5 (away from both ends of the 8 keys)."""
    by_id = {case.id: case.expected.output for case in VALID_CASES}
    for group in (
        ("window_left_1_causal", "window_left_2_causal", "window_left_3_causal"),
        ("window_right_0", "window_right_1", "window_right_2"),
    ):
        outputs = [by_id[name] for name in group]
        for a, b in ((0, 1), (1, 2)):
            assert not np.any(np.all(outputs[a][3:6] == outputs[b][3:6], axis=-1)), (group[a], group[b])
