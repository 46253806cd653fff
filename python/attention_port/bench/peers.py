"""The attention graph the onnxruntime peers run, built with the `onnx` package.

The bench's peers are what a JavaScript engineer would pick instead of this project's ports:
onnxruntime-node (native CPU provider) and onnxruntime-web (its WebAssembly backend, in Node).
Both run the same ONNX graph, single-head self-attention on [n, d] inputs with n and d left
symbolic, so one file per (d, dtype, causal) serves every n:

    scores  = MatMul(query, Transpose(key))                      [n, n]
    logits  = Mul(scores, scale)                                 [n, n]    scale = 1/sqrt(d), an input
    logits  = Add(logits, Trilu(ConstantOfShape(-inf), k=1))     [n, n]    causal only
    weights = Softmax(logits, axis=-1)                           [n, n]
    output  = MatMul(weights, value)                             [n, d]

A windowed cell (window (left, 0), causal) adds one more bias of -inf, below the band:
Trilu(ConstantOfShape(-inf), k=-(left + 1), lower) hides key j from query i where j < i - left;
a windowed decode step hides the keys before its window, Where(Range(keys) < keys - 1 - left,
-inf, 0) over [Lk]. So the peer computes every score and masks the window's outside, as a graph
without a window operator does (the standard Attention operator has none either).

scale is an input, not a constant: onnxruntime's optimizer folds a constant scale into the float32
`alpha` of a FusedMatMul, and a float64 graph then loses about 7 digits wherever 1/sqrt(d) is not
exact in float32 (d = 80: the bench's check catches it). bench/worker.ts feeds it with every run.

The standard Attention operator (opset 23) would say the same in one node, but onnxruntime's CPU
provider computes it in float32 only, and the peers are measured in float64 too.

The bench-only packages (`onnx` from PyPI; onnxruntime-node and onnxruntime-web from npm, pinned in
typescript/bench-peers/package-lock.json) are installed by `scripts/bench` on first use, not by
scripts/setup.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attention_port.paths import BENCH_PEERS as PEERS_FOLDER

OPSET = 21  # Trilu, ConstantOfShape and Softmax over the last axis in every onnxruntime >= 1.18
ONNX_DTYPES = ("float64", "float32")


def peers_missing() -> str | None:
    """Why the peers cannot run here, or None when everything they need is installed."""
    missing = [
        name for name in ("onnxruntime-node", "onnxruntime-web")
        if not (PEERS_FOLDER / "node_modules" / name / "package.json").is_file()
    ]  # fmt: skip
    try:
        import onnx  # noqa: F401
    except ImportError:
        missing.append("onnx (Python)")
    if missing:
        return f"{', '.join(missing)} not installed (scripts/bench installs the bench-only peers)"
    return None


def _window_name(left: int | None) -> str:
    return "" if left is None else f"-w{left}-0"


def model_name(d: int, dtype: str, causal: bool, left: int | None = None) -> str:
    """bench/worker.ts spells it too; `left`: a windowed graph's window (left, 0)."""
    return f"attention-d{d}-{dtype}-{'causal' if causal else 'full'}{_window_name(left)}.onnx"


def decode_model_name(hq: int, hkv: int, e: int, dtype: str, left: int | None = None) -> str:
    return f"decode-h{hq}-kv{hkv}-e{e}-{dtype}{_window_name(left)}.onnx"  # bench/worker.ts spells it too


def write_models(
    folder: Path,
    features: list[int],
    decode_heads: list[tuple[int, int, int]] = (),
    prefill_windows: list[tuple[int, int]] = (),
    decode_windows: list[tuple[int, int, int, int]] = (),
) -> None:
    """One model file in `folder` for every d in `features`, dtype and causal setting, one
    decode graph for every (hq, hkv, e) in `decode_heads` and dtype, and the windowed ones: a
    causal prefill for every (d, left) in `prefill_windows`, a decode step for every
    (hq, hkv, e, left) in `decode_windows`."""
    import onnx

    def save(model, name: str) -> None:
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, folder / name)

    for dtype in ONNX_DTYPES:
        for d in features:
            for causal in (False, True):
                save(attention_model(dtype, causal), model_name(d, dtype, causal))
        for hq, hkv, e in decode_heads:
            save(decode_model(dtype, hq, hkv, e), decode_model_name(hq, hkv, e, dtype))
        for d, left in prefill_windows:
            save(attention_model(dtype, True, left), model_name(d, dtype, True, left))
        for hq, hkv, e, left in decode_windows:
            save(decode_model(dtype, hq, hkv, e, left), decode_model_name(hq, hkv, e, dtype, left))


def decode_model(dtype: str, hq: int, hkv: int, e: int, left: int | None = None):
    """One decode step with grouped-query heads, the keys' count symbolic: each key/value head
    serves hq / hkv consecutive query heads, so the query is read as [1, hkv, group, e] (no copy of
    key or value per query head, as a decoder's graph has it):

        q       = Reshape(query, [1, hkv, group, e])        query [1, hq, 1, e]
        scores  = MatMul(q, Transpose(key))                  [1, hkv, group, Lk]
        weights = Softmax(Mul(scores, scale), axis=-1)       [1, hkv, group, Lk]
        output  = Reshape(MatMul(weights, value), [1, hq, 1, e])

    With `left`, the keys before the step's window (left, 0) get -inf: the row is the last key's.
    """
    from onnx import TensorProto, helper, numpy_helper

    element = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT}[dtype]
    inputs = [
        helper.make_tensor_value_info("query", element, [1, hq, 1, e]),
        helper.make_tensor_value_info("key", element, [1, hkv, "keys", e]),
        helper.make_tensor_value_info("value", element, [1, hkv, "keys", e]),
        helper.make_tensor_value_info("scale", element, []),
    ]
    output = helper.make_tensor_value_info("output", element, [1, hq, 1, e])
    constants = [
        numpy_helper.from_array(np.array([1, hkv, hq // hkv, e], dtype=np.int64), "grouped"),
        numpy_helper.from_array(np.array([1, hq, 1, e], dtype=np.int64), "heads"),
    ]
    nodes = [
        helper.make_node("Reshape", ["query", "grouped"], ["q"]),  # [1, hkv, group, e]
        helper.make_node("Transpose", ["key"], ["key_t"], perm=[0, 1, 3, 2]),  # [1, hkv, e, Lk]
        helper.make_node("MatMul", ["q", "key_t"], ["scores"]),  # [1, hkv, group, Lk]
        helper.make_node("Mul", ["scores", "scale"], ["logits"]),
    ]
    if left is not None:
        constants += [
            numpy_helper.from_array(np.array(2, dtype=np.int64), "key_axis"),
            numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"),
            numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
            numpy_helper.from_array(np.array(left + 1, dtype=np.int64), "window_keys"),
            numpy_helper.from_array(np.array(-np.inf, dtype=dtype), "minus_inf"),
            numpy_helper.from_array(np.array(0, dtype=dtype), "no_bias"),
        ]
        nodes += [
            helper.make_node("Shape", ["key"], ["key_shape"]),
            helper.make_node("Gather", ["key_shape", "key_axis"], ["keys"]),  # Lk
            helper.make_node("Range", ["zero", "keys", "one"], ["positions"]),  # [Lk]
            helper.make_node("Sub", ["keys", "window_keys"], ["first"]),  # the window's first key
            helper.make_node("Less", ["positions", "first"], ["hidden"]),  # [Lk]
            helper.make_node("Where", ["hidden", "minus_inf", "no_bias"], ["window_bias"]),  # [Lk]
            helper.make_node("Add", ["logits", "window_bias"], ["windowed_logits"]),
        ]
    nodes += [
        helper.make_node("Softmax", ["logits" if left is None else "windowed_logits"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "value"], ["grouped_output"]),  # [1, hkv, group, e]
        helper.make_node("Reshape", ["grouped_output", "heads"], ["output"]),  # [1, hq, 1, e]
    ]
    graph = helper.make_graph(nodes, "decode", inputs, [output], constants)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)


def attention_model(dtype: str, causal: bool, left: int | None = None):
    """The graph above for one dtype (float64 or float32) and causal setting; with `left`, the
    windowed causal graph (window (left, 0))."""
    from onnx import TensorProto, helper, numpy_helper

    element = {"float64": TensorProto.DOUBLE, "float32": TensorProto.FLOAT}[dtype]
    inputs = [helper.make_tensor_value_info(name, element, ["n", "d"]) for name in ("query", "key", "value")]
    inputs.append(helper.make_tensor_value_info("scale", element, []))
    output = helper.make_tensor_value_info("output", element, ["n", "d"])
    nodes = [
        helper.make_node("Transpose", ["key"], ["key_t"], perm=[1, 0]),  # [d, n]
        helper.make_node("MatMul", ["query", "key_t"], ["scores"]),  # [n, n]
        helper.make_node("Mul", ["scores", "scale"], ["logits"]),  # [n, n]
    ]
    if causal:
        # -inf strictly above the diagonal, 0 on and below it: query i sees keys j <= i.
        minus_inf = numpy_helper.from_array(np.array([-np.inf], dtype=dtype))
        constants = [numpy_helper.from_array(np.array(1, dtype=np.int64), "one")]
        nodes += [
            helper.make_node("Shape", ["logits"], ["logits_shape"]),
            helper.make_node("ConstantOfShape", ["logits_shape"], ["minus_inf"], value=minus_inf),  # [n, n]
            helper.make_node("Trilu", ["minus_inf", "one"], ["causal_bias"], upper=1),  # [n, n]
        ]
        bias = "causal_bias"
        if left is not None:
            # -inf where j <= i - left - 1, the keys the window leaves behind.
            constants.append(numpy_helper.from_array(np.array(-(left + 1), dtype=np.int64), "band"))
            nodes += [
                helper.make_node("Trilu", ["minus_inf", "band"], ["past_bias"], upper=0),  # [n, n]
                helper.make_node("Add", ["causal_bias", "past_bias"], ["window_bias"]),  # [n, n]
            ]
            bias = "window_bias"
        nodes.append(helper.make_node("Add", ["logits", bias], ["masked_logits"]))  # [n, n]
    nodes += [
        helper.make_node("Softmax", ["masked_logits" if causal else "logits"], ["weights"], axis=-1),
        helper.make_node("MatMul", ["weights", "value"], ["output"]),  # [n, d]
    ]
    graph = helper.make_graph(nodes, "attention", inputs, [output], constants if causal else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10)
