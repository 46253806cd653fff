"""A learner that returns a list that holds itself."""


def scaled_dot_product_attention(query, key, value):
    output = []
    output.append(output)
    return output
