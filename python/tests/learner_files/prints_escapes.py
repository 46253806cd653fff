"""A learner who prints terminal escape codes (clear the screen, red text) and a carriage return."""

from attention_port.reference import scaled_dot_product_attention as right


def scaled_dot_product_attention(query, key, value):
    print("\x1b[2J\x1b[31mred\x1b[0m\rover")
    return right(query, key, value)
