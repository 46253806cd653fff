# A learner whose code holds twelve shared anonymous mappings of 256 MiB, every page written: 3 GiB
# that a bound on the data segment alone (RLIMIT_DATA) does not count.
import mmap

held = []


def scaled_dot_product_attention(query, key, value):
    for _ in range(12):
        block = mmap.mmap(-1, 256 << 20)
        for offset in range(0, len(block), mmap.PAGESIZE):
            block[offset] = 1
        held.append(block)
    return [[0.0] * len(value[0]) for _ in query]
