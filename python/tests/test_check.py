"""`attention-port check`: the levels, the project's own ports, named mistakes and bad learner code.

The learner files under learner_files/ are written as learners would write them, independently of
mistakes.py: a file with one mistake must be told that mistake, and only that one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import ALL_CASES, FIXTURES_DIR

from attention_port import cli
from attention_port.golden import cases
from attention_port.golden.reader import load_fixtures
from attention_port.learner import check, layer_mistakes, lesson, mistakes
from attention_port.learner.protocol import options_set
from attention_port.learner.runner import LearnerProcess, Reply

LEARNER_FILES = Path(__file__).parent / "learner_files"
REPO_ROOT = Path(__file__).resolve().parents[2]
TOTAL = len(cases.CORE_LEVELS)  # the attention core's levels, the first ones


def run_check(
    name: str, *, timeout: float = 10.0, run_all: bool = False, dtype: str = "float64"
) -> tuple[int, str]:
    path = name if os.path.isabs(name) or "/" in name else LEARNER_FILES / name
    lines: list[str] = []
    code = check.check(
        Path(path),
        FIXTURES_DIR,
        timeout=timeout,
        run_all=run_all,
        dtype=dtype,
        say=lines.append,
        say_error=lines.append,
    )
    return code, "\n".join(lines)


def level_number(name: str) -> int:
    return next(n for n, level in enumerate(cases.LEVELS, start=1) if level.name == name)


# ---- levels ------------------------------------------------------------------------------------


def test_every_case_has_one_level_and_every_level_a_few_cases():
    counts = Counter(cases.level_of(case.tags) for case in cases.CASES)
    assert set(counts) == set(range(1, TOTAL + 1)), counts
    assert min(counts.values()) >= 2, counts


def test_levels_follow_the_order_a_learner_builds_them():
    names = [level.name for level in cases.CORE_LEVELS]
    assert names[0] == "the tutorial example" and names[-1].startswith("edge cases")
    assert names.index("boolean masks") < names.index("causal") < names.index("batch and heads")
    assert cases.level_of(("tutorial", "rank2")) == 1
    assert cases.level_of(("rank2",)) == cases.PLAIN_LEVEL == 2
    assert cases.level_of(("rank4", "gqa", "causal", "error")) == level_number("invalid input")


# ---- the project's own ports pass every level ---------------------------------------------------

PROJECT_PORTS = [
    "typescript/src/attention.ts",
    "typescript/src/flash.ts",
    "typescript/src/simd-node.ts",  # simd.ts with Node's host (simd.ts alone loads its kernel by initSimd)
    "python/attention_port/reference.py",
]


@pytest.mark.parametrize("port", PROJECT_PORTS)
def test_the_projects_ports_as_they_are_pass_every_level(port):
    # The port's own file, no flag: zero-size tensors reach it with their shape ({shape, data} in
    # JavaScript, a numpy array in Python), so empty queries, keys, heads and batches keep their rank.
    code, text = run_check(str(REPO_ROOT / port))
    assert code == 0, text
    assert "not attempted" not in text and "fail" not in text and "crash" not in text, text
    for n in range(1, TOTAL + 1):
        assert f"level {n} of {TOTAL}: " in text
    invalid = [c for c in ALL_CASES if c.expects_error]  # query_offset's among them
    assert text.count(", as the project's ports)") == len(invalid)  # the right kind, every time
    assert f"invalid input — {len(invalid)} of {len(invalid)} refused\n" in text, text
    assert text.endswith(f"Every case of all {TOTAL} levels passes."), text
    empty = [c.id for c in ALL_CASES if "empty" in c.tags and not c.expects_error]
    assert {"empty_queries", "empty_keys", "empty_heads"} <= set(empty)


# ---- the layer's and RoPE's levels ----------------------------------------------------------------

LAYER_LEVEL, ROPE_LEVEL, CACHE_LEVEL = (level.name for level in cases.LAYER_LEVELS)
LAYERED_TOTAL = len(cases.LEVELS)
LAYER_CASES = list(load_fixtures(FIXTURES_DIR, kinds=("layer", "rope")))
CACHE_CASES = [c for c in LAYER_CASES if "cache" in c.tags]


def test_every_layer_and_rope_case_is_on_one_of_the_three_levels_after_the_core():
    levels = Counter(cases.level_of(case.tags) for case in LAYER_CASES)
    assert set(levels) == {TOTAL + 1, TOTAL + 2, TOTAL + 3}, levels
    assert all(cases.level_of(c.tags) == TOTAL + 3 for c in CACHE_CASES)
    rotating = [c for c in LAYER_CASES if "rope" in c.tags and c not in CACHE_CASES]
    assert all(cases.level_of(c.tags) == TOTAL + 2 for c in rotating)
    assert min(levels.values()) >= 5, levels
    # The cache's level holds decoding with a past, RoPE after a past, and refusals of a bad past.
    assert any(c.inputs.get("past_key") is not None and c.params["rope"] is not None for c in CACHE_CASES)
    assert any(c.expects_error for c in CACHE_CASES)


@pytest.mark.parametrize("lesson", ["typescript/src/layer.ts", "python/attention_port/layer.py"])
def test_the_projects_layer_lessons_pass_the_layer_rope_and_cache_levels(lesson):
    code, text = run_check(str(REPO_ROOT / lesson))
    assert code == 0, text
    assert "fail" not in text and "not attempted" not in text and "crash" not in text, text
    attempted = len(CACHE_CASES)
    for n, name in ((TOTAL + 1, LAYER_LEVEL), (TOTAL + 2, ROPE_LEVEL), (TOTAL + 3, CACHE_LEVEL)):
        assert f"level {n} of {LAYERED_TOTAL}: {name} — " in text, text
    assert f"{CACHE_LEVEL} — {attempted} of {attempted} cases pass" in text, text
    invalid = [c for c in LAYER_CASES if c.expects_error]
    assert text.count(", as the project's ports)") >= len(invalid), text


@pytest.mark.parametrize("file", ["layer-no-past.mjs", "layer_no_past.py"])
def test_a_layer_without_a_past_is_told_the_cache_level_is_not_attempted_and_nothing_fails(file):
    code, text = run_check(file)
    assert code == 0, text
    past = "pastKey and pastValue" if file.endswith(".mjs") else "past_key and past_value"
    layer = "multiHeadAttention" if file.endswith(".mjs") else "multi_head_attention"
    level = f"level {TOTAL + 3} of {LAYERED_TOTAL}: {CACHE_LEVEL}"
    assert f"{level} — not attempted: your {layer} takes no {past}: it exports no KV cache\n" in text, text
    assert "fail" not in text and "crash" not in text, text
    assert f"{len(CACHE_CASES)} cases were not attempted (level {TOTAL + 3})" in text, text


@pytest.mark.parametrize("file", ["layer-no-mistake.mjs", "layer_no_mistake.py"])
def test_a_learners_cached_layer_passes_the_cache_level(file):
    code, text = run_check(file)
    assert code == 0, text
    attempted = len(CACHE_CASES)
    assert f"{CACHE_LEVEL} — {attempted} of {attempted} cases pass" in text, text
    assert "not attempted" not in text and "fail" not in text, text


def test_a_wrong_present_is_named_by_which_of_the_two_it_is():
    # The answer is the oracle's own (the fixture's expected values) with one cell of one present
    # changed: the line must name that one, whether or not the output is right.
    case = next(c for c in CACHE_CASES if c.id == "layer_decode_one_token")
    expected = case.expected
    for name in ("present_key", "present_value"):
        steps = {n: getattr(expected, n) for n in ("output", "present_key", "present_value")}
        steps[name] = steps[name].copy()
        steps[name][1, -1, 0] += 1.0  # the new position's first feature, in head 1
        reply = Reply("steps", steps=steps)
        result = check.judge_layer_valid(case, reply, 1.0, "Python", lambda _: Reply("bad"))
        assert result.status == "fail", name
        assert result.lines[0].startswith(f"{case.id}: {name}[1, 5, 0] is "), result.lines
        js = check.judge_layer_valid(case, reply, 1.0, "JavaScript", lambda _: Reply("bad"))
        spelled = {"present_key": "presentKey", "present_value": "presentValue"}[name]
        assert js.lines[0].startswith(f"{case.id}: {spelled}[1, 5, 0] is "), js.lines
    # A present left out is said too: return_cache asks for both.
    steps = {"output": expected.output, "present_key": expected.present_key}
    result = check.judge_layer_valid(case, Reply("steps", steps=steps), 1.0, "Python", lambda _: Reply("bad"))
    assert result.status == "fail" and "return_cache gave no present_value" in result.lines[0], result.lines


def test_a_file_with_only_the_layer_runs_only_the_layer_levels():
    code, text = run_check("layer-no-mistake.mjs")
    assert code == 0, text
    assert f"it has no scaledDotProductAttention, so levels 1-{TOTAL} are not run" in text, text
    assert "level 1 of" not in text and "looks like" not in text, text
    assert text.endswith(f"Every case of levels {TOTAL + 1}-{LAYERED_TOTAL} passes."), text


def test_a_python_layer_without_a_window_leaves_the_layer_cases_that_set_one_not_attempted(tmp_path):
    # The layer passes a window, sinks and kv_seqlen on to the core; a Python layer says by its
    # parameters which it takes, so one written before them is not failed on those cases.
    path = tmp_path / "layer_before_windows.py"
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(LEARNER_FILES)!r})\n"
        "from layer_no_past import apply_rotary, _layer\n\n\n"
        "def multi_head_attention(x_q, x_kv=None, *, w_q, w_k, w_v, w_o, b_q=None, b_k=None, b_v=None,"
        " b_o=None, num_heads, num_kv_heads=None, attn_mask=None, is_causal=False, scale=None,"
        " softcap=0.0, rope=None, need_weights=False):\n"
        "    return _layer(x_q, x_kv, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, b_q=b_q, b_k=b_k, b_v=b_v,"
        " b_o=b_o, num_heads=num_heads, num_kv_heads=num_kv_heads, attn_mask=attn_mask,"
        " is_causal=is_causal, scale=scale, softcap=softcap, rope=rope, need_weights=need_weights)\n"
    )
    windowed = [
        c for c in LAYER_CASES if c.kind == "layer" and "window" in c.params and "cache" not in c.tags
    ]
    assert windowed
    code, text = run_check(str(path))
    assert code == 0, text
    assert "fail" not in text and "crash" not in text, text
    level = f"level {TOTAL + 1} of {LAYERED_TOTAL}: {LAYER_LEVEL} — "
    line = next(x for x in text.splitlines() if x.startswith(level))
    assert " not attempted: your multi_head_attention takes no " in line, line


def test_a_file_without_the_layer_gets_no_layer_levels():
    _, text = run_check("no-mistake.mjs")
    assert f"of {LAYERED_TOTAL}:" not in text and LAYER_LEVEL not in text, text


def _in_both_languages(levels: dict[str, str]) -> dict[str, tuple[str, str]]:
    """mistake name -> level, as learner file -> (mistake, level): mistake-NAME.mjs and mistake_NAME.py."""
    return {
        f"{prefix}{name}{suffix}": (name, level)
        for name, level in levels.items()
        for prefix, suffix in (("mistake-", ".mjs"), ("mistake_", ".py"))
    }


# file -> (the layer mistake it has, the level where check stops). Each file makes that one mistake
# (layer-base.mjs and layer_base.py, a learner's layer over a learner's own attention).
LAYER_MISTAKE_FILES = _in_both_languages(
    {
        "weights_not_transposed": LAYER_LEVEL,
        "split_without_transpose": LAYER_LEVEL,
        "heads_split_on_wrong_axis": LAYER_LEVEL,
        "out_projection_forgotten": LAYER_LEVEL,
        "scaled_by_model_dim": LAYER_LEVEL,
        "merge_without_transpose": LAYER_LEVEL,
        "heads_in_wrong_order": LAYER_LEVEL,
        "rope_conventions_swapped": ROPE_LEVEL,
        "rope_ignored": ROPE_LEVEL,
        "rope_theta_ignored": ROPE_LEVEL,
        "rope_rotary_dim_ignored": ROPE_LEVEL,
        "rope_exponent_halved": ROPE_LEVEL,
        "rope_applied_to_value": ROPE_LEVEL,
        "rope_denominator_e": ROPE_LEVEL,
        "cache_offset_ignored": CACHE_LEVEL,
        "rope_positions_from_zero": CACHE_LEVEL,
        "past_ignored": CACHE_LEVEL,
        "cache_expanded_to_query_heads": CACHE_LEVEL,
        "keys_cached_before_rope": CACHE_LEVEL,
        "new_keys_prepended": CACHE_LEVEL,
    }
)


def _layer_phrase(mistake: layer_mistakes.LayerMistake, language: str) -> str:
    return check.spoken(mistake.says.split(":")[0], language)


def test_every_layer_mistake_has_a_learner_file_in_each_language():
    for suffix in (".mjs", ".py"):
        named = {name for file, (name, _) in LAYER_MISTAKE_FILES.items() if file.endswith(suffix)}
        assert named == {m.name for m in layer_mistakes.ALL}


@pytest.mark.parametrize("file", sorted(LAYER_MISTAKE_FILES))
def test_a_layer_with_one_mistake_is_told_its_name_and_the_lesson_line_that_does_it_right(file):
    name, level = LAYER_MISTAKE_FILES[file]
    language = _language(file)
    code, text = run_check(file)
    assert code == 1, text
    number = level_number_of(level)
    assert f"Stopped at level {number} of {LAYERED_TOTAL}: {level} — " in text, text
    by_name = {m.name: m for m in layer_mistakes.ALL}
    mistake = by_name[name]
    assert f"looks like {_layer_phrase(mistake, language)}" in text, text
    others = [m.name for m in layer_mistakes.ALL if m is not mistake and _layer_phrase(m, language) in text]
    assert not others, f"also told {others}:\n{text}"
    # The pointer names the lesson in the learner's language, at the marker's line or the code line
    # its comment explains (a few lines below it).
    lesson_file = layer_mistakes.LESSONS[language]
    lines = lesson_file.read_text(encoding="utf-8").splitlines()
    marker = mistake.lesson_line[language]
    at = next(n for n, line in enumerate(lines, start=1) if marker in line)
    where = lesson.place_in(lesson_file, marker)
    assert where is not None and where.startswith(str(lesson_file.relative_to(REPO_ROOT)) + " line ")
    line = int(where.rsplit(" ", 1)[1])
    assert at <= line <= at + 3, (at, line)
    assert not lines[line - 1].strip().startswith(("//", "#")), lines[line - 1]
    assert f"(the lesson does it right at {where})" in text, text
    # RoPE's words in the learner's language: on RoPE's mistakes, and on the levels after RoPE's.
    rotary_said = "rope" in name or number > level_number_of(ROPE_LEVEL)
    said = text.replace(str(LEARNER_FILES / file), "FILE")  # the file's name is not check's words
    assert ("rotaryDim" in said) == (language == "JavaScript" and rotary_said), text
    assert "rotary_dim" not in said or language == "Python", text


def level_number_of(name: str) -> int:
    return next(level.number for level in cases.LEVELS if level.name == name)


def _variant(mistake: layer_mistakes.LayerMistake, case):
    """The variant's output on a case, or None where it cannot run there (as identify skips it):
    the past left unread leaves a mask over P + Lk keys too long for the Lk it attends."""
    try:
        return mistake.variant(case.kind, case.inputs, case.params)
    except ValueError:
        return None


def _differs(mistake: layer_mistakes.LayerMistake, case) -> bool:
    """Whether the variant's answer differs from the fixture's on a case: the output, and for the
    cache's mistakes present_key and present_value too (their output can be right)."""
    wrong = _variant(mistake, case)
    if wrong is None:
        return False
    if not mistake.cache:
        return not mistakes.same_values(wrong, case.expected.output)
    truth = (case.expected.output, case.expected.present_key, case.expected.present_value)
    return not all(map(mistakes.same_values, wrong, truth))


def test_each_layer_variant_is_the_layer_with_one_step_wrong():
    # The variants' own layer, with nothing wrong, gives the fixtures' output; each variant differs
    # from it on some case, and makes no difference where its step does not run.
    # Cache cases too: the variants' layer takes the past, turns from P and offsets causal by P.
    for case in (c for c in LAYER_CASES if not c.expects_error):
        right = (
            layer_mistakes._layer(case.inputs, case.params)
            if case.kind == "layer"
            else layer_mistakes._rope(case.inputs, case.params, layer_mistakes.Rotation())
        )
        assert mistakes.same_values(right, case.expected.output), case.id
    for mistake in layer_mistakes.LAYER_MISTAKES:
        differs = [c.id for c in LAYER_CASES if not c.expects_error and _differs(mistake, c)]
        assert differs, mistake.name
    rope_free = [c for c in LAYER_CASES if c.kind == "layer" and c.params["rope"] is None]
    rotating = ("rope_conventions_swapped", "rope_applied_to_value", "rope_denominator_e", "rope_ignored")
    for name in (*rotating, "rope_theta_ignored", "rope_rotary_dim_ignored", "rope_exponent_halved"):
        variant = getattr(layer_mistakes, name)
        assert all(variant("layer", c.inputs, c.params) is None for c in rope_free), name
    # The cache's mistakes need a past of one position or more; RoPE's needs RoPE as well.
    without_past = [
        c
        for c in LAYER_CASES
        if not c.expects_error and (c.inputs.get("past_key") is None or c.inputs["past_key"].shape[-2] == 0)
    ]
    for name in ("cache_offset_ignored", "rope_positions_from_zero", "past_ignored", "new_keys_prepended"):
        variant = getattr(layer_mistakes, name)
        assert all(variant(c.kind, c.inputs, c.params) is None for c in without_past), name
    from_zero = layer_mistakes.rope_positions_from_zero
    assert all(from_zero("layer", c.inputs, c.params) is None for c in rope_free)


# ---- named mistakes ---------------------------------------------------------------------------

# The levels of the window, the sinks and the ragged batch, by the tag that puts a case on each.
WINDOW_LEVEL, SINKS_LEVEL, RAGGED_LEVEL, EDGE_LEVEL = (
    cases.LEVELS[cases.level_of((tag,)) - 1].name for tag in ("window", "sinks", "ragged", "nan")
)

# file -> (the mistake it has, the level where check stops). Each file makes that one mistake and
# nothing else wrong (learner-base.mjs and learner_base.py switch it on by name).
MISTAKE_FILES = {
    "mistake-scale_forgotten.mjs": ("scale_forgotten", "the tutorial example"),
    "mistake-scaled_by_dk.mjs": ("scaled_by_dk", "the tutorial example"),
    "mistake-softmax_wrong_axis.mjs": ("softmax_wrong_axis", "the tutorial example"),
    "mistake-key_not_transposed.mjs": ("key_not_transposed", "the tutorial example"),
    "mistake_key_not_transposed.py": ("key_not_transposed", "the tutorial example"),
    "mistake-weights_returned.mjs": ("weights_returned", "the tutorial example"),
    "mistake-weights_times_key.mjs": ("weights_times_key", "the tutorial example"),
    "mistake_weights_times_key.py": ("weights_times_key", "the tutorial example"),
    "mistake-softmax_without_max.mjs": ("softmax_without_max", "numerical stability (large logits)"),
    "mistake_softmax_without_max.py": ("softmax_without_max", "numerical stability (large logits)"),
    "mistake-mask_inverted.mjs": ("mask_inverted", "boolean masks"),
    "mistake_mask_inverted.py": ("mask_inverted", "boolean masks"),
    "mistake-finite_sentinel.mjs": ("finite_sentinel", "boolean masks"),
    "mistake_finite_sentinel.py": ("finite_sentinel", "boolean masks"),
    "mistake-float_mask_as_boolean.mjs": ("float_mask_as_boolean", "float masks and -inf"),
    "mistake_float_mask_as_boolean.py": ("float_mask_as_boolean", "float masks and -inf"),
    "mistake-fully_masked_nan.mjs": ("fully_masked_nan", "fully-masked rows"),
    "mistake-fully_masked_zero_times_value.mjs": (
        "fully_masked_zero_times_value",
        "edge cases (empty dims, NaN and +-inf, float64's extremes)",
    ),
    "mistake-causal_ignored.mjs": ("causal_ignored", "causal"),
    "mistake_causal_ignored.py": ("causal_ignored", "causal"),
    "mistake-causal_diagonal_hidden.mjs": ("causal_diagonal_hidden", "causal"),
    "mistake-causal_bottom_right.mjs": ("causal_bottom_right", "cross-attention (Lq != Lk, Ev != E)"),
    "mistake-gqa_tiled.mjs": ("gqa_tiled", "grouped-query heads"),
    "mistake_gqa_tiled.py": ("gqa_tiled", "grouped-query heads"),
    "mistake-scale_option_ignored.mjs": ("scale_option_ignored", "scale and softcap"),
    "mistake-softcap_without_divide.mjs": ("softcap_without_divide", "scale and softcap"),
    "mistake-softcap_without_multiply.mjs": ("softcap_without_multiply", "scale and softcap"),
    "mistake_softcap_without_multiply.py": ("softcap_without_multiply", "scale and softcap"),
    "mistake-query_offset_ignored.mjs": ("query_offset_ignored", "decoding after a cache (query_offset)"),
    "mistake_query_offset_ignored.py": ("query_offset_ignored", "decoding after a cache (query_offset)"),
    "mistake-query_offset_off_by_one.mjs": (
        "query_offset_off_by_one",
        "decoding after a cache (query_offset)",
    ),
    "mistake_query_offset_off_by_one.py": (
        "query_offset_off_by_one",
        "decoding after a cache (query_offset)",
    ),
    "mistake-key_times_query.mjs": ("key_times_query", "the tutorial example"),
    "mistake_key_times_query.py": ("key_times_query", "the tutorial example"),
    "mistake-matmul_one_short.mjs": ("matmul_one_short", "the tutorial example"),
    "mistake-last_feature_dropped.mjs": ("last_feature_dropped", "the tutorial example"),
    "mistake-last_key_dropped.mjs": ("last_key_dropped", "the tutorial example"),
    "mistake-key_length_from_query.mjs": ("key_length_from_query", "plain rank-2"),
    "mistake-mask_read_per_query.mjs": ("mask_read_per_query", "batch and heads"),
    "mistake-enable_gqa_ignored.mjs": ("enable_gqa_ignored", "grouped-query heads"),
    "mistake-softcap_ignored.mjs": ("softcap_ignored", "scale and softcap"),
    "mistake_softcap_ignored.py": ("softcap_ignored", "scale and softcap"),
    "mistake-attn_mask_ignored.mjs": ("attn_mask_ignored", "boolean masks"),
    # The window's, the sinks' and the ragged batch's, in both languages.
    **_in_both_languages(
        {
            "window_one_key_too_wide": WINDOW_LEVEL,
            "window_one_key_too_narrow": WINDOW_LEVEL,
            "window_top_left": WINDOW_LEVEL,
            "sink_given_a_value": SINKS_LEVEL,
            "sink_after_softmax": SINKS_LEVEL,
            # Only a sink of +inf tells it apart (exp(s - m) overflows), and that is an edge case.
            "sink_left_out_of_max": EDGE_LEVEL,
            "kv_seqlen_one_short": RAGGED_LEVEL,
            "kv_seqlen_one_past": RAGGED_LEVEL,
            "kv_seqlen_ignored": RAGGED_LEVEL,
        }
    ),
}


def _phrase(mistake: mistakes.Mistake, language: str) -> str:
    """The start of what check says for a mistake, before any number that depends on the case, in
    the learner's language."""
    return check.spoken(mistake.says.split("{")[0].split(":")[0], language)


def _language(file: str) -> str:
    return "Python" if file.endswith(".py") else "JavaScript"


NEW_MISTAKES = {m.name for m in mistakes.MISTAKES if m.topic in ("window", "sink_logits", "kv_seqlen")}
OPTION_TAGS = ("window", "sinks", "ragged")  # the window's, the sinks' and the ragged batches' tags


def _core_cases(tags):
    return [
        c
        for c in ALL_CASES
        if c.kind == "attention"
        and not c.expects_error
        and "outside_contract" not in c.tags
        and set(c.tags) & set(tags)
    ]


def test_the_variants_with_nothing_wrong_give_the_fixtures_output_on_every_window_sink_and_ragged_case():
    # The variants are the contract's algorithm with one step swapped: with none swapped, each of
    # these cases must come out as the oracle says, or a variant's match would mean nothing.
    held = _core_cases(OPTION_TAGS)
    assert len(held) >= 10
    for case in held:
        inputs = case.inputs
        right = mistakes._attention(
            inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"], **case.params
        )
        assert mistakes.same_values(right, case.expected.output), case.id


def test_each_new_variant_differs_from_the_truth_on_a_case_of_its_level():
    by_name = {m.name: m for m in mistakes.MISTAKES}
    for name in NEW_MISTAKES:
        level = next(level for n, level in MISTAKE_FILES.values() if n == name)
        held = [c for c in _core_cases(OPTION_TAGS) if cases.LEVELS[cases.level_of(c.tags) - 1].name == level]
        differs = []
        for case in held:
            inputs = case.inputs
            arguments = (inputs["query"], inputs["key"], inputs["value"], inputs["attn_mask"])
            wrong = by_name[name].variant(*arguments, **case.params)
            if wrong is not None and not mistakes.same_values(wrong, case.expected.output):
                differs.append(case.id)
        assert differs, name


def test_every_named_mistake_has_a_learner_file():
    assert {name for name, _ in MISTAKE_FILES.values()} == {m.name for m in mistakes.MISTAKES}


@pytest.mark.parametrize("file", sorted(MISTAKE_FILES))
def test_a_learner_with_one_mistake_is_told_its_name(file):
    name, level = MISTAKE_FILES[file]
    code, text = run_check(file)
    assert code == 1, text
    assert f"Stopped at level {level_number(level)} of {TOTAL}: {level} — " in text, text
    if name in NEW_MISTAKES and level == EDGE_LEVEL:
        # The learner base fails the other edge cases its own ways: the lines of the sinks' cases.
        ids = {c.id for c in _core_cases(OPTION_TAGS) if cases.level_of(c.tags) == level_number(level)}
        lines = text.splitlines()
        text = "\n".join(
            x for x in lines if any(x.startswith((f"  fail {i}:", "  on ")) and i in x for i in ids)
        )
    by_name = {m.name: m for m in mistakes.MISTAKES}
    assert f"looks like {_phrase(by_name[name], _language(file))}" in text, text
    others = [m.name for m in mistakes.MISTAKES if m.name != name and _phrase(m, _language(file)) in text]
    assert not others, f"also told {others}:\n{text}"
    if file in SPOKEN:
        said, never = SPOKEN[file]
        assert said in text, text
        assert never not in text, text


# A diagnosis speaks the learner's language: JavaScript's names and spellings for a .mjs/.ts file,
# Python's for a .py file (file -> what it must say, a spelling it must not use).
SPOKEN = {
    "mistake-causal_ignored.mjs": (
        "looks like isCausal was ignored: with isCausal = true, query i",
        "is_causal",
    ),
    "mistake_causal_ignored.py": (
        "looks like is_causal was ignored: with is_causal = True, query i",
        "isCausal",
    ),
    "mistake-softmax_without_max.mjs": (" is NaN, expected 0.586617\n", " nan"),
    "mistake_softmax_without_max.py": (" is nan, expected 0.586617\n", "NaN"),
    "mistake-finite_sentinel.mjs": ("such as -1e9 instead of -Infinity", "-inf"),
    "mistake_finite_sentinel.py": ("such as -1e9 instead of -inf", "Infinity"),
    "mistake-mask_inverted.mjs": ("read backwards: true means 'may attend'", "True"),
    "mistake_mask_inverted.py": ("read backwards: True means 'may attend'", "true"),
}


def test_a_mistake_is_named_also_where_its_rows_with_nothing_to_attend_to_give_nan():
    # Before level 6 a learner's softmax gives NaN for a row with every key masked; reading the float
    # mask as yes/no blocks every key of float_mask_large_finite's row 3 (all zeros), and that row is
    # NaN. The mask is still the mistake to name there, as on the level's other cases.
    code, text = run_check("float-mask-as-boolean-nan-rows.mjs")
    assert code == 1
    line = next(x for x in text.splitlines() if x.startswith("  fail float_mask_large_finite: "))
    assert " is NaN, expected " in line, line
    # The three cases share the name: it is said once, under them, with their ids.
    assert (
        "  on 3 of the cases above (float_mask_with_neg_inf, float_mask_large_finite, float_mask_biases):"
        " looks like the float mask was read as yes/no: "
    ) in text, text
    assert text.count("looks like the float mask was read as yes/no") == 1, text


@pytest.mark.parametrize("file", ["no-mistake.mjs", "no_mistake.py"])
def test_a_learner_without_a_mistake_gets_no_name_and_passes_up_to_invalid_input(file):
    code, text = run_check(file)
    assert code == 1
    assert "looks like" not in text
    assert f"Stopped at level {level_number('invalid input')} of {TOTAL}: invalid input" in text
    assert text.endswith(f"Level {TOTAL} was not run: fix this level first, or add --all."), text


def test_a_crash_on_grouped_heads_is_told_how_query_heads_read_key_value_heads():
    # gqa-heads-unmapped.mjs reads key/value head h for query head h: a crash past the last one.
    code, text = run_check("gqa-heads-unmapped.mjs")
    assert code == 1
    assert f"Stopped at level {level_number('grouped-query heads')} of {TOTAL}" in text, text
    line = next(x for x in text.splitlines() if x.startswith("  fail gqa_4q_2kv: "))
    assert line.startswith("  fail gqa_4q_2kv: your code crashed at line "), line
    assert line.endswith(
        " — with enableGqa, Hq = 4 query heads share Hkv = 2 key/value heads in consecutive groups of 2:"
        " query head h reads key/value head floor(h / (Hq / Hkv))"
    ), line


def test_the_worst_cell_and_the_example_line():
    code, text = run_check("mistake-softmax_without_max.mjs")
    line = next(line for line in text.splitlines() if line.startswith("  fail large_logits:"))
    assert " is NaN, expected 0.5" in line  # output[0, 0]: NaN where the oracle says 0.5866...
    shared = next(line for line in text.splitlines() if line.startswith("  on 3 of the cases above"))
    assert "exp(1000) overflows to Infinity, and Infinity / Infinity is NaN" in shared
    # It points at the lesson's line that subtracts the max, found by what that line says.
    softmax = _line_of("../../../typescript/src/attention.ts", "Math.exp(x - rowMax)")
    assert shared.endswith(f"(the lesson does it right at typescript/src/attention.ts line {softmax})"), (
        shared
    )


# ---- the starter implementations -------------------------------------------------------------


def _starter_transcript_lines(starter: str = "typescript/examples/my-attention.ts") -> list[tuple[str, str]]:
    """(page, line) for each line of the docs' transcripts of check on a TypeScript starter: the
    fenced blocks of README.md and docs/*.md with a "level N of M: " line (only the starters'
    reports are shown so) whose first line is "Checking <starter> ...", or, for the core's starter,
    names no file, but their "..." lines. Each must be a line of today's report, so that a new
    level or case fails the test instead of leaving a page's counts stale."""
    found = []
    for page in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for block in page.read_text(encoding="utf-8").split("```")[1::2]:
            lines = block.splitlines()[1:]  # the first is the fence's language, or empty
            named = re.match(r"Checking (\S+) ", lines[0]) if lines else None
            ours = named.group(1) == starter if named else starter.endswith("my-attention.ts")
            if ours and any(re.match(r"level \d+ of \d+: ", line) for line in lines):
                found += [(page.name, line) for line in lines if line not in ("", "...")]
    return found


@pytest.mark.parametrize("path", ["typescript/examples/my-attention.ts", "python/examples/my_attention.py"])
def test_the_starters_pass_the_first_levels_and_stop_where_their_simplicity_ends(path):
    code, text = run_check(str(REPO_ROOT / path))
    assert code == 1, text
    for n in (1, 2, 3):
        assert f"level {n} of {TOTAL}: {cases.LEVELS[n - 1].name} — " in text
    assert f"level 4 of {TOTAL}: boolean masks — not attempted: your function takes no options" in text
    assert f"Stopped at level {level_number('batch and heads')} of {TOTAL}: batch and heads" in text
    assert text.count("cases pass") == 3, text
    # The TypeScript starter returns a wrongly shaped output at rank 3; the Python one's K.T reverses
    # every axis of a rank-3 key, and numpy's matmul refuses it: each is told its own.
    line = next(line for line in text.splitlines() if line.startswith("  fail rank3_heads: "))
    if path.endswith(".ts"):
        assert line == "  fail rank3_heads: output has shape [3, 5], expected [3, 5, 8]", line
        assert (
            "  on 3 of the cases above (rank3_heads, single_key, real_model_heads): this case is rank 3:"
            " every dim before the last two is a batch or head dim, and each [L, E] matrix inside gets the"
            " same steps\n"
        ) in text, text
        report = text.replace(f"{REPO_ROOT}/", "").splitlines()  # as run from the checkout
        shown = _starter_transcript_lines()
        assert {page for page, _ in shown} >= {"README.md", "learn.md"}, shown
        for page, line in shown:
            assert line in report, (page, line)
    else:
        assert "ValueError: matmul: " in line, line
        assert (
            "this case is rank 3: if you transposed the key with .T, on a rank-3 array .T reverses every"
            " axis ([H, Lk, E] becomes [E, Lk, H]), not just the last two; np.swapaxes(key, -1, -2) swaps"
            " only those"
        ) in text, text
    # The first report guides: what the first level not attempted teaches, and the lesson's lines.
    assert "Level 4 was not attempted (your function takes no options). Level 4 teaches " in text, text
    assert "Level 8 teaches inputs of rank 3 and more" in text, text


LAYER_STARTERS = ["typescript/examples/my-layer.ts", "python/examples/my_layer.py"]


@pytest.mark.parametrize("path", LAYER_STARTERS)
def test_the_layer_starter_runs_the_layer_levels_and_stops_at_the_first_on_its_first_stub(path):
    # The starter is the layer's six steps as stubs around the learner's own core (my-attention.ts,
    # my_attention.py, imported and not exported): check runs the layer's levels only, and its
    # first report says to start at the layer's first level, every case there failing on step 1.
    code, text = run_check(str(REPO_ROOT / path))
    assert code == 1, text
    language = _language(path)
    core = check.spoken("scaled_dot_product_attention", language)
    assert f"it has no {core}, so levels 1-{TOTAL} are not run.\n" in text, text
    layer = level_number_of(LAYER_LEVEL)
    valid = [c for c in LAYER_CASES if cases.level_of(c.tags) == layer and not c.expects_error]
    assert valid, LAYER_CASES
    threw = "Error" if language == "JavaScript" else "NotImplementedError"
    stub = f"your function threw {threw}: step 1, project, is not written yet: x · weightᵀ + bias (line "
    for case in valid:
        assert f"  fail {case.id}: {stub}" in text, (case.id, text)
    assert f"Stopped at level {layer} of {LAYERED_TOTAL}: {LAYER_LEVEL} — {len(valid)} of " in text, text
    assert check.level_guide(layer, language) in text, text
    assert f"Levels {layer + 1}-{LAYERED_TOTAL} were not run" in text, text
    if language == "JavaScript":
        report = text.replace(f"{REPO_ROOT}/", "").splitlines()  # as run from the checkout
        shown = _starter_transcript_lines(path)
        assert {page for page, _ in shown} == {"learn.md"}, shown
        for page, line in shown:
            assert line in report, (page, line)


# The Python starter's stubs written as a learner would (the rotation the project's own), over the
# project's core: what the starter holds besides its stubs (the options it passes its core, the
# positions, the cache's way in and out) must then pass every layer level.
FILLED_STUBS = {
    "step 1, project": "    y = x @ np.asarray(weight).T\n    return y if bias is None else y + bias",
    "step 2, split heads": "    return np.swapaxes(x.reshape(*x.shape[:-1], heads, -1), -2, -3)",
    "step 3, rotate": "    return layer.apply_rotary(x, positions, theta=theta, rotary_dim=rotary_dim,"
    " interleaved=interleaved)",
    "the cache in": "    return np.concatenate([np.asarray(past, dtype=np.float64), x], axis=-2)",
    "step 5, merge heads": "    x = np.swapaxes(x, -2, -3)\n    return x.reshape(*x.shape[:-2], -1)",
    "need_weights": "        steps = reference.attention_steps(q, k, v, *mask, **options)\n"
    '        result["weights"] = steps.weights',
}


def test_the_python_layer_starter_with_its_stubs_written_passes_every_layer_level(tmp_path):
    lines = (REPO_ROOT / "python/examples/my_layer.py").read_text(encoding="utf-8").splitlines()
    written, stubs = [], dict(FILLED_STUBS)
    for line in lines:
        stub = re.match(r'\s*raise NotImplementedError\("(.+?) is not written yet', line)
        written.append(stubs.pop(stub.group(1).rstrip(",")) if stub else line)
    assert not stubs, stubs  # every stub found, and written
    header = "from attention_port import layer, reference\n"
    (tmp_path / "my_layer.py").write_text(header + "\n".join(written), encoding="utf-8")
    (tmp_path / "my_attention.py").write_text(
        "from attention_port.reference import scaled_dot_product_attention  # noqa: F401\n", encoding="utf-8"
    )
    code, text = run_check(str(tmp_path / "my_layer.py"))
    assert code == 0, text
    assert text.endswith(f"Every case of levels {TOTAL + 1}-{LAYERED_TOTAL} passes."), text


@pytest.mark.parametrize(
    ("starter", "lesson_file"),
    list(zip(LAYER_STARTERS, ["typescript/src/layer.ts", "python/attention_port/layer.py"], strict=True)),
)
def test_the_layer_starter_labels_its_steps_as_the_lesson_does(starter, lesson_file):
    labels = [
        re.findall(r"Step \d: [^.]+\.", (REPO_ROOT / f).read_text(encoding="utf-8"))
        for f in (starter, lesson_file)
    ]
    assert labels[0] == labels[1] and len(labels[0]) == 6, labels


# ---- the dtype a learner's function computes in ----------------------------------------------

FLOAT32_EXAMPLE = str(REPO_ROOT / "python/examples/float32_attention.py")


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_a_float32_kernel_passes_at_float32_and_the_narrower_dtypes(dtype):
    code, text = run_check(FLOAT32_EXAMPLE, dtype=dtype)
    assert code == 0, text
    assert f"(Python, held to the {dtype} budget)" in text.splitlines()[0]
    assert "left out: outside the contract in" in text.splitlines()[1]  # huge inputs do not fit
    assert "Every case you attempted passes" in text


def test_a_float32_kernel_fails_at_float64_with_digits_that_show_the_difference():
    code, text = run_check(FLOAT32_EXAMPLE)
    assert code == 1, text
    assert "Stopped at level 1 of" in text
    lines = [line for line in text.splitlines() if line.startswith("  fail ")]
    assert lines, text
    for line in lines:
        # "output[1, 0] is 3.241745, expected 3.241744": six digits at least, more where needed.
        got, want = line.split(" is ", 1)[1].split(", expected ")
        assert got != want and float(got) != float(want), line


def test_check_takes_the_dtype_from_the_command_line(capsys):
    code = cli.main(["check", FLOAT32_EXAMPLE, "--dtype", "float32", "--fixtures", str(FIXTURES_DIR)])
    assert code == 0, capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        cli.main(["check", FLOAT32_EXAMPLE, "--dtype", "float8"])
    assert exit_.value.code == 2
    assert "--dtype: invalid choice: 'float8'" in capsys.readouterr().err


# ---- bad learner code: one line each, and the right exit code --------------------------------


@pytest.mark.parametrize(
    "file, line",
    [
        ("no-such-file.mjs", "error: {path}: no such file"),
        ("syntax-error.mjs", "error: syntax error in {path} (line 2): Unexpected token '{{'"),
        ("syntax-error.ts", "error: syntax error in {path} (line 2): Expected ',', got '{{'"),
        ("syntax_error.py", "error: syntax error in {path} (line 4): expected ':'"),
        (
            "no-export.mjs",
            "error: {path} has no export named scaledDotProductAttention (it exports attention)",
        ),
        (
            "no_function.py",
            "error: {path} defines no function named scaled_dot_product_attention (it defines attention)",
        ),
        ("throws-on-load.mjs", "error: {path} threw while loading: Error: broken at the top level"),
        ("notes.txt", "error: {path}: check runs a .ts, .mts, .js, .mjs, .py file, not .txt"),
    ],
)
def test_a_file_that_cannot_run_gets_one_line_and_exit_code_2(file, line, tmp_path):
    path = LEARNER_FILES / file
    if file == "notes.txt":
        path = tmp_path / file
        path.write_text("not code")
    code, text = run_check(str(path))
    assert code == 2
    assert text == line.format(path=path)


@pytest.mark.parametrize(
    "file, line",
    [
        (
            "throws.mjs",
            "tutorial_seq3_dk4: your function threw Error: not written yet (line 3 of throws.mjs)",
        ),
        ("wrong-shape.mjs", "tutorial_seq3_dk4: output has shape [3, 3], expected [3, 2]"),
        ("not-numbers.mjs", "tutorial_seq3_dk4: output[0][1] is undefined, expected a number"),
        ("exits.mjs", "tutorial_seq3_dk4: the process running your code ended (exit code 3)"),
    ],
)
def test_a_case_that_goes_wrong_gets_one_line_and_the_run_goes_on(file, line):
    code, text = run_check(file)
    assert code == 1
    assert f"  fail {line}\n" in text + "\n", text
    assert "tutorial_seq4_dk8:" in text  # the next case ran too


def test_a_hang_times_out_and_the_next_case_gets_a_fresh_process():
    code, text = run_check("hangs.mjs", timeout=0.3)
    assert code == 1
    for case_id in ("tutorial_seq3_dk4", "tutorial_seq4_dk8"):
        assert f"  fail {case_id}: no answer within 0.3 s (an endless loop?)" in text, text


# ---- the command line ---------------------------------------------------------------------------


def test_the_command_exit_codes(capsys):
    assert cli.main(["check", str(LEARNER_FILES / "no-such-file.mjs")]) == 2
    assert cli.main(["check", str(LEARNER_FILES / "mistake-scale_forgotten.mjs")]) == 1
    out = capsys.readouterr().out
    assert f"level 1 of {TOTAL}: the tutorial example — 3 of 3 cases fail" in out
    assert f"Levels 2-{TOTAL} were not run" in out


def test_all_runs_every_level_and_a_tensor_with_a_zero_size_dim_comes_with_its_shape():
    code, text = run_check("no-mistake.mjs", run_all=True)
    assert code == 1
    assert "Stopped" not in text
    invalid = level_number("invalid input")  # and the edge cases after it
    assert f"2 of {TOTAL} levels fail (levels {invalid}-{invalid + 1})." in text
    # learner-base.mjs walks nested arrays only; an empty query [2, 0, 8] comes as {shape, data}.
    walk = _line_of("learner-base.mjs", "return q.map((qn, n) =>")
    assert (
        f"  fail empty_queries: your code crashed at line {walk} of learner-base.mjs: TypeError: q.map is not"
        " a function — this case gives query as {shape: [2, 0, 8], data: []}: a tensor with a zero-size dim"
        " comes with its shape, since nested arrays cannot carry it\n"
    ) in text, text
    assert "not attempted" not in text
    # Every case's line says pass or fail; the lines under it (indented further) explain it.
    # (or, on invalid input, that it was refused by a crash); the lines under it explain it.
    case_lines = [line for line in text.splitlines() if line.startswith("  ") and not line.startswith("    ")]
    assert case_lines, text
    for line in case_lines:
        assert line.startswith(("  pass ", "  fail ", "  on ")) or ": refused by a crash " in line, line
    assert not [line for line in case_lines if line.startswith("  pass ") and "crash" in line], text


def test_a_throw_of_the_learners_own_on_a_shaped_tensor_is_told_the_tensor_came_with_its_shape(tmp_path):
    path = tmp_path / "arrays-only.mjs"
    path.write_text(
        "export function scaledDotProductAttention(query, key, value) {\n"
        '  if (!Array.isArray(query)) throw new TypeError("query must be an array");\n'
        "  return query;\n"
        "}\n"
    )
    code, text = run_check(str(path), run_all=True)
    assert code == 1
    assert (
        "  fail empty_queries: your function threw TypeError: query must be an array (line 2 of"
        " arrays-only.mjs) — this case gives query as {shape: [2, 0, 8], data: []}: a tensor with a"
        " zero-size dim comes with its shape, since nested arrays cannot carry it\n"
    ) in text, text


def _line_of(file: str, text: str) -> int:
    """The line number of the first line of a learner file that holds `text`."""
    lines = (LEARNER_FILES / file).read_text().splitlines()
    return next(n for n, line in enumerate(lines, start=1) if text in line)


@pytest.mark.parametrize(
    ("file", "refusal", "crash"),
    [
        (
            "refuses-or-crashes.mjs",
            "  pass error_query_rank1: threw Error: query must have at least 2 dimensions\n",
            "  error_query_scalar: refused by a crash (counts as refusing) at line {line} of"
            " refuses-or-crashes.mjs: TypeError: Cannot read properties of undefined (reading 'length')\n",
        ),
        (
            "refuses_or_crashes.py",
            "  pass error_query_rank1: threw ValueError: query must have at least 2 dimensions, got 1\n",
            "  error_query_string: refused by a crash (counts as refusing) at line {line} of"
            " refuses_or_crashes.py: ValueError: could not convert string to float: 'two'\n",
        ),
    ],
)
def test_a_crash_on_invalid_input_is_told_apart_from_a_refusal(file, refusal, crash):
    # A refusal is an error the learner's code raises itself (throw / raise); an engine's TypeError or
    # numpy's ValueError inside its math is a crash, shown as one and counted on the level line.
    code, text = run_check(file, run_all=True)
    assert code == 1
    assert refusal in text, text
    line = _line_of(file, "// crashes when" if file.endswith(".mjs") else "# numpy raises")
    assert crash.format(line=line) in text, text
    crashes = [x for x in text.splitlines() if x.startswith("  error_") and ": refused by a crash " in x]
    passes = [x for x in text.splitlines() if x.startswith("  pass error_")]
    level = next(x for x in text.splitlines() if x.startswith(f"level {level_number('invalid input')} of "))
    refused = len(passes) + len(crashes)
    # The file takes no options: the invalid cases that set one are not attempted.
    invalid = [c for c in ALL_CASES if cases.level_of(c.tags) == level_number("invalid input")]
    taken = [c for c in invalid if not options_set(c)]
    untaken = len(invalid) - len(taken)
    assert len(taken) >= 18 and untaken >= 22  # no fewer than before the window's options
    assert (
        f"({refused} of {len(taken)} refused, {len(crashes)} by crashing; {untaken} not attempted:" in level
    ), level
    assert crashes and passes


def test_cases_not_attempted_are_counted_in_the_summary():
    # no_softcap.py is the project's reference behind a signature without softcap.
    code, text = run_check("no_softcap.py")
    assert code == 0, text
    # ... nor query_offset, a window, sinks or kv_seqlen: the cases that set them are not attempted
    # either.
    taken = {"attn_mask", "is_causal", "scale", "enable_gqa"}
    untaken = [
        c
        for c in load_fixtures(FIXTURES_DIR)
        if set(options_set(c)) - taken and "outside_contract" not in c.tags
    ]
    levels = sorted({cases.level_of(c.tags) for c in untaken})
    assert {11, 12, 13, 14} <= set(levels) and levels[-1] == TOTAL, levels
    assert text.endswith(
        f"Every case you attempted passes, but {len(untaken)} cases were not attempted"
        f" ({check._level_numbers(levels)}): see the level lines above."
    ), text


def test_a_nan_output_is_said_once_in_the_learners_spelling():
    code, text = run_check("returns-nan.mjs")
    assert code == 1
    line = next(x for x in text.splitlines() if x.startswith("  fail tutorial_seq3_dk4: "))
    assert line == "  fail tutorial_seq3_dk4: output[0, 0] is NaN, expected 2.60143", line


@pytest.mark.parametrize(
    ("text", "language", "said"),
    [
        ("is_causal given as a string", "JavaScript", "isCausal given as a string"),
        ("A boolean mask row that is all False gives output +0.0", "JavaScript",
         "A boolean mask row that is all false gives output +0.0"),
        ("Float mask with +-inf and nan; attn_mask is None", "JavaScript",
         "Float mask with +-Infinity and NaN; attnMask is null"),
        ("-Infinity - (-Infinity) is NaN; true means 'may attend'", "Python",
         "-inf - (-inf) is nan; True means 'may attend'"),
        ("isCausal, enableGqa and attnMask", "Python", "is_causal, enable_gqa and attn_mask"),
        ("infinite information about nano-sized nans", "JavaScript",
         "infinite information about nano-sized nans"),
    ],
)  # fmt: skip
def test_the_harness_speaks_the_learners_language(text, language, said):
    assert check.spoken(text, language) == said


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/check is a bash script")
def test_npm_run_check_is_a_thin_wrapper():
    npm = REPO_ROOT / ".venv" / "bin" / "npm"
    if not npm.exists():
        pytest.skip("no .venv/bin/npm (run scripts/setup)")
    env = {**os.environ, "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    finished = subprocess.run(
        [str(npm), "run", "--silent", "check", "--", "python/tests/learner_files/mistake-scaled_by_dk.mjs"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert finished.returncode == 1, finished.stderr
    assert "looks like the scores were divided by d_k = 4 instead of sqrt(d_k) = 2" in finished.stdout


def test_a_learner_returning_every_step_is_told_the_first_step_that_differs():
    code, text = run_check("steps-scale-forgotten.mjs")
    assert code == 1
    assert "attentionSteps takes (query, key, value), no options" in text
    # tutorial_seq3_dk4: Q·Kᵀ[0, 0] = 2 (two matching ones); scaled by 1/sqrt(4) it is 1.
    scale = _line_of("../../../typescript/src/attention.ts", "let logits = scores.map")
    assert (
        "      first step that differs: logits[0, 0] is 2, expected 1 (steps 2-3, the scale, softcap and"
        f" mask) (the lesson does it right at typescript/src/attention.ts line {scale})\n"
    ) in text, text


@pytest.mark.parametrize("path", ["typescript/examples/my-attention.ts", "python/examples/my_attention.py"])
def test_a_relative_path_is_read_from_the_current_folder(path, tmp_path, monkeypatch):
    # A learner copies a starter into a folder of their own and runs check there (scripts/check,
    # behind `npm run check -- PATH`, says so: "a relative PATH is read from where npm was started").
    mine = tmp_path / "mine"
    mine.mkdir()
    shutil.copy(REPO_ROOT / path, mine / Path(path).name)
    monkeypatch.chdir(tmp_path)
    fixtures = Path(os.path.relpath(FIXTURES_DIR, tmp_path))
    lines: list[str] = []
    code = check.check(Path("mine") / Path(path).name, fixtures, say=lines.append)
    text = "\n".join(lines)
    assert code == 1, text
    assert text.count("cases pass") == 3, text
    assert f"Stopped at level {level_number('batch and heads')} of {TOTAL}: batch and heads" in text


@pytest.mark.parametrize("seconds", ["0", "-1", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_wrong_command_line(seconds, capsys):
    starter = str(REPO_ROOT / "python/examples/my_attention.py")
    assert cli.main(["check", starter, "--timeout", seconds]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == f"error: --timeout must be a finite number of seconds > 0, got {seconds}"


def test_options_by_keyword_reach_a_function_with_three_positional_parameters_and_kwargs(tmp_path):
    # docs/learn.md: "attn_mask too [goes by name] when there is no 4th positional parameter".
    path = tmp_path / "kwargs_attention.py"
    path.write_text(
        "from attention_port.reference import scaled_dot_product_attention as reference\n"
        "\n"
        "\n"
        "def scaled_dot_product_attention(query, key, value, **options):\n"
        "    return reference(query, key, value, **options)\n"
    )
    code, text = run_check(str(path))
    assert code == 0, text
    assert "not attempted" not in text and "fail" not in text, text


def test_a_module_with_only_a_default_export_is_told_so(tmp_path):
    path = tmp_path / "default-export.mjs"
    path.write_text("export default function scaledDotProductAttention(q, k, v) {\n  return q;\n}\n")
    code, text = run_check(str(path))
    assert code == 2
    assert text == (
        f"error: {path} has no export named scaledDotProductAttention"
        " (it has only a default export: export the function by that name)"
    )


def test_a_file_that_cannot_be_loaded_again_after_a_hang_fails_its_cases_in_one_line_each(
    tmp_path, monkeypatch
):
    # The first case hangs, so the second needs a fresh process; by then the file no longer loads
    # (as when a learner saves an edit in the middle of a run: the file is edited once it has loaded).
    path = tmp_path / "loads_once.py"
    path.write_text("def scaled_dot_product_attention(query, key, value):\n    while True:\n        pass\n")
    start = LearnerProcess.start

    def start_then_edit(self):
        hello = start(self)
        path.write_text("raise RuntimeError('edited in the middle of the run')\n")
        return hello

    monkeypatch.setattr(LearnerProcess, "start", start_then_edit)
    code, text = run_check(str(path), timeout=0.3)
    assert code == 1, text
    assert "  fail tutorial_seq3_dk4: no answer within 0.3 s (an endless loop?)" in text, text
    assert (
        f"  fail tutorial_seq4_dk8: your code could not be started again: {path} threw while loading:"
        " RuntimeError: edited in the middle of the run\n" in text
    ), text
    assert f"Stopped at level 1 of {TOTAL}: the tutorial example — 3 of 3 cases fail." in text, text


@pytest.mark.parametrize(
    ("name", "source", "told"),
    [
        (
            "pair.py",
            "from attention_port.reference import attention_steps as reference_steps\n\n\n"
            "def scaled_dot_product_attention(query, key, value, attn_mask=None):\n"
            "    steps = reference_steps(query, key, value, attn_mask)\n"
            "    return steps.output, steps.weights\n",
            "scaled_dot_product_attention returned a pair whose first item has the output's shape [3, 2]:"
            " return the output alone, not (output, weights)",
        ),
        (
            "pair.ts",
            'import { attentionSteps } from "'
            + str(REPO_ROOT / "typescript/src/attention.ts")
            + '";\n\nexport function scaledDotProductAttention(query, key, value, options = {}) {\n'
            "  const steps = attentionSteps(query, key, value, options);\n"
            "  return [steps.output, steps.weights];\n}\n",
            "scaledDotProductAttention returned a pair whose first item has the output's shape [3, 2]:"
            " return the output alone, not [output, weights]",
        ),
    ],
)
def test_a_function_that_returns_output_and_weights_is_told_to_return_the_output_alone(
    name, source, told, tmp_path
):
    # Many tutorials' attention returns (output, weights): the pair must not read as a ragged output.
    path = tmp_path / name
    path.write_text(source)
    code, text = run_check(str(path))
    assert code == 1
    assert f"  fail tutorial_seq3_dk4: {told}\n" in text + "\n", text


def test_a_learner_multiplying_zero_weights_by_nan_or_inf_fails_the_fully_masked_special_values():
    """no-mistake.mjs computes a fully-masked row as weights · value with weights of 0: right while
    value is finite, NaN where it holds NaN or ±inf. The contract says +0.0 there, and the
    fixtures hold such rows, so the edge-case level fails on exactly those cases."""
    code, text = run_check("no-mistake.mjs", run_all=True)
    level = next(line for line in text.splitlines() if line.startswith(f"level {TOTAL} of {TOTAL}:"))
    assert code == 1 and " cases fail" in level, text
    lines = [line for line in text.splitlines() if "is NaN, expected 0" in line]
    failed = {line.split(":")[0].removeprefix("  fail ") for line in lines}
    assert failed == {f"fully_masked_{kind}_nan_inf_value" for kind in ("bool", "float", "causal")}


# ---- arguments changed in place, and one array as query and key ---------------------------------


@pytest.mark.parametrize("file", ["mutates-query.mjs", "mutates_query.py"])
def test_a_function_that_changes_the_callers_query_is_told_so(file):
    # Its answers are right (it scales the query in place, then leaves the scale out): only the
    # copy check takes before each call can see it.
    code, text = run_check(file)
    assert code == 1, text
    assert f"level 1 of {TOTAL}: the tutorial example — 3 of 3 cases fail" in text, text
    assert "  fail tutorial_seq3_dk4: your function changed the caller's query\n" in text, text
    copy = "query.map((row) => [...row])" if file.endswith(".mjs") else "np.array(query)"
    assert (
        "  on 3 of the cases above (tutorial_seq3_dk4, tutorial_seq4_dk8, tutorial_square_key): the caller's"
        f" arrays must be left as they were (work on a copy, {copy}, or build new arrays)"
    ) in text, text
    assert "looks like" not in text


@pytest.mark.parametrize("file", ["doubles-key-in-place.mjs", "doubles_key_in_place.py"])
def test_a_function_right_with_separate_arrays_but_wrong_with_one_as_query_and_key_is_told_so(file):
    # It doubles the key in place and halves it back, exactly: separate arrays end as they began and
    # every case passes; given one array as both, as the starter's demo calls it, the query doubles too.
    code, text = run_check(file)
    assert code == 1, text
    assert f"level 1 of {TOTAL}: the tutorial example — 1 of 4 cases fail" in text, text
    call = (
        "scaledDotProductAttention(Q, Q, V)"
        if file.endswith(".mjs")
        else "scaled_dot_product_attention(Q, Q, V)"
    )
    assert (
        f"  fail tutorial_seq3_dk4 with one array as both query and key, as {call} in the starter's demo:"
        " it passes with separate arrays but not with the same one — your function writes into an argument"
        " it also reads: here key is query, so a write to one changes the other; build new arrays instead\n"
    ) in text, text
    assert "looks like" not in text  # the doubled scores look like a forgotten scale: not said here


def test_the_projects_ports_and_a_correct_learner_pass_the_run_with_one_array_as_query_and_key():
    code, text = run_check("no-mistake.mjs")
    assert f"level 1 of {TOTAL}: the tutorial example — 3 of 3 cases pass" in text, text
    assert "one array as both" not in text


# ---- when no mistake is named -------------------------------------------------------------------


def _fixture(case_id: str):
    return next(c for c in ALL_CASES if c.id == case_id)


def test_the_wrong_cells_are_described_by_what_they_share():
    # The fixtures' expected outputs with some cells changed: each pattern is said in words.
    output = _fixture("rank2_square").expected.output  # [6, 8]
    last = output.copy()
    last[:, -1] += 1
    assert check.wrong_cells(last, output) == (
        "only the last feature of every row is wrong: a loop over the features that stops one short?"
    )
    row = output.copy()
    row[-1, :] += 1
    assert check.wrong_cells(row, output).startswith("the wrong cells are whole rows (the last query row,")
    heads = _fixture("rank3_heads").expected.output  # [3, 5, 8]
    one_head = heads.copy()
    one_head[1, 2, 3] += 1
    assert check.wrong_cells(one_head, heads).startswith("only head 1 (index 1 of dim 0) is wrong")
    assert check.wrong_cells(output + 1, output).startswith("every output cell is wrong")
    assert check.wrong_cells(output, output) is None


def test_the_fully_masked_note_is_said_only_where_a_row_is_fully_masked():
    assert check._has_fully_masked_row(_fixture("fully_masked_row_float"))
    assert not check._has_fully_masked_row(_fixture("mask_broadcast_rank1"))


def test_a_python_dot_t_on_a_rank_3_key_is_told_what_dot_t_does():
    code, text = run_check("transposes_with_dot_t.py")
    assert code == 1, text
    assert f"Stopped at level {level_number('batch and heads')} of {TOTAL}" in text, text
    assert (
        "this case is rank 3: if you transposed the key with .T, on a rank-3 array .T reverses every axis"
        " ([H, Lk, E] becomes [E, Lk, H]), not just the last two; np.swapaxes(key, -1, -2) swaps only those"
    ) in text, text


# ---- the lesson's lines ---------------------------------------------------------------------------


def test_each_named_mistake_points_at_a_lesson_line_that_does_its_step(tmp_path):
    # Every mistake's topic is found in both lessons, and the line found is code, not a comment.
    from attention_port.learner import lesson

    for mistake in mistakes.MISTAKES:
        for language in ("JavaScript", "Python"):
            where = lesson.place(mistake.topic, language)
            assert where is not None, (mistake.name, language)
            file, line = where.split(" line ")
            text = (REPO_ROOT / file).read_text().splitlines()[int(line) - 1].strip()
            assert text and not text.startswith(("//", "#", "*")), (mistake.name, language, text)
    # Found by its marker, not its number: lines added above it move the pointer with it.
    moved = tmp_path / "lesson.ts"
    moved.write_text("// a new first line\n\n// Step 1: scores. Why.\n// more why\nconst scores = 1;\n")
    assert lesson._line_of(moved, "// Step 1: scores.") == 5


def test_check_start_lists_what_each_level_teaches_before_the_run(capsys):
    assert cli.main(["check", "--start", str(LEARNER_FILES / "mistake-scale_forgotten.mjs")]) == 1
    out = capsys.readouterr().out
    assert "  1. the tutorial example: the four steps: scores = query · keyᵀ" in out, out
    assert f"  {TOTAL}. {cases.CORE_LEVELS[-1].name}: " in out, out
    scores = _line_of("../../../typescript/src/attention.ts", "const scores = matMul(query, transpose(key))")
    assert f"Read typescript/src/attention.ts lines {scores} (scores), " in out, out
