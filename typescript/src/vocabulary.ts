/**
 * The words of the two spellings: each name Python writes in snake_case and JavaScript in camelCase
 * (attn_mask and attnMask, x_q and xQ, present_key and presentKey), and the literals of the two
 * languages (None and null, nan and NaN), with the one rule that turns a text from one spelling into
 * the other. The twin of python/attention_port/vocabulary.py, over the same words
 * (./generated/vocabulary.ts, generated from contract/options.json and contract/words.json).
 *
 * The rule: every whole word of the other spelling is replaced, and nothing else changes, so
 * "attn_mask[0]" is "attnMask[0]" while "attn_masks" stays. Literals change only when asked: a port's
 * message is written with JavaScript's (got NaN, is null) in both languages.
 */

import { WORDS, type Word } from "./generated/vocabulary.ts";

export { WORDS, type Word, type WordKind } from "./generated/vocabulary.ts";

export type Language = "python" | "javascript";

/** A word is a run of these: a name next to one of them is part of a longer name, and stays. */
const NAME = "A-Za-z0-9_$";

const names = WORDS.filter((w) => w.kind !== "literal");
/** Each name's JavaScript spelling by its Python one, and back (no literal). */
export const JAVASCRIPT: ReadonlyMap<string, string> = new Map(names.map((w) => [w.python, w.javascript]));
export const PYTHON: ReadonlyMap<string, string> = new Map(names.map((w) => [w.javascript, w.python]));

/** The other spelling -> `language`'s, and the pattern that finds those words as whole words. */
function table(language: Language, literals: boolean): { words: Map<string, string>; pattern: RegExp } {
  const other: Language = language === "python" ? "javascript" : "python";
  const chosen = WORDS.filter((w: Word) => literals || w.kind !== "literal");
  const words = new Map(chosen.map((w) => [w[other], w[language]]));
  const alternatives = [...words.keys()].map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("|");
  return { words, pattern: new RegExp(`(?<![${NAME}])(?:${alternatives})(?![${NAME}])`, "g") };
}

const TABLES = {
  python: [table("python", false), table("python", true)],
  javascript: [table("javascript", false), table("javascript", true)],
} as const;

/** `text` with every word of the other spelling in `language`'s: attn_mask is attnMask in
 * JavaScript, and back in Python. Only whole words change ("-inf" is "-Infinity"); with
 * `literals: true` the literals too (True is true, None null, nan NaN, inf Infinity). */
export function spelled(text: string, language: Language, { literals = false } = {}): string {
  const { words, pattern } = TABLES[language][literals ? 1 : 0];
  return text.replace(pattern, (word) => words.get(word)!);
}

/** A name as JavaScript spells it: num_heads is numHeads; a name spelled one way is itself. */
export function javascriptName(name: string): string {
  return JAVASCRIPT.get(name) ?? name;
}

/** A name as Python spells it: numHeads is num_heads; a name spelled one way is itself. */
export function pythonName(name: string): string {
  return PYTHON.get(name) ?? name;
}
