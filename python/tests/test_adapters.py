"""The engine adapters (adapters.py) against each engine's own definition of the keys a query sees.

Each engine's mask is written here as its public source writes it, as a boolean grid [B, Lq, Lk]
(true = the query sees the key), independent of the adapter; the adapter's options are then turned
into the keys this contract shows, by the rule of docs/design.md (key j is visible to row i of
sequence b when it lies in [0, min(sink_end, end(i))) or in [start(i), end(i))), and the two grids
must be equal over a sweep of every parameter. Rows an engine leaves undefined (onnxruntime's
padded prompt rows) are left out, and said so where they are.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from attention_port import adapters
from attention_port.inputs import AttentionInputError

INF = math.inf


def contract_visible(batch: int, lq: int, lk: int, options: dict) -> np.ndarray:
    """[B, Lq, Lk]: the keys this contract shows each row, from the options as a port takes them.
    Row i of sequence b sits at p = i + o_b; with window (L, R), is_causal c, kv_seqlen n_b and
    sink_tokens S: end(i) = clamp(p + 1 + min(R, 0 if c), 0, n_b), start(i) = clamp(p - L, 0,
    end(i)), and the sinks [0, min(S, n_b, end(i))) beside the band [start(i), end(i))."""
    window = options.get("window")
    left, right = window if window is not None else (None, None)
    causal = options.get("is_causal", False)
    offsets = options.get("query_offset", 0)
    counts = options.get("kv_seqlen")
    sinks = options.get("sink_tokens", 0)
    grid = np.zeros((batch, lq, lk), dtype=bool)
    for b in range(batch):
        o = offsets[b] if isinstance(offsets, list) else offsets
        n = counts[b] if counts is not None else lk
        for i in range(lq):
            p = i + o
            reach = min(INF if right is None else right, 0 if causal else INF)
            end = int(min(max(p + 1 + reach, 0), n))
            start = int(min(max(p - (INF if left is None else left), 0), end))
            sink_end = min(sinks, n, end)
            grid[b, i, :sink_end] = True
            grid[b, i, start:end] = True
    return grid


# ---- onnxruntime GroupQueryAttention ----------------------------------------------------------


def onnxruntime_gqa_visible(sequence_length, total_sequence_length, seqlens_k, local_window_size, lk):
    """onnxruntime/contrib_ops/cpu/bert/gqa_attention_base.h (microsoft/onnxruntime), the softmax
    loop of its attention kernel, per (batch, head):
        total_seqlen = seqlens_k[batch_index] + 1;
        past_seqlen = is_first_prompt ? 0 : total_seqlen - sequence_length;
        seq_causal_length = past_seqlen + seq + 1;
        should_apply_local_window = local_window_size_ >= 0 && seq_causal_length > local_window_size_;
        start_offset = should_apply_local_window ? seq_causal_length - local_window_size_ : 0;
    and the softmax runs over [start_offset, seq_causal_length); is_first_prompt is
    sequence_length == total_sequence_length (group_query_attention_helper.h). Rows of a first
    prompt at or past a sequence's total_seqlen are padding, outside the kernel's definition
    (they read scores its GEMM never wrote): None there."""
    first_prompt = sequence_length == total_sequence_length
    batch = len(seqlens_k)
    grid = np.zeros((batch, sequence_length, lk), dtype=bool)
    defined = np.ones((batch, sequence_length), dtype=bool)
    for b, last in enumerate(seqlens_k):
        total_seqlen = last + 1
        past_seqlen = 0 if first_prompt else total_seqlen - sequence_length
        for seq in range(sequence_length):
            if first_prompt and seq >= total_seqlen:
                defined[b, seq] = False
                continue
            seq_causal_length = past_seqlen + seq + 1
            local = local_window_size >= 0 and seq_causal_length > local_window_size
            start_offset = seq_causal_length - local_window_size if local else 0
            grid[b, seq, start_offset:seq_causal_length] = True
    return grid, defined


ORT_CASES = [
    # (sequence_length, total_sequence_length, seqlens_k, present length Lk)
    (4, 4, [3], 4),  # a first prompt
    (5, 5, [4, 2, 0], 5),  # a right-padded first prompt
    (1, 9, [8, 4, 0], 9),  # a ragged decode step
    (3, 9, [8, 5, 2], 9),  # a ragged chunk after a prompt
    (2, 7, [6, 3], 7),
]


@pytest.mark.parametrize("local_window_size", [-1, 1, 2, 3, 4, 8])
@pytest.mark.parametrize("sequence_length, total_sequence_length, seqlens_k, lk", ORT_CASES)
def test_onnxruntime_gqa_shows_the_keys_its_kernel_shows(
    sequence_length, total_sequence_length, seqlens_k, lk, local_window_size
):
    options = adapters.from_onnxruntime_gqa(
        sequence_length=sequence_length,
        total_sequence_length=total_sequence_length,
        seqlens_k=seqlens_k,
        local_window_size=local_window_size,
    )
    engine, defined = onnxruntime_gqa_visible(
        sequence_length, total_sequence_length, seqlens_k, local_window_size, lk
    )
    ours = contract_visible(len(seqlens_k), sequence_length, lk, options)
    assert (ours[defined] == engine[defined]).all(), options


def test_onnxruntime_gqa_window_is_w_keys_and_seqlens_k_an_index():
    options = adapters.from_onnxruntime_gqa(
        sequence_length=1, total_sequence_length=9, seqlens_k=[8, 4], local_window_size=4, head_sink=[0.5, -1]
    )
    assert options == {
        "is_causal": True,
        "kv_seqlen": [9, 5],
        "window": (3, 0),
        "query_offset": [8, 4],
        "sink_logits": [0.5, -1.0],
    }
    # A sequence with no key yet (seqlens_k = -1) in a first prompt: kv_seqlen 0.
    assert adapters.from_onnxruntime_gqa(sequence_length=2, total_sequence_length=2, seqlens_k=[1, -1]) == {
        "is_causal": True,
        "kv_seqlen": [2, 0],
    }


# ---- FlashAttention ---------------------------------------------------------------------------


def flash_attention_visible(seqlen_q, seqlen_k, window_size, causal, seqused_k, sink_token_length):
    """construct_local_mask in flash_attn/cute/testing.py (Dao-AILab/flash-attention), which
    tests/test_flash_attn.py's twin also writes, true there = masked:
        sk = key_padding_mask.sum(-1) (or seqlen_k); sq = seqlen_q
        window_size[0] None: col_idx > row_idx + sk - sq + window_size[1]
        else: local_mask_left = col_idx > sk if window_size[1] is None
                                else col_idx > min(row_idx + sk - sq + window_size[1], sk)
              masked = local_mask_left | (col_idx < row_idx + sk - sq - window_size[0]
                                          & col_idx >= sink_token_length)
    with attention_ref's `if causal: window_size = (window_size[0], 0)` first, its key padding
    mask (keys at or past sk hidden) on top, and FlashAttention 2's -1 for an unbounded side read
    as the cute interface's None (flash_api.cpp widens a -1 side to seqlen_k)."""
    left, right = (None if s == -1 else s for s in window_size)
    if causal:
        right = 0
    counts = seqused_k if seqused_k is not None else [seqlen_k]
    batch = len(counts)
    row = np.arange(seqlen_q)[:, None]
    col = np.arange(seqlen_k)[None, :]
    grid = np.zeros((batch, seqlen_q, seqlen_k), dtype=bool)
    for b, sk in enumerate(counts):
        sq = seqlen_q
        if left is None and right is None:
            masked = np.zeros((seqlen_q, seqlen_k), dtype=bool)
        elif left is None:
            masked = col > row + sk - sq + right
        else:
            mask_left = col > sk if right is None else col > np.minimum(row + sk - sq + right, sk)
            masked = mask_left | ((col < row + sk - sq - left) & (col >= sink_token_length))
        padding = col >= sk
        grid[b] = ~(masked | padding)
    return grid


FLASH_WINDOWS = [(-1, -1), (0, 0), (1, 0), (2, 1), (-1, 0), (-1, 2), (3, -1), (0, -1), (5, 5)]


@pytest.mark.parametrize("window_size", FLASH_WINDOWS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "seqlen_q, seqlen_k, seqused_k", [(3, 3, None), (2, 7, None), (1, 6, None), (2, 7, [7, 4, 2])]
)
@pytest.mark.parametrize("sink_token_length", [0, 2])
def test_flash_attention_shows_the_keys_construct_local_mask_shows(
    window_size, causal, seqlen_q, seqlen_k, seqused_k, sink_token_length
):
    options = adapters.from_flash_attention(
        seqlen_q=seqlen_q,
        seqlen_k=seqlen_k,
        window_size=window_size,
        causal=causal,
        seqused_k=seqused_k,
        sink_token_length=sink_token_length,
    )
    engine = flash_attention_visible(seqlen_q, seqlen_k, window_size, causal, seqused_k, sink_token_length)
    batch = engine.shape[0]
    assert (contract_visible(batch, seqlen_q, seqlen_k, options) == engine).all(), options


def test_flash_attention_aligns_bottom_right_and_takes_its_sinks():
    assert adapters.from_flash_attention(
        seqlen_q=2, seqlen_k=9, window_size=(127, 0), learnable_sink=np.array([0.25, 2.0])
    ) == {"is_causal": False, "window": (127, 0), "query_offset": 7, "sink_logits": [0.25, 2.0]}
    # No window and no causality: where the queries sit changes nothing, so no offset.
    assert adapters.from_flash_attention(seqlen_q=5, seqlen_k=2) == {"is_causal": False}


# ---- HF transformers --------------------------------------------------------------------------


def hf_visible(lq, lk, sliding_window, is_causal, q_offset, kv_offset):
    """src/transformers/masking_utils.py (huggingface/transformers): sdpa_mask evaluates the mask
    function at q_idx = q_offset + i and kv_idx = kv_offset + j, where
        causal_mask_function:                  kv_idx <= q_idx
        sliding_window_overlay(w):             kv_idx > q_idx - sliding_window
        sliding_window_bidirectional_overlay:  abs(q_idx - kv_idx) <= sliding_window
    (sliding_window_causal_mask_function is the first two and-ed; the bidirectional one is the
    third)."""
    q_idx = q_offset + np.arange(lq)[:, None]
    kv_idx = kv_offset + np.arange(lk)[None, :]
    if is_causal:
        grid = kv_idx <= q_idx
        if sliding_window is not None:
            grid = grid & (kv_idx > q_idx - sliding_window)
    else:
        grid = np.ones((lq, lk), dtype=bool)
        if sliding_window is not None:
            grid = grid & (np.abs(q_idx - kv_idx) <= sliding_window)
    return grid[None]


@pytest.mark.parametrize("sliding_window", [None, 1, 2, 3, 4, 9])
@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize(
    "lq, lk, q_offset, kv_offset", [(5, 5, 0, 0), (1, 8, 7, 0), (3, 6, 10, 7), (2, 4, 5, 5)]
)
def test_hf_sliding_window_shows_the_keys_masking_utils_shows(
    sliding_window, is_causal, lq, lk, q_offset, kv_offset
):
    options = adapters.from_hf_sliding_window(
        sliding_window=sliding_window, is_causal=is_causal, q_offset=q_offset, kv_offset=kv_offset
    )
    engine = hf_visible(lq, lk, sliding_window, is_causal, q_offset, kv_offset)
    assert (contract_visible(1, lq, lk, options) == engine).all(), options


def test_hf_sliding_window_counts_the_query_itself():
    # sdpa_mask's own docstring example: sliding_window=3 on 5 tokens shows 3 keys in the last row.
    assert adapters.from_hf_sliding_window(sliding_window=3) == {"is_causal": True, "window": (2, 0)}
    assert contract_visible(1, 5, 5, adapters.from_hf_sliding_window(sliding_window=3))[0, 4].tolist() == [
        False,
        False,
        True,
        True,
        True,
    ]


# ---- jax-js -----------------------------------------------------------------------------------


def jax_js_visible(lq, lk, local_window_size, is_causal, key_value_seq_lengths):
    """dotProductAttention in src/library/nn.ts (ekzhang/jax-js): tri(L, S, k) is true where
    j <= i + k, and
        isCausal:            tri(L, S, 0)
        localWindowSize:     [before, after] (a number w: [w, w]);
                             tri(L, S, after) * (tri(L, S, -before - 1) != true)
        keyValueSeqLengths:  arange(S) < keyValueSeqLengths[b]"""

    def tri(k):
        return np.arange(lk)[None, :] <= np.arange(lq)[:, None] + k

    batch = 1 if key_value_seq_lengths is None else len(key_value_seq_lengths)
    grid = np.ones((batch, lq, lk), dtype=bool)
    if is_causal:
        grid &= tri(0)
    if local_window_size is not None:
        before, after = (
            (local_window_size, local_window_size)
            if isinstance(local_window_size, int)
            else local_window_size
        )
        grid &= tri(after) & ~tri(-before - 1)
    if key_value_seq_lengths is not None:
        grid &= np.arange(lk)[None, None, :] < np.array(key_value_seq_lengths)[:, None, None]
    return grid


@pytest.mark.parametrize("local_window_size", [None, 0, 1, 2, [0, 0], [2, 0], [1, 3], [0, 2]])
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("lq, lk, lengths", [(4, 4, None), (3, 7, None), (5, 3, None), (3, 6, [6, 2, 0])])
def test_jax_js_shows_the_keys_dot_product_attention_shows(local_window_size, is_causal, lq, lk, lengths):
    options = adapters.from_jax_js(
        localWindowSize=local_window_size, isCausal=is_causal, keyValueSeqLengths=lengths
    )
    engine = jax_js_visible(lq, lk, local_window_size, is_causal, lengths)
    assert (contract_visible(engine.shape[0], lq, lk, options) == engine).all(), options


# ---- ONNX Attention ---------------------------------------------------------------------------


def onnx_attention_visible(q_len, kv_len, nonpad_kv_seqlen, is_causal, past_sequence_length):
    """_compute_attention in onnx/reference/ops/op_attention.py (onnx/onnx): with is_causal,
        past_key given:                   _apply_causal(past_sequence_length): j <= i + past
        nonpad_kv_seqlen, no past_key:    j <= i + (nonpad_kv_seqlen[b] - q_len)
        neither:                          j <= i
    then the padding mask arange(kv_len) < nonpad_kv_seqlen[b] on top."""
    counts = nonpad_kv_seqlen if nonpad_kv_seqlen is not None else [kv_len]
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    grid = np.ones((len(counts), q_len, kv_len), dtype=bool)
    for b, n in enumerate(counts):
        if is_causal:
            if past_sequence_length is not None:
                grid[b] &= j <= i + past_sequence_length
            elif nonpad_kv_seqlen is not None:
                grid[b] &= j <= i + (n - q_len)
            else:
                grid[b] &= j <= i
        if nonpad_kv_seqlen is not None:
            grid[b] &= j < n
    return grid


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize(
    "q_len, kv_len, nonpad, past",
    [(3, 3, None, None), (2, 8, [8, 5, 2], None), (1, 6, [6, 1], None), (2, 7, None, 5), (2, 7, [7, 3], 5)],
)
def test_onnx_attention_shows_the_keys_its_reference_shows(is_causal, q_len, kv_len, nonpad, past):
    options = adapters.from_onnx_attention(
        q_sequence_length=q_len, nonpad_kv_seqlen=nonpad, is_causal=is_causal, past_sequence_length=past
    )
    engine = onnx_attention_visible(q_len, kv_len, nonpad, is_causal, past)
    assert (contract_visible(engine.shape[0], q_len, kv_len, options) == engine).all(), options


def test_onnx_counts_keys_where_onnxruntime_indexes_the_last():
    # The same three sequences, in each engine's words: ONNX counts 5, 2, 0 keys; onnxruntime's
    # GQA is given the index of the last one, 4, 1, -1. Both mean kv_seqlen [5, 2, 0].
    onnx = adapters.from_onnx_attention(q_sequence_length=5, nonpad_kv_seqlen=[5, 2, 0])
    ort = adapters.from_onnxruntime_gqa(sequence_length=5, total_sequence_length=5, seqlens_k=[4, 1, -1])
    assert onnx["kv_seqlen"] == ort["kv_seqlen"] == [5, 2, 0]


# ---- gpt-oss ----------------------------------------------------------------------------------


def gpt_oss_visible(n_tokens, sliding_window):
    """sdpa in gpt_oss/torch/model.py (openai/gpt-oss):
        mask = torch.triu(full(-inf), diagonal=1)
        if sliding_window > 0: mask += torch.tril(full(-inf), diagonal=-sliding_window)
    a key is seen where the mask stays 0."""
    i = np.arange(n_tokens)[:, None]
    j = np.arange(n_tokens)[None, :]
    hidden = j - i >= 1  # triu(diagonal=1)
    if sliding_window > 0:
        hidden |= j - i <= -sliding_window  # tril(diagonal=-sliding_window)
    return ~hidden[None]


@pytest.mark.parametrize("sliding_window", [0, 1, 2, 3, 128])
def test_gpt_oss_shows_the_keys_its_sdpa_shows(sliding_window):
    options = adapters.from_gpt_oss(sliding_window=sliding_window, sinks=[0.0, 1.5])
    assert options["sink_logits"] == [0.0, 1.5]
    engine = gpt_oss_visible(7, sliding_window)
    assert (contract_visible(1, 7, 7, options) == engine).all(), options


def test_gpt_oss_128_is_127_keys_back():
    # gpt-oss's 128-token window is FlashAttention's (127, 0), the pair Megatron users must pass.
    assert adapters.from_gpt_oss(sliding_window=128)["window"] == (127, 0)
    assert (
        adapters.from_gpt_oss(sliding_window=128)["window"]
        == adapters.from_flash_attention(seqlen_q=1, seqlen_k=1, window_size=(127, 0), causal=True)["window"]
    )


# ---- the grid above is the one the ports compute --------------------------------------------


def _reference_visible(batch: int, lq: int, lk: int, options: dict) -> np.ndarray:
    """[B, Lq, Lk]: the keys the reference port weighs (a positive weight) with these options, on
    random inputs of shape [B, 1, L, 4] (every visible key's exp is positive there, sinks or not)."""
    from attention_port import reference

    rng = np.random.default_rng(7)
    query = rng.standard_normal((batch, 1, lq, 4))
    key = rng.standard_normal((batch, 1, lk, 4))
    value = rng.standard_normal((batch, 1, lk, 2))
    weights = reference.attention_steps(query, key, value, **options).weights  # [B, 1, Lq, Lk]
    return weights[:, 0] > 0


REFERENCE_CALLS = [
    (
        adapters.from_onnxruntime_gqa,
        {"sequence_length": 1, "total_sequence_length": 9, "seqlens_k": [8, 4, 0], "local_window_size": 3},
        3,
        1,
        9,
    ),
    (
        adapters.from_onnxruntime_gqa,
        {"sequence_length": 5, "total_sequence_length": 5, "seqlens_k": [4, 2], "local_window_size": 2},
        2,
        5,
        5,
    ),
    (
        adapters.from_flash_attention,
        {
            "seqlen_q": 2,
            "seqlen_k": 7,
            "window_size": (2, -1),
            "causal": True,
            "seqused_k": [7, 4, 2],
            "sink_token_length": 1,
        },
        3,
        2,
        7,
    ),
    (adapters.from_flash_attention, {"seqlen_q": 3, "seqlen_k": 8, "window_size": (1, 2)}, 1, 3, 8),
    (adapters.from_hf_sliding_window, {"sliding_window": 3, "q_offset": 6, "kv_offset": 2}, 1, 3, 7),
    (adapters.from_hf_sliding_window, {"sliding_window": 2, "is_causal": False}, 1, 5, 5),
    (
        adapters.from_jax_js,
        {"localWindowSize": [2, 1], "isCausal": True, "keyValueSeqLengths": [6, 3]},
        2,
        4,
        6,
    ),
    (
        adapters.from_onnx_attention,
        {"q_sequence_length": 2, "nonpad_kv_seqlen": [6, 3], "is_causal": True},
        2,
        2,
        6,
    ),
    (adapters.from_gpt_oss, {"sliding_window": 3, "sinks": [0.5]}, 1, 6, 6),
]


@pytest.mark.parametrize("adapter, arguments, batch, lq, lk", REFERENCE_CALLS)
def test_the_reference_port_weighs_the_keys_the_grid_shows(adapter, arguments, batch, lq, lk):
    # The grid the engines are held to above is the contract's rule as written in this file; here
    # the reference port, given the adapter's options, weighs exactly those keys.
    options = adapter(**arguments)
    assert (_reference_visible(batch, lq, lk, options) == contract_visible(batch, lq, lk, options)).all()


def test_every_row_of_design_md_s_table_of_engines_has_its_case():
    import re

    from attention_port.golden import cases
    from attention_port.paths import DOCS

    text = (DOCS / "design.md").read_text(encoding="utf-8")
    section = text.split("### Engines' windows, sinks and key counts", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "`from_" in line]
    engine_cases = {case.id: case for case in cases.CASES if "adapter" in case.tags}
    named = set()
    for row in rows:
        adapter, case_id = re.findall(r"`([a-z_0-9]+)`", row.rsplit("|", 3)[1] + row.rsplit("|", 3)[2])
        assert hasattr(adapters, adapter), row
        assert case_id in engine_cases, row
        named.add(case_id)
    assert named == set(engine_cases) and len(rows) == len(engine_cases) >= 14


# ---- the sweep is not empty, and the contract's grid is not the engines' ----------------------


def test_a_window_one_key_off_is_caught():
    # The check above must be able to fail: the common mistake (w keys back instead of w - 1)
    # gives another grid for onnxruntime's w = 2 on a 4-token prompt.
    engine, defined = onnxruntime_gqa_visible(4, 4, [3], 2, 4)
    wrong = contract_visible(1, 4, 4, {"is_causal": True, "window": (2, 0)})
    assert (wrong != engine).any()
    right = contract_visible(
        1,
        4,
        4,
        adapters.from_onnxruntime_gqa(
            sequence_length=4, total_sequence_length=4, seqlens_k=[3], local_window_size=2
        ),
    )
    assert (right == engine).all()


# ---- refusals: the kind and the words, the same in both languages -----------------------------

# (adapter, arguments, kind, message); the twin test below holds adapters.ts to the same words.
REFUSALS = [
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 4, "seqlens_k": [3], "local_window_size": 0},
        "value",
        "local_window_size must be -1 (no window) or an integer >= 1, got 0",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 4, "seqlens_k": [3], "local_window_size": -2},
        "value",
        "local_window_size must be an integer >= -1, got -2",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 4, "seqlens_k": [3, -2]},
        "value",
        "seqlens_k[1] must be an integer >= -1, got -2",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 4, "seqlens_k": [2.5]},
        "value",
        "seqlens_k[0] must be an integer >= -1, got 2.5",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 4, "seqlens_k": 3},
        "type",
        "seqlens_k must be an array of integers, one per sequence, got 3",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 3, "total_sequence_length": 6, "seqlens_k": [5, 1]},
        "value",
        "seqlens_k[1] + 1 = 2 is below sequence_length = 3: the engine aligns the last query row"
        " with the last key, so row 0 would sit before key 0, where query_offset (>= 0) cannot place it",
    ),
    (
        "from_onnxruntime_gqa",
        {"sequence_length": 1, "total_sequence_length": 2, "seqlens_k": [1], "head_sink": [0.5, "x"]},
        "type",
        "head_sink[1] must be a number, got a string",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 1, "seqlen_k": 4, "window_size": (-2, 0)},
        "value",
        "window_size[0] must be an integer >= -1, got -2",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 1, "seqlen_k": 4, "window_size": 3},
        "type",
        "window_size must be an array (left, right), got 3",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 5, "seqlen_k": 3, "causal": True},
        "value",
        "seqlen_k = 3 is below seqlen_q = 5: the engine aligns the last query row with the last"
        " key, so row 0 would sit before key 0, where query_offset (>= 0) cannot place it",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 2, "seqlen_k": 4, "window_size": (1, 0), "seqused_k": [4, 1]},
        "value",
        "seqused_k[1] = 1 is below seqlen_q = 2: the engine aligns the last query row with the last"
        " key, so row 0 would sit before key 0, where query_offset (>= 0) cannot place it",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 1, "seqlen_k": 4, "causal": 1},
        "value",
        "causal must be a boolean, got 1",
    ),
    (
        "from_flash_attention",
        {"seqlen_q": 1, "seqlen_k": 4, "learnable_sink": 0.5},
        "type",
        "learnable_sink must be an array of numbers, one per query head, got 0.5",
    ),
    (
        "from_hf_sliding_window",
        {"sliding_window": 0},
        "value",
        "sliding_window must be an integer >= 1, got 0",
    ),
    (
        "from_hf_sliding_window",
        {"sliding_window": 4, "q_offset": 2, "kv_offset": 3},
        "value",
        "q_offset = 2 is below kv_offset = 3: query row 0 would sit before key 0, where"
        " query_offset (>= 0) cannot place it",
    ),
    (
        "from_jax_js",
        {"localWindowSize": [1, -1]},
        "value",
        "localWindowSize[1] must be an integer >= 0, got -1",
    ),
    (
        "from_jax_js",
        {"localWindowSize": [1, 2, 3]},
        "type",
        "localWindowSize must be an integer or an array [before, after], got an array of 3",
    ),
    (
        "from_jax_js",
        {"keyValueSeqLengths": [3, None]},
        "value",
        "keyValueSeqLengths[1] must be an integer >= 0, got null",
    ),
    (
        "from_onnx_attention",
        {"q_sequence_length": 2, "nonpad_kv_seqlen": [-1]},
        "value",
        "nonpad_kv_seqlen[0] must be an integer >= 0, got -1",
    ),
    (
        "from_onnx_attention",
        {"q_sequence_length": 3, "nonpad_kv_seqlen": [4, 2], "is_causal": True},
        "value",
        "nonpad_kv_seqlen[1] = 2 is below q_sequence_length = 3: the engine aligns the last query"
        " row with the last key, so row 0 would sit before key 0, where query_offset (>= 0) cannot place it",
    ),
    ("from_gpt_oss", {"sliding_window": -1}, "value", "sliding_window must be an integer >= 0, got -1"),
    ("from_gpt_oss", {"sinks": [[1.0]]}, "type", "sinks[0] must be a number, got an array"),
]


@pytest.mark.parametrize("adapter, arguments, kind, message", REFUSALS)
def test_impossible_values_are_refused_in_the_shared_words(adapter, arguments, kind, message):
    with pytest.raises(AttentionInputError) as raised:
        getattr(adapters, adapter)(**arguments)
    assert (raised.value.kind, str(raised.value)) == (kind, message)


def test_every_adapter_has_a_refusal_and_a_grid():
    named = {adapter for adapter, *_ in REFUSALS}
    assert named == {
        name
        for name in dir(adapters)
        if name.startswith("from_") and name not in ("from_conv1d", "from_packed")
    }
    assert len(list(itertools.chain(ORT_CASES, FLASH_WINDOWS))) > 10


# ---- the TypeScript twins give the same options and the same errors ---------------------------

# Every grid case above and every refusal, as JSON: adapters.ts must answer each exactly as
# adapters.py does (a tuple here is an array there).
TWIN_CALLS = (
    [
        (
            "from_onnxruntime_gqa",
            {
                "sequence_length": s,
                "total_sequence_length": t,
                "seqlens_k": k,
                "local_window_size": w,
                "head_sink": [0.5, -1.0],
            },
        )
        for s, t, k, _ in ORT_CASES
        for w in (-1, 1, 3)
    ]
    + [
        (
            "from_flash_attention",
            {
                "seqlen_q": q,
                "seqlen_k": k,
                "window_size": list(ws),
                "causal": c,
                "seqused_k": u,
                "sink_token_length": 2,
                "learnable_sink": [1.0],
            },
        )
        for ws in FLASH_WINDOWS
        for c in (False, True)
        for q, k, u in [(2, 7, None), (2, 7, [7, 4, 2])]
    ]
    + [
        ("from_hf_sliding_window", {"sliding_window": w, "is_causal": c, "q_offset": 9, "kv_offset": 4})
        for w in (None, 1, 5)
        for c in (True, False)
    ]
    + [
        ("from_jax_js", {"localWindowSize": w, "isCausal": c, "keyValueSeqLengths": [6, 2, 0]})
        for w in (None, 0, 3, [2, 0], [1, 3])
        for c in (False, True)
    ]
    + [
        (
            "from_onnx_attention",
            {"q_sequence_length": 2, "nonpad_kv_seqlen": n, "is_causal": c, "past_sequence_length": p},
        )
        for n in (None, [8, 5, 2])
        for c in (False, True)
        for p in (None, 5)
    ]
    + [("from_gpt_oss", {"sliding_window": w, "sinks": [0.0, -2.5]}) for w in (0, 1, 128)]
    + [(adapter, arguments) for adapter, arguments, _, _ in REFUSALS]
)

TWIN_SCRIPT = """
import * as adapters from %s;
const calls = JSON.parse(process.argv[1]);
const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
const answers = calls.map(([name, args]) => {
  try {
    return { options: adapters[camel(name)](args) };
  } catch (error) {
    return { kind: error.kind ?? null, message: error.message };
  }
});
process.stdout.write(JSON.stringify(answers));
"""

PYTHON_TO_TYPESCRIPT_OPTION = {
    "is_causal": "isCausal",
    "window": "window",
    "query_offset": "queryOffset",
    "kv_seqlen": "kvSeqlen",
    "sink_tokens": "sinkTokens",
    "sink_logits": "sinkLogits",
}


def _python_answer(adapter: str, arguments: dict) -> dict:
    try:
        options = getattr(adapters, adapter)(**arguments)
    except AttentionInputError as error:
        return {"kind": error.kind, "message": str(error)}
    return {
        "options": {
            PYTHON_TO_TYPESCRIPT_OPTION[k]: list(v) if isinstance(v, tuple) else v for k, v in options.items()
        }
    }


def test_typescript_adapters_answer_as_the_python_ones():
    import json
    import subprocess

    from attention_port.harness.node import find_node
    from attention_port.paths import TYPESCRIPT_SRC

    source = (TYPESCRIPT_SRC / "adapters.ts").as_uri()
    calls = [[adapter, arguments] for adapter, arguments in TWIN_CALLS]
    done = subprocess.run(
        [str(find_node()), "--input-type=module", "-e", TWIN_SCRIPT % json.dumps(source), json.dumps(calls)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    typescript = json.loads(done.stdout)
    python = [_python_answer(adapter, arguments) for adapter, arguments in TWIN_CALLS]
    assert len(typescript) == len(python) > 50
    for call, ts, py in zip(TWIN_CALLS, typescript, python, strict=True):
        assert ts == py, call
