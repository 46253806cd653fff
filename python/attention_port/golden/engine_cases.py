"""The cases of docs/design.md's table of engines: one per row, each an engine's window, sink or
key-count parameter turned into this contract's options by its adapter (adapters.py), so that the
fixture holds the options the adapter gives and the oracle's answer to them, and every port is held
to both. The description names the engine's own parameters; python/tests/test_adapters.py holds
each adapter to the engine's definition. Tagged `adapter`, and `window`, `sinks` or `ragged` by what
the engine's parameter sets. cases.py includes these with the valid cases; they are built by a
function, called there once Case exists, so that neither module needs the other to import first.
"""

from __future__ import annotations

from attention_port import adapters


def engine_cases() -> list[dict]:
    """The table's cases, one per row of docs/design.md's table of engines, as the fields of a
    cases.Case (the case table builds them: this module sits below it and imports nothing of it)."""
    gqa = {"enable_gqa": True}  # four query heads over two key/value heads, as in GQA and gpt-oss
    # fmt: off
    return [
        dict(id="adapter_ort_gqa_local_window", seed=12001,
             tags=("ragged", "window", "adapter", "gqa", "causal", "rank4"),
             description="onnxruntime GroupQueryAttention, a 6-token prompt with local_window_size = 3: 3 "
                         "keys, the query's own included (window (2, 0))",
             query=(1, 4, 6, 8), key=(1, 2, 6, 8), value=(1, 2, 6, 8), **gqa,
             **adapters.from_onnxruntime_gqa(sequence_length=6, total_sequence_length=6, seqlens_k=[5],
                                             local_window_size=3)),
        dict(id="adapter_ort_gqa_seqlens_k_decode", seed=12002,
             tags=("ragged", "window", "adapter", "gqa", "causal", "rank4"),
             description="onnxruntime GroupQueryAttention, a decode step over a 9-slot present cache with "
                         "seqlens_k = [8, 4, 0] (the index of each sequence's last key) and "
                         "local_window_size 4: kv_seqlen [9, 5, 1], each new row at its own position [8, "
                         "4, 0]",
             query=(3, 4, 1, 8), key=(3, 2, 9, 8), value=(3, 2, 9, 8), **gqa,
             **adapters.from_onnxruntime_gqa(sequence_length=1, total_sequence_length=9,
                                             seqlens_k=[8, 4, 0], local_window_size=4)),
        dict(id="adapter_ort_gqa_head_sink", seed=12003,
             tags=("ragged", "sinks", "adapter", "gqa", "causal", "rank4"),
             description="onnxruntime GroupQueryAttention's head_sink [num_heads] on a 5-token prompt: one"
                         " sink logit per query head in each row's denominator",
             query=(1, 4, 5, 8), key=(1, 2, 5, 8), value=(1, 2, 5, 8), **gqa,
             **adapters.from_onnxruntime_gqa(sequence_length=5, total_sequence_length=5, seqlens_k=[4],
                                             head_sink=[0.5, -1.0, 2.0, 0.0])),
        dict(id="adapter_flash_window_size", seed=12004,
             tags=("window", "adapter", "cross", "rank3"),
             description="FlashAttention window_size = (2, 1) without causal, 3 queries over 8 keys, "
                         "aligned bottom-right: window (2, 1) at query_offset 5",
             query=(2, 3, 8), key=(2, 8, 8), value=(2, 8, 8),
             **adapters.from_flash_attention(seqlen_q=3, seqlen_k=8, window_size=(2, 1))),
        dict(id="adapter_flash_causal_window", seed=12005,
             tags=("window", "adapter", "causal", "cross", "rank3"),
             description="FlashAttention window_size = (3, -1) with causal, 4 queries over 10 keys: causal"
                         " makes the right side 0, window (3, 0) at query_offset 6",
             query=(2, 4, 8), key=(2, 10, 8), value=(2, 10, 8),
             **adapters.from_flash_attention(seqlen_q=4, seqlen_k=10, window_size=(3, -1),
                                             causal=True)),
        dict(id="adapter_flash_seqused_k", seed=12006,
             tags=("ragged", "window", "adapter", "causal", "rank4"),
             description="FlashAttention seqused_k = [7, 4, 2] with window_size = (1, 0) and causal: each "
                         "sequence aligned with its own last key, query_offset [5, 2, 0]",
             query=(3, 2, 2, 8), key=(3, 2, 7, 8), value=(3, 2, 7, 8),
             **adapters.from_flash_attention(seqlen_q=2, seqlen_k=7, window_size=(1, 0), causal=True,
                                             seqused_k=[7, 4, 2])),
        dict(id="adapter_flash_sink_tokens", seed=12007,
             tags=("sinks", "window", "adapter", "causal", "rank3"),
             description="FlashAttention's sink_token_length = 2 beside window_size = (1, 0), causal, 6 "
                         "tokens: keys 0 and 1 stay visible to every later row",
             query=(2, 6, 8), key=(2, 6, 8), value=(2, 6, 8),
             **adapters.from_flash_attention(seqlen_q=6, seqlen_k=6, window_size=(1, 0), causal=True,
                                             sink_token_length=2)),
        dict(id="adapter_flash_learnable_sink", seed=12008,
             tags=("sinks", "adapter", "cross", "rank3"),
             description="FlashAttention's learnable_sink (num_heads,) = [0.3, -0.7], 3 queries over 5 "
                         "keys",
             query=(2, 3, 8), key=(2, 5, 8), value=(2, 5, 8),
             **adapters.from_flash_attention(seqlen_q=3, seqlen_k=5, learnable_sink=[0.3, -0.7])),
        dict(id="adapter_hf_sliding_window", seed=12009,
             tags=("window", "adapter", "causal", "decode", "rank3"),
             description="HF transformers' sliding_window = 3 (causal: kv_idx > q_idx - 3), 2 new queries "
                         "at q_offset 4 over 6 keys: window (2, 0) at query_offset 4",
             query=(2, 2, 8), key=(2, 6, 8), value=(2, 6, 8),
             **adapters.from_hf_sliding_window(sliding_window=3, q_offset=4)),
        dict(id="adapter_hf_sliding_window_bidirectional", seed=12010,
             tags=("window", "adapter", "rank3"),
             description="HF transformers' bidirectional sliding_window = 1 (abs(q_idx - kv_idx) <= 1) on "
                         "5 tokens: window (1, 1)",
             query=(2, 5, 8), key=(2, 5, 8), value=(2, 5, 8),
             **adapters.from_hf_sliding_window(sliding_window=1, is_causal=False)),
        dict(id="adapter_jax_js_local_window", seed=12011,
             tags=("window", "adapter", "rank3"),
             description="jax-js localWindowSize = 2 (a single number: [2, 2], symmetric) on 6 tokens: "
                         "window (2, 2), aligned top-left",
             query=(2, 6, 8), key=(2, 6, 8), value=(2, 6, 8),
             **adapters.from_jax_js(localWindowSize=2)),
        dict(id="adapter_jax_js_kv_lengths", seed=12012,
             tags=("ragged", "adapter", "fully_masked", "rank4"),
             description="jax-js keyValueSeqLengths = [5, 2, 0]: kv_seqlen, the last sequence with no key "
                         "(this contract's rows of +0.0, where jax-js's softmax gives NaN)",
             query=(3, 2, 3, 8), key=(3, 2, 5, 8), value=(3, 2, 5, 8),
             **adapters.from_jax_js(keyValueSeqLengths=[5, 2, 0])),
        dict(id="adapter_onnx_nonpad_kv_seqlen", seed=12013,
             tags=("ragged", "adapter", "causal", "rank4"),
             description="ONNX Attention's nonpad_kv_seqlen = [6, 3] (a count) with is_causal and no "
                         "past_key: kv_seqlen [6, 3], each sequence's 2 queries after its own keys, "
                         "query_offset [4, 1]",
             query=(2, 2, 2, 8), key=(2, 2, 6, 8), value=(2, 2, 6, 8),
             **adapters.from_onnx_attention(q_sequence_length=2, nonpad_kv_seqlen=[6, 3],
                                            is_causal=True)),
        dict(id="adapter_gpt_oss_window_sinks", seed=12014,
             tags=("window", "sinks", "adapter", "gqa", "causal", "rank3"),
             description="gpt-oss's sdpa with sliding_window = 3 and sinks [num_attention_heads] over 7 "
                         "tokens: window (2, 0) and one sink logit per query head",
             query=(4, 7, 8), key=(2, 7, 8), value=(2, 7, 8), **gqa,
             **adapters.from_gpt_oss(sliding_window=3, sinks=[1.0, -0.5, 0.25, 3.0])),
    ]
    # fmt: on
