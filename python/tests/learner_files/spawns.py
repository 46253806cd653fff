"""A learner whose code starts a process and leaves it running, then computes the right answer. The
process is `sleep 296.5`, a length no other process uses, so a test can look for it."""

import subprocess

from attention_port.reference import scaled_dot_product_attention as right


def scaled_dot_product_attention(query, key, value):
    subprocess.Popen(["sleep", "296.5"])
    return right(query, key, value)
