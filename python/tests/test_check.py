"""`attention-port check`: the levels, the project's own ports, named mistakes and bad learner code.

The learner files under learner_files/ are written as learners would write them, independently of
mistakes.py: a file with one mistake must be told that mistake, and only that one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import ALL_CASES, FIXTURES_DIR

from attention_port import cases, check, cli, mistakes

LEARNER_FILES = Path(__file__).parent / "learner_files"
REPO_ROOT = Path(__file__).resolve().parents[2]
TOTAL = len(cases.LEVELS)


def run_check(name: str, *, timeout: float = 10.0, run_all: bool = False) -> tuple[int, str]:
    path = name if os.path.isabs(name) or "/" in name else LEARNER_FILES / name
    lines: list[str] = []
    code = check.check(Path(path), FIXTURES_DIR, timeout=timeout, run_all=run_all, say=lines.append)
    return code, "\n".join(lines)


def level_number(name: str) -> int:
    return next(n for n, level in enumerate(cases.LEVELS, start=1) if level.name == name)


# ---- levels ------------------------------------------------------------------------------------


def test_every_case_has_one_level_and_every_level_a_few_cases():
    counts = Counter(cases.level_of(case.tags) for case in cases.CASES)
    assert set(counts) == set(range(1, TOTAL + 1)), counts
    assert min(counts.values()) >= 2, counts


def test_levels_follow_the_order_a_learner_builds_them():
    names = [level.name for level in cases.LEVELS]
    assert names[0] == "the tutorial example" and names[-1].startswith("edge cases")
    assert names.index("boolean masks") < names.index("causal") < names.index("batch and heads")
    assert cases.level_of(("tutorial", "rank2")) == 1
    assert cases.level_of(("rank2",)) == cases.PLAIN_LEVEL == 2
    assert cases.level_of(("rank4", "gqa", "causal", "error")) == level_number("invalid input")


# ---- the project's own ports pass every level ---------------------------------------------------


@pytest.mark.parametrize("name", ["readable-port.ts", "fast-port.ts", "numpy_reference.py"])
def test_the_projects_ports_pass_every_level(name):
    code, text = run_check(name)
    assert code == 0, text
    assert "not attempted" not in text and "fail" not in text, text
    for n in range(1, TOTAL + 1):
        assert f"level {n} of {TOTAL}: " in text
    invalid = [c for c in ALL_CASES if c.expects_error]
    assert text.count(", as the project's ports)") == len(invalid)  # the right kind, every time


# ---- named mistakes ---------------------------------------------------------------------------

# file -> (the mistake it has, the level where check stops)
MISTAKE_FILES = {
    "mistake-scale_forgotten.mjs": ("scale_forgotten", "the tutorial example"),
    "mistake-scaled_by_dk.mjs": ("scaled_by_dk", "the tutorial example"),
    "mistake-softmax_wrong_axis.mjs": ("softmax_wrong_axis", "the tutorial example"),
    "mistake-softmax_without_max.mjs": ("softmax_without_max", "numerical stability (large logits)"),
    "mistake_softmax_without_max.py": ("softmax_without_max", "numerical stability (large logits)"),
    "mistake-mask_inverted.mjs": ("mask_inverted", "boolean masks"),
    "mistake_mask_inverted.py": ("mask_inverted", "boolean masks"),
    "mistake-finite_sentinel.mjs": ("finite_sentinel", "fully-masked rows"),
    "mistake-fully_masked_nan.mjs": ("fully_masked_nan", "fully-masked rows"),
    "mistake-causal_bottom_right.mjs": ("causal_bottom_right", "cross-attention (Lq != Lk, Ev != E)"),
    "mistake-gqa_tiled.mjs": ("gqa_tiled", "grouped-query heads"),
    "mistake-scale_option_ignored.mjs": ("scale_option_ignored", "scale and softcap"),
}


def _phrase(mistake: mistakes.Mistake) -> str:
    """The start of what check says for a mistake, before any number that depends on the case."""
    return mistake.says.split("{")[0].split(":")[0]


def test_every_named_mistake_has_a_learner_file():
    assert {name for name, _ in MISTAKE_FILES.values()} == {m.name for m in mistakes.MISTAKES}


@pytest.mark.parametrize("file", sorted(MISTAKE_FILES))
def test_a_learner_with_one_mistake_is_told_its_name(file):
    name, level = MISTAKE_FILES[file]
    code, text = run_check(file)
    assert code == 1, text
    assert f"Stopped at level {level_number(level)} of {TOTAL}: {level} — " in text, text
    by_name = {m.name: m for m in mistakes.MISTAKES}
    assert f"looks like {_phrase(by_name[name])}" in text, text
    others = [m.name for m in mistakes.MISTAKES if m.name != name and _phrase(m) in text]
    assert not others, f"also told {others}:\n{text}"


def test_a_learner_without_a_mistake_gets_no_name_and_passes_up_to_invalid_input():
    code, text = run_check("no-mistake.mjs")
    assert code == 1
    assert "looks like" not in text
    assert f"Stopped at level {level_number('invalid input')} of {TOTAL}: invalid input" in text


def test_the_worst_cell_and_the_example_line():
    code, text = run_check("mistake-softmax_without_max.mjs")
    line = next(line for line in text.splitlines() if line.strip().startswith("large_logits:"))
    assert " is NaN, expected 0.5" in line  # output[0, 0]: NaN where the oracle says 0.5866...
    assert "exp(1000) overflows to Infinity, and Infinity / Infinity is NaN" in line


# ---- the starter implementations -------------------------------------------------------------


@pytest.mark.parametrize("path", ["typescript/examples/my-attention.ts", "python/examples/my_attention.py"])
def test_the_starters_pass_the_first_levels_and_stop_where_their_simplicity_ends(path):
    code, text = run_check(str(REPO_ROOT / path))
    assert code == 1, text
    for n in (1, 2, 3):
        assert f"level {n} of {TOTAL}: {cases.LEVELS[n - 1].name} — " in text
    assert "level 4 of 13: boolean masks — not attempted: your function takes no options" in text
    assert f"Stopped at level {level_number('batch and heads')} of {TOTAL}: batch and heads" in text
    assert text.count("cases pass") == 3, text


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
        ("throws.mjs", "tutorial_seq3_dk4: your function threw Error: not written yet"),
        ("wrong-shape.mjs", "tutorial_seq3_dk4: output has shape [3, 3], expected [3, 2]"),
        ("not-numbers.mjs", "tutorial_seq3_dk4: output[0][1] is undefined, expected a number"),
        ("exits.mjs", "tutorial_seq3_dk4: the process running your code ended (exit code 3)"),
    ],
)
def test_a_case_that_goes_wrong_gets_one_line_and_the_run_goes_on(file, line):
    code, text = run_check(file)
    assert code == 1
    assert f"  {line}\n" in text + "\n", text
    assert "tutorial_seq4_dk8:" in text  # the next case ran too


def test_a_hang_times_out_and_the_next_case_gets_a_fresh_process():
    code, text = run_check("hangs.mjs", timeout=0.3)
    assert code == 1
    for case_id in ("tutorial_seq3_dk4", "tutorial_seq4_dk8"):
        assert f"  {case_id}: no answer within 0.3 s (an endless loop?)" in text, text


# ---- the command line ---------------------------------------------------------------------------


def test_the_command_exit_codes(capsys):
    assert cli.main(["check", str(LEARNER_FILES / "no-such-file.mjs")]) == 2
    assert cli.main(["check", str(LEARNER_FILES / "mistake-scale_forgotten.mjs")]) == 1
    out = capsys.readouterr().out
    assert "level 1 of 13: the tutorial example — 2 of 2 cases fail" in out
    assert "Levels 2-13 were not run" in out


def test_all_runs_every_level_and_an_empty_output_is_told_its_shape():
    code, text = run_check("no-mistake.mjs", run_all=True)
    assert code == 1
    assert "Stopped" not in text
    assert f"2 of {TOTAL} levels fail (level 12, 13)." in text
    # Nested arrays stop at a zero-size dim: the expected shape is stated, with its nested form.
    assert "  empty_queries: output has shape [2, 5], expected [2, 0, 4] (as nested arrays: [[], []])" in text
    assert "not attempted: nested arrays cannot carry its shapes (key [2, 0, 8] is written [[], []])" in text


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
    assert "      first step that differs: logits[0, 0] is 2, expected 1\n" in text


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
        "ACCEPTS_SHAPED_TENSORS = True\n"
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


def test_a_file_that_cannot_be_loaded_again_after_a_hang_fails_its_cases_in_one_line_each(tmp_path):
    # The first case hangs, so the second needs a fresh process; by then the file no longer loads
    # (as when a learner saves an edit in the middle of a run).
    marker = tmp_path / "loaded-once"
    path = tmp_path / "loads_once.py"
    path.write_text(
        "from pathlib import Path\n"
        "\n"
        f"MARKER = Path({str(marker)!r})\n"
        "if MARKER.exists():\n"
        "    raise RuntimeError('edited in the middle of the run')\n"
        "MARKER.touch()\n"
        "\n"
        "\n"
        "def scaled_dot_product_attention(query, key, value):\n"
        "    while True:\n"
        "        pass\n"
    )
    code, text = run_check(str(path), timeout=0.3)
    assert code == 1, text
    assert "  tutorial_seq3_dk4: no answer within 0.3 s (an endless loop?)" in text, text
    assert (
        f"  tutorial_seq4_dk8: your code could not be started again: {path} threw while loading:"
        " RuntimeError: edited in the middle of the run\n" in text
    ), text
    assert "Stopped at level 1 of 13: the tutorial example — 2 of 2 cases fail." in text, text


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
    assert f"  tutorial_seq3_dk4: {told}\n" in text + "\n", text


def test_a_learner_multiplying_zero_weights_by_nan_or_inf_fails_the_fully_masked_special_values():
    """no-mistake.mjs computes a fully-masked row as weights · value with weights of 0: right while
    value is finite, NaN where it holds NaN or ±inf. The contract says +0.0 there, and the
    fixtures hold such rows, so the edge-case level fails on exactly those cases."""
    code, text = run_check("no-mistake.mjs", run_all=True)
    level = next(line for line in text.splitlines() if line.startswith(f"level {TOTAL} of {TOTAL}:"))
    assert code == 1 and " cases fail" in level, text
    failed = {line.split(":")[0].strip() for line in text.splitlines() if "is NaN, expected 0" in line}
    assert failed == {f"fully_masked_{kind}_nan_inf_value" for kind in ("bool", "float", "causal")}
