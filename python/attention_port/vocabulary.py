"""The words of the two spellings: each name Python writes in snake_case and JavaScript in camelCase
(attn_mask and attnMask, x_q and xQ, present_key and presentKey), and the literals of the two
languages (None and null, nan and NaN), with the one rule that turns a text from one spelling into
the other.

The options' names are declared in contract/options.json, every other word in contract/words.json;
typescript/src/vocabulary.ts is this module's twin, over the same words (generated from the same
files into typescript/src/generated/vocabulary.ts). The rule: every whole word of the other spelling
is replaced, and nothing else changes, so "attn_mask[0]" is "attnMask[0]" while "attn_masks" stays.
Literals change only when asked: a port's message is written with JavaScript's (got NaN, is null)
in both languages, while check says them in the learner's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from attention_port import contract

Language = Literal["python", "javascript"]
LANGUAGES: tuple[Language, Language] = ("python", "javascript")
# A word is a run of these: a name next to one of them is part of a longer name, and stays.
_NAME = "A-Za-z0-9_$"


@dataclass(frozen=True)
class Word:
    python: str
    javascript: str
    kind: str  # option, argument, result, function or literal
    what: str  # what the word names, in a few words

    def spelling(self, language: Language) -> str:
        return self.python if language == "python" else self.javascript


def _words() -> tuple[Word, ...]:
    """options.json's options (those spelled two ways, each once), then words.json's words."""
    options: dict[str, Word] = {}
    for group, declared in contract.load("options").items():
        if not isinstance(declared, list):
            continue  # "about"
        for option in declared:
            python, javascript = option["python"], option["javascript"]
            if python != javascript:
                options.setdefault(python, Word(python, javascript, "option", f"an option ({group})"))
    words = (
        Word(w["python"], w["javascript"], w["kind"], w["what"]) for w in contract.load("words")["words"]
    )
    return (*options.values(), *words)


WORDS: tuple[Word, ...] = _words()
# name -> its JavaScript spelling, and back: the names alone (no literal), each way.
JAVASCRIPT: dict[str, str] = {w.python: w.javascript for w in WORDS if w.kind != "literal"}
PYTHON: dict[str, str] = {w.javascript: w.python for w in WORDS if w.kind != "literal"}


def _table(language: Language, literals: bool) -> tuple[dict[str, str], re.Pattern[str]]:
    """The other spelling -> `language`'s, and the pattern that finds those words as whole words."""
    other = LANGUAGES[1 - LANGUAGES.index(language)]
    words = {w.spelling(other): w.spelling(language) for w in WORDS if literals or w.kind != "literal"}
    pattern = re.compile(rf"(?<![{_NAME}])(?:{'|'.join(map(re.escape, words))})(?![{_NAME}])")
    return words, pattern


_TABLES = {
    (language, literals): _table(language, literals) for language in LANGUAGES for literals in (False, True)
}


def spelled(text: str, language: Language, *, literals: bool = False) -> str:
    """`text` with every word of the other spelling in `language`'s: attn_mask is attnMask in
    JavaScript, and back in Python. Only whole words change ("-inf" is "-Infinity"); with
    literals=True the literals too (True is true, None null, nan NaN, inf Infinity)."""
    words, pattern = _TABLES[language, literals]
    return pattern.sub(lambda found: words[found.group()], text)


def javascript_name(name: str) -> str:
    """A name as JavaScript spells it: num_heads is numHeads; a name spelled one way is itself."""
    return JAVASCRIPT.get(name, name)


def python_name(name: str) -> str:
    """A name as Python spells it: numHeads is num_heads; a name spelled one way is itself."""
    return PYTHON.get(name, name)
