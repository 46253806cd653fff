"""typescript/src/generated/vocabulary.ts: the words of the two spellings (attention_port.vocabulary's
WORDS, from contract/options.json and contract/words.json) for typescript/src/vocabulary.ts."""

from __future__ import annotations

import json

from attention_port import vocabulary

KINDS = ("option", "argument", "result", "function", "literal")


def render_typescript() -> str:
    """The whole text of typescript/src/generated/vocabulary.ts, as Biome formats it."""
    kinds = sorted({w.kind for w in vocabulary.WORDS}, key=KINDS.index)
    fields = ("python", "javascript", "kind")
    words = "\n".join(
        "  { " + ", ".join(f"{name}: {json.dumps(getattr(w, name))}" for name in fields) + " },"
        for w in vocabulary.WORDS
    )
    return f"""\
// Generated from contract/options.json (the options' names) and contract/words.json by
// `attention-port contract` (python/attention_port/pages/vocabulary.py): do not edit. Edit those
// files, then run `attention-port contract` (scripts/generate-contract).

/** What a word names. */
export type WordKind = {" | ".join(json.dumps(k) for k in kinds)};

/** A word spelled two ways: as Python writes it (snake_case; True, None, nan) and as JavaScript does
 * (camelCase; true, null, NaN). */
export interface Word {{
  readonly python: string;
  readonly javascript: string;
  readonly kind: WordKind;
}}

/** Every word of the two spellings: the options spelled two ways, then the other words. */
export const WORDS: readonly Word[] = [
{words}
];
"""
