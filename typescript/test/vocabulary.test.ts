// The words of the two spellings (typescript/src/vocabulary.ts): the names each way and the rule that
// turns a text from one spelling into the other. python/tests/test_vocabulary.py holds the words to
// the contract and this module's every text to vocabulary.py's.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { javascriptName, pythonName, spelled, WORDS } from "../src/vocabulary.ts";

describe("the vocabulary", () => {
  test("names each way; a name spelled one way, or a literal, is itself", () => {
    assert.equal(javascriptName("query_offset"), "queryOffset");
    assert.equal(javascriptName("num_kv_heads"), "numKvHeads");
    assert.equal(javascriptName("w_q"), "wQ");
    assert.equal(javascriptName("present_key"), "presentKey");
    assert.equal(javascriptName("scale"), "scale");
    assert.equal(javascriptName("None"), "None");
    assert.equal(pythonName("rotaryDim"), "rotary_dim");
    assert.equal(pythonName("xKv"), "x_kv");
    assert.equal(pythonName("theta"), "theta");
  });

  test("each word has two spellings, and each spelling is one word's", () => {
    const spellings = WORDS.flatMap((w) => [w.python, w.javascript]);
    assert.equal(new Set(spellings).size, spellings.length);
  });

  test("a message in each spelling: whole words only", () => {
    const pairs: [string, string][] = [
      ["attn_mask of shape [2] does not broadcast", "attnMask of shape [2] does not broadcast"],
      [
        "b_q must have shape [4] (the rows of w_q), got [3]",
        "bQ must have shape [4] (the rows of wQ), got [3]",
      ],
      ["x_kv has batch dims [2] but x_q has [3]", "xKv has batch dims [2] but xQ has [3]"],
      [
        "attn_masks, my_attn_mask, attn_mask2, $attn_mask",
        "attn_masks, my_attn_mask, attn_mask2, $attn_mask",
      ],
    ];
    for (const [python, javascript] of pairs) {
      assert.equal(spelled(python, "javascript"), javascript);
      assert.equal(spelled(javascript, "python"), python);
    }
  });

  test("literals change only when asked", () => {
    const message = "scale must be a finite number, got NaN; is_causal is None";
    assert.equal(spelled(message, "javascript"), "scale must be a finite number, got NaN; isCausal is None");
    assert.equal(
      spelled(message, "javascript", { literals: true }),
      "scale must be a finite number, got NaN; isCausal is null",
    );
    assert.equal(spelled("-Infinity, true", "python", { literals: true }), "-inf, True");
  });
});
