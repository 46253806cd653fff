"""A learner whose code computes the right answer, but first takes 6 GiB and holds on to it."""

import numpy as np

from attention_port.reference import scaled_dot_product_attention as right

HELD = []


def scaled_dot_product_attention(query, key, value):
    while len(HELD) < 96:
        HELD.append(np.ones(8 << 20))  # 64 MiB, written to: real memory, not a reservation
    return right(query, key, value)
