"""Every file generated from contract/ is what the declaration gives (`attention-port contract`)."""

import json

from attention_port.pages import generated


def test_every_generated_file_is_fresh():
    assert generated.stale() == [], "run `attention-port contract` (scripts/generate-contract)"


def test_the_fixture_schema_params_hold_each_option_to_its_declaration():
    # The params a valid case may hold, from contract/options.json: the options of every case
    # required, each of its type and range, a value of None only where the option takes it.
    import jsonschema

    from attention_port.pages import fixture_schema

    valid, raw = fixture_schema.params()
    # The params refer to the schema's own $defs (a number as the tensors write it, nested integers).
    defs = json.loads(fixture_schema.render_case_schema())["$defs"]
    valid, raw = {**valid, "$defs": defs}, {**raw, "$defs": defs}
    plain = {"is_causal": False, "scale": None, "enable_gqa": False, "softcap": 0.0}
    jsonschema.validate({**plain, "query_offset": 3}, valid)
    jsonschema.validate(
        {**plain, "query_offset": [[1], [2]], "kv_seqlen": [0, 5], "window": [3, None]}, valid
    )
    jsonschema.validate({**plain, "sink_logits": [1.5, "NaN", "-Infinity"], "sink_tokens": 2}, valid)
    wrong = [
        {**plain, "query_offset": -1},  # below its minimum
        {**plain, "query_offset": 2.5},  # not an integer
        {**plain, "query_offset": 2**53},  # above its maximum
        {**plain, "query_offset": [1, -1]},  # one of them below its minimum
        {**plain, "kv_seqlen": [[1.5]]},  # not integers
        {**plain, "window": [1]},  # not a pair
        {**plain, "window": [-1, 0]},  # a side below its minimum
        {**plain, "sink_logits": ["x"]},  # a string that is no number
        {**plain, "sink_tokens": None},  # not nullable
        {**plain, "softcap": -1.0},
        {**plain, "softcap": None},  # softcap is not nullable, scale is
        {**plain, "is_causal": 1},
        {key: value for key, value in plain.items() if key != "scale"},  # an option of every case missing
        {**plain, "memory_limit": 1.0},  # no fixture holds it
    ]
    for params in wrong:
        assert not jsonschema.Draft202012Validator(valid).is_valid(params), params
    # An invalid case's params may hold anything, but only the options' names.
    jsonschema.validate({**plain, "softcap": "x", "query_offset": -1}, raw)
    assert not jsonschema.Draft202012Validator(raw).is_valid({**plain, "memory_limit": 1.0})
