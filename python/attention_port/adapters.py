"""Adapters onto the layer's contract (multi_head_attention's weights as nn.Linear stores them,
[out, in], and SDPA's mask polarity, true = may attend), from the layouts ported code meets:

  - from_conv1d: GPT-2's Conv1D and ONNX Runtime's contrib Attention store weights [in, out];
  - from_packed: torch's in_proj_weight [3E, D] and nanoGPT's c_attn hold q | k | v by rows;
  - torch_mha_mask: nn.MultiheadAttention's masks, whose boolean true means "ignore" (the
    opposite of SDPA's), key_padding_mask [N, S], a 3-D attn_mask [N·H, L, S], floats added;

and onto the core's options, the engines' window, sink and key-count parameters: from_onnxruntime_gqa,
from_flash_attention, from_hf_sliding_window, from_jax_js, from_onnx_attention, from_gpt_oss (below;
docs/design.md's table says what each engine's parameter attends to).
"""

from __future__ import annotations

import math

import numpy as np

from attention_port.inputs import AttentionInputError, describe_value, is_number


def from_conv1d(weight, bias=None):
    """A weight stored [in, out] (y = x · W + b) as [out, in] (y = x · Wᵀ + b); the bias as it is."""
    return np.asarray(weight, dtype=np.float64).T.copy(), None if bias is None else np.asarray(
        bias, np.float64
    )


def from_packed(weight, bias=None, sizes=None) -> dict:
    """w_q, w_k, w_v (and b_q, b_k, b_v) from one packed weight whose rows are q | k | v, in
    thirds or in the row counts `sizes` (q, k, v) for GQA or Ev != E."""
    weight = np.asarray(weight, dtype=np.float64)
    rows = weight.shape[0]
    sizes = (rows // 3,) * 3 if sizes is None else tuple(sizes)
    cuts = np.cumsum(sizes)[:-1]
    w_q, w_k, w_v = np.split(weight, cuts)
    packed = {"w_q": w_q, "w_k": w_k, "w_v": w_v}
    if bias is not None:
        b_q, b_k, b_v = np.split(np.asarray(bias, dtype=np.float64), cuts)
        packed.update(b_q=b_q, b_k=b_k, b_v=b_v)
    return packed


def torch_mha_mask(attn_mask=None, key_padding_mask=None, *, num_heads: int):
    """nn.MultiheadAttention's attn_mask ([L, S] or [N·H, L, S]) and key_padding_mask ([N, S]) as
    one mask of this contract, broadcasting to [N, H, L, S] (or [L, S]): a boolean true there
    (ignore) becomes false here; float masks are added, as nn.MultiheadAttention adds them, and a
    boolean one meeting a float one becomes 0 / -inf first."""
    parts = []
    if attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.ndim == 3:  # [N·H, L, S], batch-major then head
            mask = mask.reshape(-1, num_heads, *mask.shape[1:])  # [N, H, L, S]
        parts.append(mask)
    if key_padding_mask is not None:
        padding = np.asarray(key_padding_mask)
        parts.append(padding[:, None, None, :])  # [N, 1, 1, S]
    if not parts:
        return None
    if all(p.dtype == bool for p in parts):
        allowed = ~parts[0]
        for p in parts[1:]:
            allowed = allowed & ~p
        return allowed
    total = 0.0
    for p in parts:
        total = total + (np.where(p, -np.inf, 0.0) if p.dtype == bool else p.astype(np.float64))
    return total


# ---- engines' window, sink and key-count parameters, as this contract's options ------------------
#
# Each adapter below takes one engine's parameters, spelled as that engine spells them, and
# returns the options of this contract's core (window, is_causal, query_offset, kv_seqlen,
# sink_tokens, sink_logits) as keyword arguments: `scaled_dot_product_attention(q, k, v, **opts)`
# then sees the keys the engine sees (docs/design.md's table of engines says which, row by row).
# Positions: this contract puts query row i at i + query_offset and key j at j, so an engine that
# aligns its queries with the last key (bottom-right) gets query_offset = keys - queries, per
# sequence where the engine counts keys per sequence. A value the engine cannot mean, or one this
# contract cannot place (a query before key 0), is refused with an AttentionInputError naming it.


def _integer(name: str, x: object, minimum: int) -> int:
    """`x` as an int, or kind "value": an integer >= minimum (2.0 is one; 2.5, NaN, True are not)."""
    if not (is_number(x) and math.isfinite(float(x)) and float(x).is_integer() and x >= minimum):  # type: ignore[arg-type, operator]
        raise AttentionInputError("value", f"{name} must be an integer >= {minimum}, got {describe_value(x)}")
    return int(x)  # type: ignore[call-overload]


def _per_sequence(name: str, values: object, minimum: int) -> list[int]:
    """One integer per sequence ([B]): a list, a tuple or a 1-D numpy array; kind "type" otherwise."""
    if isinstance(values, np.ndarray):
        values = values.tolist()  # a 2-D array's rows become lists: refused below, as in TypeScript
    if not isinstance(values, (list, tuple)):
        raise AttentionInputError(
            "type",
            f"{name} must be an array of integers, one per sequence, got {describe_value(values)}",
        )
    return [_integer(f"{name}[{b}]", x, minimum) for b, x in enumerate(values)]


def _logits(name: str, values: object) -> list[float]:
    """A sink logit per query head, as floats: NaN and infinities pass (the core's rules say what
    they do); anything but a 1-D array of numbers is kind "type"."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise AttentionInputError(
            "type", f"{name} must be an array of numbers, one per query head, got {describe_value(values)}"
        )
    for h, x in enumerate(values):
        if not is_number(x):
            raise AttentionInputError("type", f"{name}[{h}] must be a number, got {describe_value(x)}")
    return [float(x) for x in values]


def _offset(what: str, keys: int, queries: str, query_length: int) -> int:
    """query_offset for queries aligned with the last of `keys` keys (bottom-right)."""
    if keys < query_length:
        raise AttentionInputError(
            "value",
            f"{what} = {keys} is below {queries} = {query_length}: the engine aligns the last query"
            " row with the last key, so row 0 would sit before key 0, where query_offset (>= 0)"
            " cannot place it",
        )
    return keys - query_length


def from_onnxruntime_gqa(
    *,
    sequence_length,
    total_sequence_length,
    seqlens_k,
    local_window_size=-1,
    head_sink=None,
) -> dict:
    """onnxruntime's com.microsoft GroupQueryAttention, over its present_key / present_value:

    - always causal; `local_window_size = w` (default -1: none) shows w keys, the query's own
      included: window (w - 1, 0);
    - `seqlens_k [B]` is the index of each sequence's last valid key (total - 1, so -1 is a
      sequence with no key): kv_seqlen = seqlens_k + 1;
    - the first prompt (`sequence_length == total_sequence_length`) starts at position 0; after
      it each sequence's new rows sit after its past: query_offset = seqlens_k + 1 - S per
      sequence (onnxruntime's `past_seqlen = total_seqlen - sequence_length`);
    - `head_sink [num_heads]`: sink_logits.
    """
    length = _integer("sequence_length", sequence_length, 1)
    total = _integer("total_sequence_length", total_sequence_length, 1)
    counts = [n + 1 for n in _per_sequence("seqlens_k", seqlens_k, -1)]
    window = _integer("local_window_size", local_window_size, -1)
    if window == 0:
        raise AttentionInputError(
            "value", "local_window_size must be -1 (no window) or an integer >= 1, got 0"
        )
    options: dict = {"is_causal": True, "kv_seqlen": counts}
    if window > 0:
        options["window"] = (window - 1, 0)
    if length != total:  # onnxruntime's is_first_prompt is sequence_length == total_sequence_length
        options["query_offset"] = [
            _offset(f"seqlens_k[{b}] + 1", n, "sequence_length", length) for b, n in enumerate(counts)
        ]
    if head_sink is not None:
        options["sink_logits"] = _logits("head_sink", head_sink)
    return options


def _window_side(name: str, x: object) -> int | None:
    """FlashAttention's side of a window: -1 (or None) unbounded, else an integer >= 0."""
    if x is None:
        return None
    side = _integer(name, x, -1)
    return None if side == -1 else side


def from_flash_attention(
    *,
    seqlen_q,
    seqlen_k,
    window_size=(-1, -1),
    causal=False,
    seqused_k=None,
    sink_token_length=0,
    learnable_sink=None,
) -> dict:
    """FlashAttention's `window_size = (left, right)` (-1, or None in its cute interface: that side
    unbounded) and `causal`, which it aligns bottom-right: query row i sits at i + Lk - Lq.
    `seqused_k [B]` counts each sequence's keys (flash_attn_with_kvcache's cache_seqlens after
    the new keys, varlen's seqused_k, the row sums of the tests' key_padding_mask): kv_seqlen,
    and each sequence aligned with its own last key. `causal` makes right 0, as attention_ref does;
    `sink_token_length` (the cute interface's) keeps the first keys beside the window: sink_tokens;
    `learnable_sink [num_heads]`: sink_logits."""
    length_q = _integer("seqlen_q", seqlen_q, 0)
    length_k = _integer("seqlen_k", seqlen_k, 0)
    if not isinstance(window_size, (list, tuple)) or len(window_size) != 2:
        raise AttentionInputError(
            "type", f"window_size must be an array (left, right), got {describe_value(window_size)}"
        )
    left = _window_side("window_size[0]", window_size[0])
    right = _window_side("window_size[1]", window_size[1])
    if not isinstance(causal, (bool, np.bool_)):
        raise AttentionInputError("value", f"causal must be a boolean, got {describe_value(causal)}")
    if causal:
        right = 0
    options: dict = {"is_causal": bool(causal)}
    if left is not None or (right is not None and not causal):
        options["window"] = (left, right)
    aligned = "window" in options or causal
    if seqused_k is not None:
        counts = _per_sequence("seqused_k", seqused_k, 0)
        options["kv_seqlen"] = counts
        if aligned:
            options["query_offset"] = [
                _offset(f"seqused_k[{b}]", n, "seqlen_q", length_q) for b, n in enumerate(counts)
            ]
    elif aligned:
        options["query_offset"] = _offset("seqlen_k", length_k, "seqlen_q", length_q)
    sinks = _integer("sink_token_length", sink_token_length, 0)
    if sinks:
        options["sink_tokens"] = sinks
    if learnable_sink is not None:
        options["sink_logits"] = _logits("learnable_sink", learnable_sink)
    return options


def from_hf_sliding_window(*, sliding_window, is_causal=True, q_offset=0, kv_offset=0) -> dict:
    """HF transformers' `sliding_window` (masking_utils): causal, `sliding_window_overlay` keeps
    `kv_idx > q_idx - sliding_window`, so w keys, the query's own included: window (w - 1, 0);
    bidirectional, `sliding_window_bidirectional_overlay` keeps `|q_idx - kv_idx| <= w`: window
    (w, w). `sliding_window` None: no window (a full-attention layer). sdpa_mask puts query row i
    at `q_offset + i` and key j at `kv_offset + j` (a cache that dropped its first keys has
    kv_offset > 0): query_offset = q_offset - kv_offset."""
    if not isinstance(is_causal, (bool, np.bool_)):
        raise AttentionInputError("value", f"is_causal must be a boolean, got {describe_value(is_causal)}")
    options: dict = {"is_causal": bool(is_causal)}
    if sliding_window is not None:
        w = _integer("sliding_window", sliding_window, 1)
        options["window"] = (w - 1, 0) if is_causal else (w, w)
    queries, keys = _integer("q_offset", q_offset, 0), _integer("kv_offset", kv_offset, 0)
    if queries < keys:
        raise AttentionInputError(
            "value",
            f"q_offset = {queries} is below kv_offset = {keys}: query row 0 would sit before key 0,"
            " where query_offset (>= 0) cannot place it",
        )
    if queries > keys:
        options["query_offset"] = queries - keys
    return options


def from_jax_js(*, localWindowSize=None, isCausal=False, keyValueSeqLengths=None) -> dict:
    """jax-js's nn.dotProductAttention options (src/library/nn.ts), spelled as jax-js spells them.
    `localWindowSize` `[before, after]` keeps keys i - before .. i + after, and a single number w
    means [w, w] (symmetric, not w keys back); its masks are aligned top-left (row i at position
    i). `keyValueSeqLengths [B]` counts each sequence's keys: kv_seqlen."""
    if not isinstance(isCausal, (bool, np.bool_)):
        raise AttentionInputError("value", f"isCausal must be a boolean, got {describe_value(isCausal)}")
    options: dict = {"is_causal": bool(isCausal)}
    if localWindowSize is not None:
        if isinstance(localWindowSize, (list, tuple)):
            if len(localWindowSize) != 2:
                raise AttentionInputError(
                    "type",
                    "localWindowSize must be an integer or an array [before, after], got an array"
                    f" of {len(localWindowSize)}",
                )
            before = _integer("localWindowSize[0]", localWindowSize[0], 0)
            after = _integer("localWindowSize[1]", localWindowSize[1], 0)
        else:
            before = after = _integer("localWindowSize", localWindowSize, 0)
        options["window"] = (before, after)
    if keyValueSeqLengths is not None:
        options["kv_seqlen"] = _per_sequence("keyValueSeqLengths", keyValueSeqLengths, 0)
    return options


def from_onnx_attention(
    *, q_sequence_length, nonpad_kv_seqlen=None, is_causal=False, past_sequence_length=None
) -> dict:
    """The ONNX Attention operator's `nonpad_kv_seqlen [B]`, a count of valid keys (not
    onnxruntime GQA's index of the last one): kv_seqlen. Its causal mask is aligned as the
    reference implementation (onnx/reference/ops/op_attention.py) aligns it: after past_key's
    `past_sequence_length` keys, else after `nonpad_kv_seqlen[b] - q_sequence_length` keys per
    sequence (an external cache), else from key 0."""
    length = _integer("q_sequence_length", q_sequence_length, 0)
    if not isinstance(is_causal, (bool, np.bool_)):
        raise AttentionInputError("value", f"is_causal must be a boolean, got {describe_value(is_causal)}")
    options: dict = {"is_causal": bool(is_causal)}
    counts = None
    if nonpad_kv_seqlen is not None:
        counts = _per_sequence("nonpad_kv_seqlen", nonpad_kv_seqlen, 0)
        options["kv_seqlen"] = counts
    if past_sequence_length is not None:
        past = _integer("past_sequence_length", past_sequence_length, 0)
        if is_causal and past:
            options["query_offset"] = past
    elif is_causal and counts is not None:
        options["query_offset"] = [
            _offset(f"nonpad_kv_seqlen[{b}]", n, "q_sequence_length", length) for b, n in enumerate(counts)
        ]
    return options


def from_gpt_oss(*, sliding_window=0, sinks=None) -> dict:
    """gpt-oss's attention (gpt_oss/torch/model.py, `sdpa`): causal; `sliding_window = w > 0` adds
    -inf on `tril(diagonal=-w)`, hiding keys w or more back, so w keys, the query's own included:
    window (w - 1, 0); 0 is full attention. `sinks [num_attention_heads]` (the learned logit
    concatenated to each row before the softmax, then dropped): sink_logits."""
    w = _integer("sliding_window", sliding_window, 0)
    options: dict = {"is_causal": True}
    if w > 0:
        options["window"] = (w - 1, 0)
    if sinks is not None:
        options["sink_logits"] = _logits("sinks", sinks)
    return options
