"""A learner who prints 3 MB on its first case (a whole tensor in a loop, say)."""

from attention_port.reference import scaled_dot_product_attention as right

first = [True]


def scaled_dot_product_attention(query, key, value):
    if first:
        first.clear()
        for n in range(30_000):
            print(f"{n} ".ljust(99, "x"))
    return right(query, key, value)
