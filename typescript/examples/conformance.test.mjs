// Your attention function against every fixture case, one node:test test per case:
//
//     node --test conformance.test.mjs
//
// Put your function in place of the project's readable port, and the dtype it computes in.
import assert from "node:assert/strict";
import { test } from "node:test";
import { scaledDotProductAttention as myAttention } from "attention-port";
import { call, judge, loadCases } from "attention-port/conformance";

for (const testCase of loadCases()) {
  test(testCase.id, async (t) => {
    const verdict = judge(testCase, await call(myAttention, testCase), { dtype: "float64" });
    if (verdict.verdict === "outside") {
      t.skip(verdict.problem); // the contract defines no answer in this dtype
    }
    assert.notEqual(verdict.verdict, "fail", `${verdict.problem}\n${testCase.description}`);
  });
}
