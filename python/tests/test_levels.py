"""The check levels as records (contract/levels.json): each case on the level it was on when the
levels were code, each level on cases of the functions it runs on, and every field of a record
naming something that exists."""

from collections import Counter

from attention_port import contract
from attention_port.golden import cases
from attention_port.learner import check, lesson
from attention_port.learner.runner import Hello
from attention_port.pages import levels as pages

# Every case's level, by name, as cases.py computed it before the levels were records (the core's by
# the tags LEVELS named, the layer's and RoPE's by `len(LEVELS) + 3 if "cache" ... else 1`). A case
# added since is held by the tests below only; a level added since renumbers those after it, which
# this does not mind, and moves the cases that carry its tags, which must be written here.
TODAYS_LEVELS = {
    "the tutorial example": "tutorial_seq3_dk4 tutorial_seq4_dk8 tutorial_square_key",
    "plain rank-2": "rank2_square single_query long_sequence rank2_wide_features length_one",
    "numerical stability (large logits)": (
        "large_logits tiny_logits large_logits_both_signs large_logits_far_apart"
    ),
    "boolean masks": (
        "bool_mask_rank2 bool_mask_one_key_each bool_mask_logits_below_sentinel bool_mask_mostly_open"
    ),
    "float masks and -inf": "float_mask_with_neg_inf float_mask_large_finite float_mask_biases",
    "fully-masked rows": "fully_masked_row_bool fully_masked_rows_float fully_masked_first_row_bool",
    "causal": "causal_with_float_mask causal_rank2 causal_rank2_with_bool_mask",
    "batch and heads": (
        "rank3_heads rank5_two_batch_dims bool_padding_mask causal_square causal_with_bool_mask "
        "fully_masked_row_float single_key mask_broadcast_rank1 mask_broadcast_rank2 mask_broadcast_rank3 "
        "mask_broadcast_rank4 bool_mask_full_shape bool_mask_rows bool_mask_per_batch float_mask_per_head "
        "real_model_heads"
    ),
    "cross-attention (Lq != Lk, Ev != E)": (
        "rank4_batch_heads cross_attention cross_attention_more_queries value_features_smaller "
        "value_features_larger causal_wide causal_tall long_sequence_causal_masked causal_float_mask_rows"
    ),
    "grouped-query heads": "gqa_4q_2kv mqa_4q_1kv gqa_causal_masked gqa_equal_heads gqa_6q_3kv",
    "scale and softcap": (
        "scale_custom scale_zero scale_negative softcap softcap_with_mask everything_at_once "
        "softcap_scale large_scale"
    ),
    "decoding after a cache (query_offset)": (
        "decode_step_one_query decode_step_gqa decode_chunk_offset_p decode_chunk_offset_p_minus_1 "
        "decode_chunk_offset_p_plus_1 decode_empty_cache decode_fully_masked_row decode_long_context "
        "decode_speculative_rows decode_offset_past_keys decode_offset_without_causal"
    ),
    "invalid input": (
        "error_query_rank1 error_rank_mismatch error_feature_mismatch error_key_value_length_mismatch "
        "error_key_batch_mismatch error_value_batch_mismatch error_heads_without_gqa "
        "error_gqa_not_multiple error_key_value_heads_differ error_zero_features "
        "error_mask_not_broadcastable error_mask_rank_too_high error_mask_scalar error_ragged_query "
        "error_ragged_key_depth error_ragged_mask error_ragged_value_scalar_row error_query_string "
        "error_value_null error_key_boolean error_mask_mixed error_mask_string error_scale_nan "
        "error_scale_infinite error_softcap_negative error_is_causal_string error_enable_gqa_number "
        "error_query_offset_negative error_query_offset_fraction error_query_offset_nan "
        "error_query_offset_boolean error_query_offset_too_large error_options_before_shapes "
        "error_enable_gqa_string error_scale_string error_softcap_infinite error_query_before_key "
        "error_query_boolean error_mask_before_shapes error_query_scalar"
    ),
    "edge cases (empty dims, NaN and +-inf, float64's extremes)": (
        "empty_queries empty_keys nan_in_query nan_in_value empty_queries_rank2 inf_in_value "
        "softcap_tiny_ratio softcap_huge_ratio inf_in_value_masked infinite_logits "
        "infinite_scores_softcap subnormal_outputs subnormal_weights value_near_largest score_overflow "
        "logits_tie_in_float64 fully_masked_bool_nan_inf_value fully_masked_float_nan_inf_value "
        "fully_masked_causal_nan_inf_value inf_times_zero_in_scores inf_times_zero_scale "
        "nan_score_bool_masked nan_score_causal nan_score_float_neg_inf empty_heads empty_batch_causal "
        "gqa_empty_query_heads"
    ),
    "the layer (projections, heads, merge, out-projection)": (
        "layer_self layer_self_bias_batch layer_cross_dkv layer_gqa layer_fully_masked_row "
        "layer_fully_masked_no_bias layer_weights_per_head layer_mask_polarity_trap "
        "layer_float_one_zero_trap layer_real_model_two_heads error_layer_weight_untransposed "
        "error_layer_heads_not_dividing error_layer_key_rows"
    ),
    "RoPE (rotary position embeddings)": (
        "layer_rope_half_split layer_rope_interleaved_partial rope_half_split rope_interleaved "
        "rope_partial rope_batched_positions error_layer_rope_odd error_layer_rope_cross "
        "error_rope_positions_length"
    ),
    "decoding with the layer's KV cache (past_key, past_value)": (
        "layer_decode_one_token layer_decode_chunk layer_decode_gqa_cache layer_decode_rope_full "
        "layer_decode_rope_offset layer_decode_fully_masked_row layer_decode_mask_over_cache "
        "layer_decode_empty_cache error_layer_past_without_value error_layer_past_expanded_heads "
        "error_layer_past_features error_layer_past_batch"
    ),
}


def test_every_case_is_on_the_level_it_was_on_when_the_levels_were_code():
    by_id = {case.id: case for case in cases.FIXTURE_CASES}
    for name, ids in TODAYS_LEVELS.items():
        for case_id in ids.split():
            assert cases.LEVELS[cases.level_of(by_id[case_id].tags) - 1].name == name, case_id


def test_every_case_is_on_a_level_that_runs_its_kind_of_function():
    function = {"attention": "function", "layer": "layer", "rope": "rotary"}
    for case in cases.FIXTURE_CASES:
        level = cases.LEVELS[cases.level_of(case.tags) - 1]
        assert function[case.kind] in level.needs, (case.id, level.name)


def test_every_level_holds_a_few_cases_and_the_cores_come_first():
    counts = Counter(cases.level_of(case.tags) for case in cases.FIXTURE_CASES)
    assert set(counts) == {level.number for level in cases.LEVELS}, counts
    assert min(counts.values()) >= 2, counts
    core = [level.number for level in cases.CORE_LEVELS]
    assert core == list(range(1, len(core) + 1)), core  # the kit's levels are 1 to N
    assert [level.number for level in cases.LAYER_LEVELS] == list(range(len(core) + 1, len(cases.LEVELS) + 1))


def test_every_field_of_a_record_names_what_exists():
    records = contract.load("levels")["levels"]
    assert len({record["name"] for record in records}) == len(records)
    assert [level.number for level in cases.LEVELS if level.plain] == [cases.PLAIN_LEVEL]
    assert cases.LEVELS[cases.PLAIN_LEVEL - 1].tags == ()  # a tag of its own would be a second way in
    hello = set(contract.load("learner-protocol")["hello"])
    fields = {"name", "tags", "plain", "needs", "teaches", "places", "adds", "catches"}
    for record, level in zip(records, cases.LEVELS, strict=True):
        assert set(record) <= fields, record["name"]
        assert set(level.tags) <= set(cases.TAGS), level.name
        assert level.needs and set(level.needs) <= hello, level.name
        assert level.places and set(level.places) <= set(lesson.PLACES), level.name
        assert level.adds and level.catches, level.name
    assert all(level.teaches for level in cases.CORE_LEVELS)  # --start lists what each teaches


def test_each_levels_places_are_code_lines_of_the_lesson_in_both_languages():
    for level in cases.LEVELS:
        for topic in level.places:
            for language in ("JavaScript", "Python"):
                where = lesson.place(topic, language)
                assert where is not None, (level.name, topic, language)
                file, line = where.split(" line ")
                lines = (lesson.REPO_ROOT / file).read_text(encoding="utf-8").splitlines()
                text = lines[int(line) - 1].strip()
                assert text and not text.startswith(("//", "#", "*")), (level.name, topic, text)


def test_check_runs_the_levels_whose_functions_a_file_has():
    def runs(**functions):
        found = {"function": None, **functions}
        hello = Hello(takes_options=True, option_names=None, language="JavaScript", **found)
        return [level.number for level in cases.LEVELS if check.runs_on(level, hello)]

    records = list(enumerate(contract.load("levels")["levels"], start=1))
    core = [n for n, record in records if record["needs"] == ["function"]]
    layered = [n for n, record in records if record["needs"] == ["layer", "rotary"]]
    assert len(core) + len(layered) == len(records) and max(core) < min(layered)
    assert runs(function="scaledDotProductAttention") == core
    assert runs(layer="multiHeadAttention") == runs(rotary="applyRotary") == layered
    assert runs(function="attentionSteps", rotary="applyRotary") == [*core, *layered]


def test_a_level_that_teaches_its_name_points_at_its_step_of_the_layers_lesson():
    for language, file in lesson.LAYER_LESSONS.items():
        shown = file.relative_to(lesson.REPO_ROOT)
        for level in cases.LAYER_LEVELS:
            guide = check.level_guide(level.number, language)
            assert guide.startswith(f"Level {level.number} teaches {level.name}. Read {shown} line "), guide
        core = check.level_guide(4, language)
        assert " (mask), " in core and core.endswith(" (bool mask)."), core


def test_the_docs_table_has_a_row_for_every_level():
    rows = [line for line in pages.learn_table() if line.startswith("| ") and line[2].isdigit()]
    assert [int(row.split(" | ")[0].removeprefix("| ")) for row in rows] == [
        level.number for level in cases.LEVELS
    ]
    assert all(row.count(" | ") == 3 for row in rows), rows  # four cells, none empty or split


def test_a_case_that_sets_a_window_sink_or_key_count_carries_its_tag_so_it_waits_for_its_level():
    # A case lands on the last level its tags name: one that sets kv_seqlen without `ragged` would
    # meet a learner on the windows' level, before the level that teaches key counts.
    unset = cases.UNSET
    for case in cases.FIXTURE_CASES:
        if case.kind != "attention" or "error" in case.tags:
            continue
        ragged = case.kv_seqlen not in (unset, None) or isinstance(case.query_offset, (list, tuple))
        sinks = case.sink_tokens not in (unset, 0) or case.sink_logits not in (unset, None)
        for tag, sets in (("window", case.window not in (unset, None)), ("sinks", sinks), ("ragged", ragged)):
            assert not sets or tag in case.tags, (case.id, tag)
