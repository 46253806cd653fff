import assert from "node:assert/strict";
import { test } from "node:test";

import { declaredParameterCount } from "../src/check.ts";

// `attention-port check` gives a learner's function its options only when it declares a 4th
// parameter. function.length stops at the first parameter with a default, so the source counts too.

test("a parameter with a default value is counted (function.length is not enough)", () => {
  function withDefault(_q: unknown, _k: unknown, _v: unknown, _options = {}) {}
  assert.equal(withDefault.length, 3);
  assert.equal(declaredParameterCount(withDefault), 4);
});

test("three parameters mean no options", () => {
  assert.equal(
    declaredParameterCount((_q: unknown, _k: unknown, _v: unknown) => 0),
    3,
  );
  assert.equal(
    declaredParameterCount(function attention(_q: unknown, _k: unknown, _v: unknown) {}),
    3,
  );
});

test("destructured options, defaults holding commas and brackets, and a rest parameter", () => {
  function destructured(_q: unknown, _k: unknown, _v: unknown, { isCausal = false, scale = [1, 2] } = {}) {
    return [isCausal, scale];
  }
  assert.equal(declaredParameterCount(destructured), 4);
  function quoted(_q: unknown, _k = "a, b)", _v = ")") {}
  assert.equal(declaredParameterCount(quoted), 3);
  assert.equal(
    declaredParameterCount((..._args: unknown[]) => 0),
    Number.POSITIVE_INFINITY,
  );
  assert.equal(
    declaredParameterCount((_q: unknown) => 0),
    1,
  );
});

test("commas and brackets inside comments in the parameter list are not parameters", () => {
  function blockComment(_q: unknown, _k: unknown, _v: unknown /*, options (a later version) */) {}
  assert.equal(declaredParameterCount(blockComment), 3);
  function lineComments(
    _q: unknown, // [Lq, E], (rows)
    _k: unknown, // [Lk, E]
    _v: unknown, // [Lk, Ev], no options yet
  ) {}
  assert.equal(declaredParameterCount(lineComments), 3);
  function commentedOptions(_q: unknown, _k: unknown, _v: unknown, /* { isCausal } */ _options = {}) {}
  assert.equal(declaredParameterCount(commentedOptions), 4);
});
