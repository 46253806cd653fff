"""A learner that returns an array-like object whose tolist raises, so that reading it runs code."""


class Unready:
    def tolist(self):
        raise RuntimeError("the output is not ready")


def scaled_dot_product_attention(query, key, value):
    return Unready()
