"""A learner who prints while debugging, on stdout and stderr, and computes the right answer."""

import sys

from attention_port.reference import scaled_dot_product_attention as right

print("loaded")


def scaled_dot_product_attention(query, key, value):
    print(f"query has {len(query)} rows")
    print(f"key has {len(key)} rows", file=sys.stderr)
    return right(query, key, value)
