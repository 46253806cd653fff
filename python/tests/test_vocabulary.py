"""The words of the two spellings (vocabulary.py, from contract/options.json and contract/words.json):
each word once, each spelling one word's, the camelCase of the snake_case, the options' names read
from options.json; the rule that turns a text from one spelling into the other; and
typescript/src/vocabulary.ts giving the same text as vocabulary.py for every message and
description the project has."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from conftest import ALL_CASES, LAYER_CASES

from attention_port import contract, vocabulary
from attention_port.harness.node import find_node
from attention_port.paths import REPO_ROOT

VOCABULARY_TS = REPO_ROOT / "typescript" / "src" / "vocabulary.ts"


def _camel(snake: str) -> str:
    """The camelCase of a snake_case name, by the textbook rule (the test's own, not the module's)."""
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), snake)


def test_each_word_once_and_each_spelling_one_words():
    spellings = [w.python for w in vocabulary.WORDS] + [w.javascript for w in vocabulary.WORDS]
    assert len(spellings) == len(set(spellings)), "a spelling belongs to two words, or a word is twice"
    for word in vocabulary.WORDS:
        assert word.python != word.javascript
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word.python), word
        assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word.javascript), word
        assert word.kind in {"option", "argument", "result", "function", "literal"}, word
        assert word.what, word


def test_a_names_javascript_spelling_is_its_camel_case():
    for word in vocabulary.WORDS:
        if word.kind != "literal":
            assert word.javascript == _camel(word.python), word


def test_the_options_come_from_options_json_and_only_from_there():
    declared = {
        (o["python"], o["javascript"])
        for group in contract.load("options").values()
        if isinstance(group, list)
        for o in group
        if o["python"] != o["javascript"]
    }
    assert {(w.python, w.javascript) for w in vocabulary.WORDS if w.kind == "option"} == declared
    listed = {w["python"] for w in contract.load("words")["words"]}
    assert not listed & {python for python, _ in declared}, "words.json repeats an option of options.json"
    assert vocabulary.javascript_name("query_offset") == "queryOffset"
    assert vocabulary.javascript_name("rotary_dim") == "rotaryDim"
    assert vocabulary.python_name("numKvHeads") == "num_kv_heads"


def test_names_one_way_and_back():
    assert vocabulary.javascript_name("x_kv") == "xKv"
    assert vocabulary.javascript_name("b_q") == "bQ"
    assert vocabulary.javascript_name("present_value") == "presentValue"
    assert vocabulary.javascript_name("scale") == "scale"  # spelled one way
    assert vocabulary.javascript_name("None") == "None"  # a literal is no name
    assert vocabulary.python_name("wO") == "w_o"
    assert vocabulary.python_name("theta") == "theta"


@pytest.mark.parametrize(
    ("python", "javascript"),
    [
        ("attn_mask of shape [2] does not broadcast", "attnMask of shape [2] does not broadcast"),
        ("b_q must have shape [4] (the rows of w_q)", "bQ must have shape [4] (the rows of wQ)"),
        ("x_kv has batch dims [2] but x_q has [3]", "xKv has batch dims [2] but xQ has [3]"),
        ("attn_mask[0][1] is null, expected a number", "attnMask[0][1] is null, expected a number"),
        ("num_kv_heads (3) does not divide num_heads (4)", "numKvHeads (3) does not divide numHeads (4)"),
        ("your file has no multi_head_attention", "your file has no multiHeadAttention"),
        # Only whole words: a longer name that holds one stays as it is.
        ("attn_masks, my_attn_mask, attn_mask2, $attn_mask",) * 2,
    ],
)
def test_a_text_in_each_spelling(python, javascript):
    assert vocabulary.spelled(python, "javascript") == javascript
    assert vocabulary.spelled(javascript, "python") == python
    assert vocabulary.spelled(javascript, "javascript") == javascript
    assert vocabulary.spelled(python, "python") == python


def test_literals_change_only_when_asked():
    message = "scale must be a finite number, got NaN; is_causal is None"
    assert vocabulary.spelled(message, "python") == message
    assert vocabulary.spelled(message, "python", literals=True) == (
        "scale must be a finite number, got nan; is_causal is None"
    )
    assert vocabulary.spelled(message, "javascript", literals=True) == (
        "scale must be a finite number, got NaN; isCausal is null"
    )
    assert vocabulary.spelled("-inf, True, False", "javascript", literals=True) == "-Infinity, true, false"
    assert vocabulary.spelled("-Infinity, infinite", "python", literals=True) == "-inf, infinite"


def _texts() -> list[str]:
    """Every message and description the fixtures hold, in both spellings, and a few of check's."""
    texts = []
    for case in [*ALL_CASES, *LAYER_CASES]:
        texts.append(case.description)
        if case.expected_error is not None:
            texts.append(case.expected_error[1])
    texts += [vocabulary.spelled(t, "javascript") for t in texts]
    return [
        *texts,
        "-inf",
        "True or False",
        "None, nan, inf",
        "xQ, x_q",
        "scaledDotProductAttention(Q, Q, V)",
    ]


def test_a_fixtures_message_goes_there_and_back():
    for case in [*ALL_CASES, *LAYER_CASES]:
        if case.expected_error is not None:
            message = case.expected_error[1]
            assert vocabulary.spelled(vocabulary.spelled(message, "javascript"), "python") == message


NODE_SPELLED = """
const { spelled } = await import(process.argv[1]);
const texts = JSON.parse(process.argv[2]);
const out = [];
for (const language of ["python", "javascript"]) {
  for (const literals of [false, true]) {
    out.push(texts.map((text) => spelled(text, language, { literals })));
  }
}
process.stdout.write(JSON.stringify(out));
"""


def test_typescript_spells_every_text_as_python_does():
    texts = _texts()
    run = subprocess.run(
        [
            str(find_node()),
            "--input-type=module",
            "-e",
            NODE_SPELLED,
            VOCABULARY_TS.as_uri(),
            json.dumps(texts),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    typescript = iter(json.loads(run.stdout))
    for language in ("python", "javascript"):
        for literals in (False, True):
            assert next(typescript) == [vocabulary.spelled(t, language, literals=literals) for t in texts]
