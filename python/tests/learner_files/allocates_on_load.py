# A learner whose file allocates 3 GiB when it is imported, past check's default 2 GiB.
import numpy as np

TABLE = np.ones(3 << 27)  # 3 GiB of float64


def scaled_dot_product_attention(query, key, value):
    return value
