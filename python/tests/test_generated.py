"""Every file generated from contract/ is what the declaration gives (`attention-port contract`)."""

from attention_port.pages import generated


def test_every_generated_file_is_fresh():
    assert generated.stale() == [], "run `attention-port contract` (scripts/generate-contract)"
