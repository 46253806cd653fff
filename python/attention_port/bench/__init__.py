"""`attention-port bench`: every port and the peers a JavaScript engineer would pick instead, timed
side by side on the same inputs, each in a process of its own, every output checked before its
time is reported.

    run.py     the command: the port table, the inputs, one worker process per port, memory passes
    worker.py  the Python worker (numpy, torch); typescript/bench/worker.ts is its Node twin
    peers.py   the attention graph for onnxruntime, built with the `onnx` package
    check.py   each output against numpy float64 under compare.py's rule; the targets
    report.py  bench.md, bench.json, bench.png and the machine they ran on
    gpu.py     `scripts/gpu-bench`: torch's fused kernel against torch_port on a CUDA GPU

The CLI imports this package only when `bench` runs.
"""
