// The conformance kit (typescript/conformance/): its cases, its judge on the project's own ports
// and on a float32 computation, thrown errors, and the rule on one cell. Its verdicts are held to
// compare.py on every fixture, port and dtype by python/tests/test_conformance_kit.py.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { checkOutput, DTYPES, K } from "../conformance/judge.ts";
import {
  call,
  distinctDigits,
  type JudgeOptions,
  judge,
  LEVELS,
  loadCases,
  runCases,
  type TestCase,
  TIMEOUT_SECONDS,
  type Verdict,
} from "../conformance/kit.ts";
import { attentionModel, rank4 } from "../conformance/peers.ts";
import { loadFixtures } from "../golden/reader.ts";
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

  test("windows, sinks and ragged batches come with their options as the ports take them", () => {
    const byId = new Map(loadCases().map((c) => [c.id, c]));
    const options = (id: string) => byId.get(id)!.options as Record<string, unknown>;
    assert.deepEqual(options("window_gqa_offset_kv_seqlen").window, [3, 0]); // [left, right]
    assert.deepEqual(options("window_gqa_offset_kv_seqlen").kvSeqlen, [9, 5]);
    assert.deepEqual(options("window_both_sides_unbounded").window, [null, null]);
    assert.deepEqual(options("ragged_decode_batch").queryOffset, [6, 3, 4]); // one per sequence
    assert.deepEqual(options("ragged_kv_seqlen_causal_per_batch").kvSeqlen, [
      [5, 3],
      [4, 1],
    ]);
    assert.equal(options("sinks_streaming_window").sinkTokens, 2);
    const [nan, half] = options("sinks_logits_nan").sinkLogits as number[]; // NaN as a number, not a string
    assert.ok(Number.isNaN(nan) && half === 0.5);
    assert.deepEqual(options("sinks_logits_minus_inf").sinkLogits, [-Infinity, -Infinity]);
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

describe("honest slips: a verdict or a clear message, never a wrong pass", () => {
  const tutorial = () => {
    const c = loadCases({ levels: [1] }).find((t) => t.id === "tutorial_seq3_dk4");
    assert.ok(c !== undefined && c.rule !== null);
    return { c, right: Array.from(c.rule.expected.output.data), shape: c.rule.expected.output.shape };
  };

  test("{ shape, data } is judged only when the data is exactly the shape's numbers", () => {
    const { c, right, shape } = tutorial();
    assert.deepEqual(shape, [3, 2]);
    assert.equal(judge(c, { shape, data: right }).verdict, "pass");
    const longer = judge(c, { shape: [3, 2], data: [...right, 1e9, Number.NaN] });
    assert.equal(longer.verdict, "fail");
    assert.equal(longer.problem, "output has 8 numbers, its shape [3, 2] holds 6");
    assert.equal(judge(c, { shape: [3, 2], data: right.slice(1) }).verdict, "fail");
    assert.equal(
      judge(c, { shape: null, data: right }).problem,
      "output's shape is not a list of whole numbers",
    );
    assert.equal(judge(c, { shape: [3, 2.5], data: right }).verdict, "fail");
    assert.equal(
      judge(c, { shape, data: right.map(String) }).problem,
      "output's data holds string, not a number",
    );
    assert.equal(judge(c, { shape, data: null }).problem, "output's data holds null, not a number");
    assert.equal(judge(c, { shape, data: Float32Array.from(right) }).verdict, "fail"); // float64's budget
    assert.equal(judge(c, { shape, data: Float32Array.from(right) }, { dtype: "float32" }).verdict, "pass");
  });

  test("a BigInt, a string, a boolean or a DataView answer fails with a problem line", () => {
    const { c, right } = tutorial();
    const bigints = BigInt64Array.from(right, (x) => BigInt(Math.round(x)));
    assert.equal(judge(c, bigints).problem, "output holds bigint, not a number");
    assert.equal(
      judge(
        c,
        BigUint64Array.from(right, () => 0n),
      ).problem,
      "output holds bigint, not a number",
    );
    assert.equal(
      judge(c, [
        [1n, 2n],
        [3n, 4n],
        [5n, 6n],
      ]).problem,
      "output holds bigint, not a number",
    );
    assert.equal(judge(c, "0.5").problem, "output holds string, not a number");
    assert.equal(
      judge(c, [
        [true, false],
        [true, false],
        [true, false],
      ]).problem,
      "output holds boolean, not a number",
    );
    assert.equal(
      judge(c, new DataView(new ArrayBuffer(48))).problem,
      "output holds a DataView, not a number",
    );
  });

  test("a missing case or options that are not an object: a TypeError that says so", () => {
    const { c, right } = tutorial();
    const float32 = right.map(Math.fround);
    assert.throws(
      () => judge(undefined as unknown as TestCase, right),
      new TypeError("judge: the case is undefined, not one of loadCases()'s cases"),
    );
    assert.throws(() => judge(null as unknown as TestCase, right), /^TypeError: judge: the case is null/);
    assert.throws(
      () => judge(c, float32, "float32" as unknown as JudgeOptions),
      new TypeError(
        'judge: the options are the string "float32", not an object such as { dtype: "float32" }',
      ),
    );
    assert.equal(judge(c, { shape: [3, 2], data: float32 }, null as unknown as JudgeOptions).verdict, "fail");
    assert.equal(judge(c, { shape: [3, 2], data: float32 }, { dtype: "float32" }).verdict, "pass");
  });

  test("a thrown null-prototype object, or one with such a kind, is a verdict, in judge and runCases", async () => {
    const bare = Object.create(null);
    const refuses = () => {
      throw bare;
    };
    const invalid = loadCases({ tags: ["error"] });
    assert.deepEqual(await tally(runCases(refuses, { tags: ["error"] })), { pass: invalid.length });
    const { c } = tutorial();
    assert.equal(judge(c, await call(refuses, c)).problem, "threw Error: threw a non-Error: [object Object]");
    const odd = Object.assign(new Error("no"), { kind: bare });
    assert.equal(
      judge(invalid[0], odd, { matchKind: true }).problem?.startsWith("threw Error ([object Object]): no"),
      true,
    );
  });

  test("a function that changes its inputs in place changes nothing for the next call or loadCases", async () => {
    const { c } = tutorial();
    const query = structuredClone(c.inputs.query);
    const vandal = (q: unknown, k: unknown) => {
      for (const row of q as number[][]) {
        row.fill(1e39);
      }
      (k as number[][])[0][0] = Number.NaN;
      return [
        [0, 0],
        [0, 0],
        [0, 0],
      ];
    };
    const wrong = judge(c, await call(vandal, c), { dtype: "float32" });
    assert.equal(wrong.verdict, "fail"); // not "outside": the oracle's inputs decide that
    assert.deepEqual(c.inputs.query, query);
    assert.equal(judge(c, await call(scaledDotProductAttention, c)).verdict, "pass");
    // Even a case's own inputs, changed by hand, are its own: the next loadCases has the stored ones.
    (c.inputs.query as number[][])[0][0] = 1e39;
    assert.deepEqual(tutorial().c.inputs.query, query);
    const invalid = loadCases({ tags: ["error"] })[0];
    const stored = structuredClone(invalid.inputs);
    (invalid.inputs as { query: unknown }).query = "changed";
    assert.deepEqual(loadCases({ tags: ["error"] })[0].inputs, stored);
    // The values the judge reads cannot be changed at all.
    assert.throws(() => {
      (c.rule?.query.data as number[])[0] = 1e39;
    }, TypeError);
  });

  test("runCases gives up on a promise that never settles after timeoutSeconds, and goes on", async () => {
    let calls = 0;
    const stuckOnFirst = (query: unknown, key: unknown, value: unknown, options?: object) => {
      calls++;
      return calls === 1
        ? new Promise(() => {})
        : scaledDotProductAttention(query as number[][], key as number[][], value as number[][], options);
    };
    const start = performance.now();
    const verdicts: Verdict[] = [];
    for await (const v of runCases(stuckOnFirst, { levels: [1], timeoutSeconds: 0.25 })) {
      verdicts.push(v);
    }
    assert.ok(performance.now() - start < 20_000);
    assert.equal(verdicts[0].verdict, "fail");
    assert.equal(verdicts[0].problem, "did not return within 0.25 s");
    assert.ok(verdicts.length > 1 && verdicts.slice(1).every((v) => v.verdict === "pass"));
    assert.equal(TIMEOUT_SECONDS, 60);
    await assert.rejects(
      runCases(stuckOnFirst, { timeoutSeconds: 0 }).next(),
      new RangeError("timeoutSeconds: 0 is not a positive number of seconds"),
    );
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
