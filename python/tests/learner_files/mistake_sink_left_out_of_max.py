"""A learner file with one mistake: sink_left_out_of_max. The row's max is taken over the keys
alone, so a sink of +inf gives exp(inf) in the sum and weights of 0 instead of nan: an edge case.
Bad input is refused by the project's reference, whose answer is not used, so that check reaches
the edge-case level."""

from learner_base import make_attention

from attention_port.reference import scaled_dot_product_attention as project_port

attention = make_attention("sink_left_out_of_max")


def scaled_dot_product_attention(query, key, value, attn_mask=None, **options):
    project_port(query, key, value, attn_mask, **options)
    return attention(query, key, value, attn_mask, **options)
