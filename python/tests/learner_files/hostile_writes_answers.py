"""A hostile learner: its function returns zeros, and writes a right answer for the first case
straight to check's answer descriptor (named on its command line), hoping that is read instead."""

import json
import os
import sys

from attention_port.reference import scaled_dot_product_attention as right


def scaled_dot_product_attention(query, key, value):
    fd = int(sys.argv[sys.argv.index("--answers-fd") + 1])
    output = right(query, key, value)
    written = {"shape": [3, 2], "data": output.ravel().tolist()}
    forged = {"id": "tutorial_seq3_dk4", "steps": {"output": written}}
    os.write(fd, (json.dumps(forged) + "\n").encode())
    return (output * 0).tolist()
