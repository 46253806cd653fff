// The conformance kit (typescript/conformance/): its cases, its judge on the project's own ports
// and on a float32 computation, thrown errors, and the rule on one cell. Its verdicts are held to
// compare.py on every fixture, port and dtype by python/tests/test_conformance_kit.py.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkOutput, DTYPES, K } from "../conformance/judge.ts";
import { distinctDigits, judge, LEVELS, loadCases, runCases, type Verdict } from "../conformance/kit.ts";
import { attentionModel, rank4 } from "../conformance/peers.ts";
import { loadFixtures } from "../runners/fixtures.ts";
import { AttentionInputError, scaledDotProductAttention } from "../src/attention.ts";

/** The verdicts of a run, counted. */
async function tally(run: AsyncIterable<Verdict>): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for await (const v of run) {
    counts[v.verdict] = (counts[v.verdict] ?? 0) + 1;
  }
  return counts;
}

/** Every number rounded to float32, at any depth (booleans and the rest kept). */
const fround = (x: unknown): unknown =>
  Array.isArray(x) ? x.map(fround) : typeof x === "number" ? Math.fround(x) : x;

describe("loadCases", () => {
  test("gives every fixture case, in order, with its level, and filters by level and tag", () => {
    const every = loadCases();
    assert.deepEqual(
      every.map((c) => c.id),
      loadFixtures().map((c) => c.id),
    );
    assert.deepEqual(
      [...new Set(every.map((c) => c.level))].sort((a, b) => a - b),
      Array.from({ length: LEVELS.length }, (_, n) => n + 1),
    );
    const causal = loadCases({ tags: ["causal"] });
    assert.ok(causal.length > 3 && causal.every((c) => c.tags.includes("causal")));
    const first = loadCases({ levels: [1, 2] });
    assert.deepEqual(
      first.map((c) => c.id),
      every.filter((c) => c.level <= 2).map((c) => c.id),
    );
    const said = `levels: 0 is not a level (1 to ${LEVELS.length})`; // the attention core's levels
    assert.throws(() => loadCases({ levels: [0] }), { name: "RangeError", message: said });
    const invalid = loadCases({ tags: ["error"] });
    assert.ok(invalid.every((c) => c.expected.error !== null && c.rule === null));
  });

  test("a tensor with a zero dim comes with its shape, as the ports take it", () => {
    const empty = loadCases().find((c) => c.id === "empty_keys");
    assert.ok(empty !== undefined);
    assert.deepEqual((empty.inputs.key as { shape: number[] }).shape.includes(0), true);
  });
});

describe("runCases and judge", () => {
  test("the readable port passes every case at float64 (one is outside the contract)", async () => {
    assert.deepEqual(
      await tally(runCases(scaledDotProductAttention, { dtype: "float64", matchKind: true })),
      {
        pass: loadCases().length - 1,
        outside: 1,
      },
    );
  });

  test("an answer rounded to float32 passes at float32 and fails at float64, with the digits apart", async () => {
    const float32 = (q: unknown, k: unknown, v: unknown, o: object) =>
      fround(
        scaledDotProductAttention(
          fround(q) as number[][],
          fround(k) as number[][],
          fround(v) as number[][],
          o,
        ),
      );
    const at32 = await tally(runCases(float32, { dtype: "float32" }));
    assert.equal(at32.fail, undefined, JSON.stringify(at32));
    assert.ok(at32.outside > 1); // inputs float32 cannot hold
    const verdicts: Verdict[] = [];
    for await (const v of runCases(float32, { dtype: "float64", levels: [1] })) {
      verdicts.push(v);
    }
    assert.ok(verdicts.every((v) => v.verdict === "fail"));
    for (const v of verdicts) {
      assert.ok(v.worst !== null && v.budgetUsed !== null && v.budgetUsed > 1);
      const [got, want] = distinctDigits(v.worst.actual, v.worst.expected);
      assert.ok(
        v.problem?.startsWith(`output[${v.worst.cell.join(", ")}] is ${got}, expected ${want} (`),
        v.problem ?? "",
      );
      assert.notEqual(Number(got), Number(want));
    }
  });

  test("an async function, a thrown error and its kind", async () => {
    const invalid = loadCases({ tags: ["error"] });
    const refuses = async () => {
      throw new Error("no");
    };
    assert.deepEqual(await tally(runCases(refuses, { tags: ["error"] })), { pass: invalid.length });
    assert.deepEqual(await tally(runCases(refuses, { tags: ["error"], matchKind: true })), {
      fail: invalid.length,
    });
    const [first] = invalid;
    assert.equal(
      judge(first, new AttentionInputError(first.expected.error ?? "type", "x"), { matchKind: true }).verdict,
      "pass",
    );
    assert.match(judge(first, [[1]]).problem ?? "", /^returned an answer, expected an error of kind/);
    const valid = loadCases({ levels: [1] })[0];
    assert.match(judge(valid, new Error("boom")).problem ?? "", /^threw Error: boom/);
    assert.match(judge(valid, [[1, 2], [3]]).problem ?? "", /ragged/);
    assert.match(judge(valid, [[1]]).problem ?? "", /^output has shape \[1, 1\], expected \[3, 2\]/);
    assert.throws(() => judge(valid, [[1]], { dtype: "float8" as "float64" }), /dtype: float8 is not one of/);
  });

  test("steps: the first that left its yardstick is named when the output fails", () => {
    const c = loadCases({ levels: [1] })[0];
    const rule = c.rule;
    assert.ok(rule !== null);
    const output = Array.from(rule.expected.output.data, (x, n) => (n === 0 ? x + 1e-6 : x));
    const weights = Array.from(rule.expected.weights.data, (x) => x * (1 + 1e-6));
    const verdict = judge(c, {
      weights: { shape: rule.expected.weights.shape, data: weights },
      output: Float64Array.from(output),
    });
    assert.equal(verdict.verdict, "fail");
    assert.equal(verdict.firstDivergentStep, "weights");
    assert.deepEqual(verdict.worst?.cell, [0, 0]);
  });
});

describe("distinctDigits", () => {
  test("six digits at least, more until the two differ; -0 and the infinities kept", () => {
    assert.deepEqual(
      distinctDigits(3.2417402, 3.2417397),
      ["3.2417402", "3.2417397"], // six digits would read 3.24174 twice
    );
    assert.deepEqual(distinctDigits(1, 2), ["1", "2"]);
    assert.deepEqual(distinctDigits(0, -0), ["0", "-0"]);
    assert.deepEqual(distinctDigits(1e300, Infinity), ["1e+300", "Infinity"]);
  });
});

describe("the rule, on one cell", () => {
  const unit = K * DTYPES.float64.u;
  /** One row of one key and one value feature: output [1, 1] with the oracle's budget (and the
   * fallback where the budget is infinite), the same in every dtype. */
  const values = (output: number, budget: number, logit = 0, fallback: number | null = null) => {
    const one = {
      outside: null,
      output: { shape: [1, 1], data: [budget] },
      fallback: fallback === null ? null : { shape: [1, 1], data: [fallback] },
    };
    return {
      output: { shape: [1, 1], data: [output] },
      logits: { shape: [1, 1], data: [logit] },
      budgets: { float64: one, float32: one, float16: one, bfloat16: one },
    };
  };
  const check = (output: number[], expected: ReturnType<typeof values>) =>
    checkOutput({ shape: [1, 1], data: output }, { expected });

  test("an error inside the budget passes with its share; one outside fails", () => {
    const inside = check([1 + 0.5 * 2 * unit], values(1, 2 * unit));
    assert.equal(inside.passed, true);
    assert.ok(Math.abs(inside.budgetUsed - 0.5) < 1e-12);
    assert.equal(check([1 + 1.5 * 2 * unit], values(1, 2 * unit)).passed, false);
  });

  test("NaN must meet NaN, an infinity the same infinity, a fully-masked row +0.0", () => {
    assert.equal(check([NaN], values(NaN, 0)).passed, true);
    assert.equal(check([NaN], values(1, 2 * unit)).passed, false);
    assert.equal(check([1], values(NaN, 2 * unit)).passed, false);
    assert.equal(check([Infinity], values(Infinity, 0)).passed, true);
    assert.equal(check([-Infinity], values(Infinity, 0)).passed, false);
    assert.equal(check([0], values(0, 0, -Infinity)).passed, true);
    const negative = check([-0], values(0, 0, -Infinity));
    assert.equal(negative.passed, false);
    assert.match(negative.problem ?? "", /-0\.0 where \+0\.0/);
    assert.equal(check([-0], values(0, 0)).passed, true); // not masked: -0.0 is 0
  });

  test("where the budget is infinite, the answer must stay within the fallback (the values it averages)", () => {
    const huge = values(1.5, Infinity, 0, 2);
    assert.equal(check([1.9], huge).passed, true);
    const beyond = check([2.5], huge);
    assert.equal(beyond.passed, false);
    assert.match(beyond.problem ?? "", /beyond every value/);
    assert.equal(check([Infinity], huge).passed, false);
  });
});

describe("the peers' adapter (peers.ts)", () => {
  test("lays every valid case out as rank 4, the mask broadcast, without changing a value", () => {
    for (const c of loadCases().filter((x) => x.rule !== null)) {
      const layout = rank4(c);
      assert.ok(layout !== null && c.rule !== null);
      for (const name of ["query", "key", "value"] as const) {
        assert.equal(layout[name].shape.length, 4, `${c.id} ${name}`);
        assert.deepEqual(layout[name].shape.slice(-2), c.rule[name].shape.slice(-2), c.id);
        assert.equal(layout[name].data, c.rule[name].data, c.id); // the same values, laid out anew
      }
      const logits = c.rule.expected.logits.shape;
      assert.deepEqual(layout.outputShape, c.rule.expected.output.shape, c.id);
      if (layout.mask !== null) {
        assert.equal(
          layout.mask.tensor.data.length,
          logits.reduce((a, n) => a * n, 1),
          c.id,
        );
      }
    }
    const broadcast = loadCases().find((x) => x.id === "mask_broadcast_rank1");
    assert.ok(broadcast?.rule?.attnMask);
    const mask = rank4(broadcast)?.mask?.tensor;
    const row = Array.from(broadcast.rule.attnMask.data, Number);
    assert.deepEqual(Array.from(mask?.data ?? []).slice(0, row.length), row); // every row the same
    assert.deepEqual(Array.from(mask?.data ?? []).slice(-row.length), row);
  });

  test("the ONNX model is one Attention node with the case's options", () => {
    const c = loadCases().find((x) => x.id === "softcap_scale");
    assert.ok(c !== undefined);
    const layout = rank4(c);
    assert.ok(layout !== null);
    const bytes = attentionModel(layout, "float32");
    assert.deepEqual([...bytes.slice(0, 2)], [0x08, 11]); // field 1 (ir_version) = 11
    const text = new TextDecoder("latin1").decode(bytes);
    for (const word of ["Attention", "softcap", "scale", "is_causal", "Q", "K", "V", "Y"]) {
      assert.ok(text.includes(word), word);
    }
  });
});
