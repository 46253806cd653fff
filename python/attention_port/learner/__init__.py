"""`attention-port check`: a learner's own attention, run in a process of its own (runner.py and
its entry point worker.py, speaking protocol.py), judged level by level (check.py), with its
mistakes named (mistakes.py)."""
