// The explorer's logic (typescript/explorer/model.ts, layer-model.ts, decode-model.ts) and its
// build (build.ts), without a browser. The page itself is tested in Chromium by
// python/tests/test_explorer_browser.py; the tolerance rule it shows is the conformance kit's
// (typescript/test/conformance.test.ts).

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { BACKENDS } from "../explorer/backends.ts";
import { buildPage, bundle, explorerCase, PAGE_DTYPES } from "../explorer/build.ts";
import { DECODE_HEAD, decodeSentence, decodeStep } from "../explorer/decode-model.ts";
import {
  LAYER_SIZES,
  layerExample,
  mergeHeads,
  ROPE_POSITIONS,
  ropeView,
  splitHeads,
  walkLayer,
} from "../explorer/layer-model.ts";
import {
  camelCaseMessage,
  caseTokens,
  errorTarget,
  errorVerdict,
  formatTensorText,
  jacobianSize,
  outerIndices,
  parseTensorText,
  REAL_MODEL_PRESET,
  randomInputs,
  SQRT_DK_DRAWS,
  SQRT_DK_GRID,
  shortNumber,
  sliceAt,
  sqrtDkPoint,
  tutorialInputs,
  viridis,
  weightArithmetic,
} from "../explorer/model.ts";
import { type FixtureTensor, loadFixtures } from "../golden/reader.ts";
import { jsLiteral } from "../pages/page-build.ts";
import { attentionSteps, scaledDotProductAttention } from "../src/attention.ts";

describe("reading what a reader types", () => {
  test("JSON with the bare words NaN, Infinity and -Infinity", () => {
    const parsed = parseTensorText("[[1, -Infinity], [NaN, Infinity]]");
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value, [
      [1, -Infinity],
      [NaN, Infinity],
    ]);
  });

  test("an empty box is no tensor; a string stays a string for the port to refuse", () => {
    assert.deepEqual(parseTensorText("  "), { ok: true, value: null });
    assert.deepEqual(parseTensorText('[["1", "NaN x"]]'), { ok: true, value: [["1", "NaN x"]] });
  });

  test("text that is not JSON says so", () => {
    const parsed = parseTensorText("[[1, 2]");
    assert.equal(parsed.ok, false);
    assert.match((parsed as { message: string }).message, /^not JSON/);
  });

  test("written text reads back to the same numbers, -0 and non-finite ones included", () => {
    const tensor = [
      [
        [0.1, -0, 5e-324],
        [NaN, -Infinity, 1e300],
      ],
    ];
    const parsed = parseTensorText(formatTensorText(tensor));
    assert.ok(parsed.ok);
    assert.deepEqual(parsed.value, tensor);
    assert.ok(Object.is((parsed.value as number[][][])[0][0][1], -0));
  });

  test("an error message goes next to the input it names", () => {
    assert.equal(
      errorTarget("key has feature size 6 but query has 8 (query [2, 4, 8], key [2, 5, 6])"),
      "key",
    );
    assert.equal(errorTarget("attnMask of shape [2, 2] does not broadcast"), "attnMask");
    assert.equal(errorTarget("scale must be a finite number, got NaN"), "scale");
    assert.equal(errorTarget("softcap must be >= 0, got -1"), "softcap");
    assert.equal(errorTarget("isCausal must be a boolean, got string"), "causal");
    assert.equal(errorTarget("memoryLimit must be a positive integer"), "options");
  });
});

describe("presets and slices", () => {
  test("the tutorial example gives the tutorial's output through the port", () => {
    const { query, key, value } = tutorialInputs();
    const output = scaledDotProductAttention(query, key, value);
    // softmax([2, 0, 1] / 2) · V, worked by hand: weights e^1, e^0, e^0.5 over their sum.
    const [a, b, c] = [Math.E, 1, Math.exp(0.5)];
    const s = a + b + c;
    assert.ok(Math.abs(output[0][0] - (a * 1 + b * 3 + c * 5) / s) < 1e-14);
  });

  test("seeded random inputs repeat for a seed and have the asked shapes", () => {
    const sizes = { lq: 5, lk: 7, e: 3, ev: 2, hq: 4, hkv: 2, seed: 9 };
    const first = randomInputs(sizes);
    assert.deepEqual(randomInputs(sizes), first);
    assert.notDeepEqual(randomInputs({ ...sizes, seed: 10 }), first);
    const steps = attentionSteps(
      first.query as number[][][],
      first.key as number[][][],
      first.value as number[][][],
      {
        enableGqa: true,
      },
    );
    assert.deepEqual(steps.outputShape, [4, 5, 2]);
    const flat = (first.query as number[][][]).flat(2);
    assert.ok(flat.every((x) => Number(x.toPrecision(3)) === x));
  });

  test("outer indices walk [B..., Hq] in row-major order; sliceAt picks one matrix", () => {
    assert.deepEqual(outerIndices([]), [[]]);
    assert.deepEqual(outerIndices([2, 2]), [
      [0, 0],
      [0, 1],
      [1, 0],
      [1, 1],
    ]);
    const tensor = [
      [[[1]], [[2]]],
      [[[3]], [[4]]],
    ];
    assert.deepEqual(sliceAt(tensor, [1, 0]), [[3]]);
  });

  test("short numbers and the colour map", () => {
    assert.equal(shortNumber(-Infinity), "−∞");
    assert.equal(shortNumber(0.506480391055654), "0.506");
    assert.equal(shortNumber(-0), "-0");
    assert.equal(shortNumber(-1000), "-1000");
    assert.equal(shortNumber(-1002), "-1002"); // not -1000 like its neighbour
    assert.equal(shortNumber(123.456), "123.5");
    assert.equal(viridis(0).colour, "rgb(68, 1, 84)");
    assert.equal(viridis(1).colour, "rgb(253, 231, 37)");
    assert.equal(viridis(0).darkText, false);
    assert.equal(viridis(1).darkText, true);
  });

  test("a weight cell's arithmetic uses the port's numbers", () => {
    const { query, key, value } = tutorialInputs();
    const steps = attentionSteps(query, key, value);
    const lines = weightArithmetic({
      queryRow: query[0],
      keyRow: key[2],
      score: (steps.scores as number[][])[0][2],
      scale: 0.5,
      softcap: 0,
      logitsRow: (steps.weights as number[][])[0].map((_, j) => (steps.scores as number[][])[0][j] * 0.5),
      weight: (steps.weights as number[][])[0][2],
      i: 0,
      j: 2,
      isCausal: false,
      maskCell: null,
    });
    assert.equal(lines[0], "q0·k2 = 1×1 + 0×1 + 1×0 + 0×0 = 1");
    assert.equal(lines[1], "× scale 0.5 = 0.5");
    // Full precision, the row max subtracted in the open, a negative operand in parentheses.
    assert.ok(lines.includes("x − row max = 0.5 − 1 = -0.5"), lines.join("\n"));
    assert.ok(lines.includes(`exp(-0.5) = ${Math.exp(-0.5)}`), lines.join("\n"));
    const sum = Math.exp(0) + Math.exp(-1) + Math.exp(-0.5); // logits row 0: [1, 0, 0.5]
    assert.ok(lines.includes(`${Math.exp(-0.5)} ÷ ${sum} = ${Math.exp(-0.5) / sum}`), lines.join("\n"));
  });

  test("a negative logit and row max are written in parentheses, at full precision", () => {
    const lines = weightArithmetic({
      queryRow: [-1010],
      keyRow: [1],
      score: -1010,
      scale: 1,
      softcap: 0,
      logitsRow: [-999, -1010],
      weight: Math.exp(-11) / (1 + Math.exp(-11)),
      i: 0,
      j: 1,
      isCausal: false,
      maskCell: null,
    });
    assert.ok(lines.includes("x − row max = (-1010) − (-999) = -11"), lines.join("\n"));
    assert.ok(lines.includes(`exp(-11) = ${Math.exp(-11)}`), lines.join("\n"));
  });
});

describe("the √d_k experiment", () => {
  test("raw scores spread like √d_k, scaled ones like 1; unscaled softmax saturates", () => {
    const small = sqrtDkPoint(1);
    const large = sqrtDkPoint(1024);
    // Theory, not the code: q·k of d_k unit-variance products has standard deviation √d_k.
    assert.ok(Math.abs(large.scoreSpread / 32 - 1) < 0.15, `spread ${large.scoreSpread}`);
    assert.ok(Math.abs(large.scaledSpread - 1) < 0.15, `scaled spread ${large.scaledSpread}`);
    assert.ok(large.maxWeight.unscaled > 0.9 && small.maxWeight.unscaled < 0.5);
    assert.ok(large.maxWeight.scaled < 0.3);
    assert.ok(large.jacobian.unscaled < large.jacobian.scaled);
  });

  test("averaged over its draws, the unscaled softmax sharpens at every step of d_k", () => {
    const curve = SQRT_DK_GRID.map((dk) => sqrtDkPoint(dk));
    // Theory: softmax of logits spread like √d_k sharpens as d_k grows. One draw is too noisy to
    // show it at every step; the mean of SQRT_DK_DRAWS draws does, as the panel's text says.
    for (let n = 1; n < curve.length; n++) {
      const [before, after] = [curve[n - 1], curve[n]];
      assert.ok(after.maxWeight.unscaled > before.maxWeight.unscaled, `largest weight at d_k ${after.dk}`);
      assert.ok(after.entropy.unscaled < before.entropy.unscaled, `entropy at d_k ${after.dk}`);
    }
    assert.equal(SQRT_DK_DRAWS, 8);
    // The draws are the average's: one draw gives other numbers than the mean of eight.
    assert.notEqual(sqrtDkPoint(64, 7, 32, 1).maxWeight.unscaled, curve[6].maxWeight.unscaled);
  });

  test("the Jacobian size: 0 for one-hot, worked by hand for uniform", () => {
    assert.equal(jacobianSize([1, 0, 0]), 0);
    // Uniform p = 1/n: diagonal entries 1/n - 1/n², off-diagonal -1/n² (n² - n of them).
    const n = 4;
    const expected = Math.sqrt(n * (1 / n - 1 / n ** 2) ** 2 + (n * n - n) / n ** 4);
    assert.ok(Math.abs(jacobianSize([0.25, 0.25, 0.25, 0.25]) - expected) < 1e-15);
    // Not largest at uniform: over 32 keys uniform gives √(1/32 − 1/32²) ≈ 0.174, an even split
    // between two keys gives 0.5 (entries ±1/4, four of them).
    assert.ok(Math.abs(jacobianSize(new Array(32).fill(1 / 32)) - Math.sqrt(1 / 32 - 1 / 32 ** 2)) < 1e-15);
    assert.equal(jacobianSize([0.5, 0.5, ...new Array(30).fill(0)]), 0.5);
  });
});

describe("an invalid fixture case's verdict", () => {
  test("every error case: the readable port's error is the expected one, in camelCase", () => {
    const invalid = loadFixtures().filter((c) => c.expectedError !== null);
    assert.ok(invalid.length > 10);
    for (const fixture of invalid) {
      const { query, key, value, attnMask } = fixture.inputs as unknown as Record<string, never>;
      let got: { kind: string; message: string } | null = null;
      try {
        attentionSteps(query, key, value, { ...(fixture.params as object), attnMask });
      } catch (error) {
        got = { kind: (error as { kind: string }).kind, message: (error as Error).message };
      }
      const verdict = errorVerdict(fixture.expectedError as { kind: string; message: string }, got);
      assert.ok(verdict.passed, `${fixture.id}: ${verdict.text}`);
    }
  });

  test("a different message, or none, fails and says both", () => {
    const expected = { kind: "mask", message: "attn_mask of shape [2] does not broadcast" };
    assert.equal(camelCaseMessage(expected.message), "attnMask of shape [2] does not broadcast");
    const wrong = errorVerdict(expected, { kind: "mask", message: "attnMask is wrong" });
    assert.equal(wrong.passed, false);
    assert.match(
      wrong.text,
      /got AttentionInputError \(mask\): attnMask is wrong; expected .*attnMask of shape/,
    );
    assert.equal(errorVerdict(expected, null).passed, false);
  });
});

describe("the page build", () => {
  test("numbers are written as JavaScript that reads back exactly", () => {
    const values = [0.1, -0, 5e-324, NaN, -Infinity, 1.7976931348623157e308, "a</script>"];
    const back = new Function(`return ${jsLiteral(values)}`)() as unknown[];
    assert.deepEqual(back, values);
    assert.ok(Object.is(back[1], -0));
  });

  test("the bundle is made from the real attention.ts, not a copy", async () => {
    const { inputs, code } = await bundle();
    assert.ok(inputs.includes("typescript/src/attention.ts"), inputs.join(", "));
    for (const port of ["attention.ts", "flash.ts", "simd.ts"]) {
      assert.ok(inputs.includes(`typescript/src/${port}`), inputs.join(", "));
    }
    // The sources and the kit's judge only, loaded as the package loads them in a browser: no Node
    // entry, no stand-in for a node: module (simd.ts takes its kernel's bytes through initSimd).
    assert.ok(inputs.includes("typescript/conformance/judge.ts"), inputs.join(", "));
    assert.ok(
      inputs.every(
        (path) =>
          path.startsWith("typescript/src/") ||
          path.startsWith("typescript/explorer/") ||
          path === "typescript/conformance/judge.ts",
      ),
      inputs.join(", "),
    );
    assert.ok(!inputs.includes("typescript/src/simd-node.ts"), inputs.join(", "));
    assert.match(code, /function attentionSteps\(/);
  });

  test("the page carries the oracle's budgets in every dtype its backends compute in", async () => {
    // backends.ts is a page module (it types against the DOM): imported at run time only.
    const page = new URL("../explorer/backends.ts", import.meta.url).href;
    const { BACKENDS } = (await import(page)) as { BACKENDS: readonly { dtype: string }[] };
    assert.deepEqual([...new Set(BACKENDS.map((backend) => backend.dtype))].sort(), [...PAGE_DTYPES].sort());
    const tutorial = explorerCase(loadFixtures(undefined, ["tutorial_seq3_dk4"])[0]);
    assert.deepEqual(Object.keys(tutorial.expected?.budgets ?? {}), [...PAGE_DTYPES]);
  });

  test("the built page holds everything it needs and no address to fetch", async () => {
    const { html, cases, left } = await buildPage();
    assert.ok(cases.includes("tutorial_seq3_dk4"));
    assert.equal(cases.length + left.length, loadFixtures().length);
    assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+href=|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    // Under 1.4 MB but for the real model's case, which the page keeps however large (its preset):
    // the page carries every small case, the windows', sinks' and ragged batches' among them, so
    // that a page opened from disk shows them all.
    const [real] = loadFixtures(undefined, [REAL_MODEL_PRESET.caseId]);
    const realBytes = Buffer.byteLength(jsLiteral(explorerCase(real)));
    assert.ok(cases.includes(REAL_MODEL_PRESET.caseId) && realBytes < 500_000, `${realBytes} bytes`);
    assert.ok(Buffer.byteLength(html) - realBytes < 1_400_000, `${Buffer.byteLength(html)} bytes`);
  });

  test("the real model's preset names the tokens its case's description names, one per position", () => {
    const [real] = loadFixtures(undefined, [REAL_MODEL_PRESET.caseId]);
    const tokens = caseTokens(explorerCase(real));
    assert.deepEqual(tokens, REAL_MODEL_PRESET.tokens);
    assert.ok(real.description.includes(`(${REAL_MODEL_PRESET.tokens.join(" ")})`), real.description);
    const shape = (real.inputs.query as { shape: number[] }).shape;
    assert.deepEqual(shape, [12, REAL_MODEL_PRESET.tokens.length, 32]);
    assert.equal(caseTokens({ id: "tutorial_seq3_dk4" }), null);
  });

  test("a fixture case reaches the page with the port's input form and the oracle's values", () => {
    const [fixture] = loadFixtures(undefined, ["tutorial_seq3_dk4"]);
    const page = explorerCase(fixture);
    assert.deepEqual(page.inputs.value, [
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    assert.deepEqual(page.expected?.output.data, fixture.expected?.output.data);
  });
});

describe("the layer view and the RoPE view", () => {
  test("the layer view's steps end in the layer's own output, and its heads split and merge back", () => {
    const example = layerExample(1);
    for (const rope of [null, { theta: 10000, interleaved: false }, { theta: 10000, interleaved: true }]) {
      const walk = walkLayer(example, rope);
      assert.ok(walk.walkDifference < 1e-12, `${walk.walkDifference}`);
      assert.deepEqual(mergeHeads(splitHeads(walk.q, LAYER_SIZES.H)), walk.q);
      // Token 0 is at position 0: RoPE leaves it as it was, bit for bit.
      for (let h = 0; h < LAYER_SIZES.H; h++) {
        assert.deepEqual(walk.qRotated[h][0], walk.qHeads[h][0]);
        for (const row of walk.weights[h]) {
          assert.ok(Math.abs(row.reduce((a, x) => a + x, 0) - 1) < 1e-12);
        }
      }
      assert.equal(rope === null, JSON.stringify(walk.qRotated) === JSON.stringify(walk.qHeads));
    }
    // No weight is square, so a missing transpose could not pass unseen.
    assert.notEqual(example.wQ.length, example.wQ[0].length);
    assert.notEqual(example.wO.length, example.wO[0].length);
  });

  test("the RoPE view's dot products are one number along each diagonal", () => {
    for (const interleaved of [false, true]) {
      const view = ropeView(3, 10000, interleaved);
      assert.ok(view.diagonalSpread < 1e-12, `${view.diagonalSpread}`);
      assert.deepEqual(view.queries[0], view.query); // position 0 turns by 0
      assert.equal(view.dots.length, ROPE_POSITIONS);
      // Off the diagonals the numbers differ: the distance matters, not only its absence.
      assert.notEqual(view.dots[0][0], view.dots[1][0]);
    }
  });
});

describe("the decode view", () => {
  const [fixture] = loadFixtures(undefined, [REAL_MODEL_PRESET.caseId]);
  const page = explorerCase(fixture);
  const [H, n, E] = (fixture.inputs.query as FixtureTensor).shape; // [12, 8, 32]
  // Row r of head h of one of the fixture's [H, n, F] inputs, straight from the file.
  const fixtureRow = (name: "query" | "key" | "value", h: number, r: number) => {
    const { shape, data } = fixture.inputs[name] as FixtureTensor;
    const width = shape[2];
    return Array.from(data.slice((h * n + r) * width, (h * n + r + 1) * width)) as number[];
  };

  test("step t holds t cache rows, copies of the sentence's keys and values, and the new query rows", () => {
    const sentence = decodeSentence(page, DECODE_HEAD);
    assert.equal(sentence.heads, H);
    assert.equal(sentence.tokens.length, n);
    for (let t = 1; t <= n; t++) {
      for (let newTokens = 1; newTokens <= t; newTokens++) {
        const at = decodeStep(sentence, t, newTokens);
        const P = t - newTokens;
        assert.equal(at.queryOffset, P);
        assert.equal(at.keyCache.length, t);
        assert.equal(at.valueCache.length, t);
        at.keyCache.forEach((row, r) => assert.deepEqual(row, fixtureRow("key", DECODE_HEAD, r)));
        at.valueCache.forEach((row, r) => assert.deepEqual(row, fixtureRow("value", DECODE_HEAD, r)));
        assert.deepEqual(
          at.query,
          Array.from({ length: newTokens }, (_, r) => fixtureRow("query", DECODE_HEAD, P + r)),
        );
        assert.equal(at.query[0].length, E);
      }
    }
  });

  test("the step's rows see keys j <= i + P and equal rows P..t-1 of one causal pass, bit for bit", () => {
    for (const head of [0, DECODE_HEAD, H - 1]) {
      const sentence = decodeSentence(page, head);
      for (let t = 1; t <= n; t++) {
        for (let newTokens = 1; newTokens <= t; newTokens++) {
          const at = decodeStep(sentence, t, newTokens);
          const P = t - newTokens;
          assert.deepEqual(
            at.visible,
            Array.from({ length: newTokens }, (_, r) => r + P + 1),
          );
          assert.deepEqual(
            at.causalVisible,
            Array.from({ length: n }, (_, i) => i + 1),
          );
          assert.equal(at.rowDifference, 0, `head ${head}, t ${t}, Lq ${newTokens}`);
          for (const row of at.weights) {
            assert.ok(Math.abs(row.reduce((a, x) => a + x, 0) - 1) < 1e-12);
          }
        }
      }
    }
  });

  test("the last token's step sees every key: its weights are the oracle's last row of the case", () => {
    // The case's expected weights are the oracle's without causal masking; the last row of a
    // causal pass hides nothing, so the decode step at t = n has the same row.
    const oracle = fixture.expected!.weights; // [H, n, n]
    for (let head = 0; head < H; head++) {
      const at = decodeStep(decodeSentence(page, head), n, 1);
      const expected = Array.from(oracle.data.slice((head * n + n - 1) * n, (head * n + n) * n)) as number[];
      at.weights[0].forEach((w, j) => assert.ok(Math.abs(w - expected[j]) < 1e-14, `${head}, ${j}`));
    }
    // The first step has one key only: its weight is 1 exactly.
    assert.deepEqual(decodeStep(decodeSentence(page, 0), 1, 1).weights, [[1]]);
  });

  test("the mistake, queryOffset 0 with a cache, hides the keys after each row's index and departs from the pass", () => {
    const sentence = decodeSentence(page, DECODE_HEAD);
    for (let t = 1; t <= n; t++) {
      for (let newTokens = 1; newTokens <= t; newTokens++) {
        const at = decodeStep(sentence, t, newTokens, true);
        const P = t - newTokens;
        assert.equal(at.cached, P);
        assert.equal(at.queryOffset, 0);
        assert.deepEqual(
          at.visible,
          Array.from({ length: newTokens }, (_, r) => r + 1),
        );
        // Only a prefill (nothing cached) is right with offset 0.
        assert.equal(at.rowDifference === 0, P === 0, `t ${t}, Lq ${newTokens}: ${at.rowDifference}`);
      }
    }
  });

  test("a step or a count of new tokens out of range is refused naming the argument", () => {
    const sentence = decodeSentence(page, 0);
    assert.throws(
      () => decodeStep(sentence, 0, 1),
      /^RangeError: step must be a whole number from 1 to 8, got 0$/,
    );
    assert.throws(() => decodeStep(sentence, 9, 1), /step must be a whole number from 1 to 8, got 9/);
    assert.throws(
      () => decodeStep(sentence, 3, 4),
      /newTokens must be a whole number from 1 to step \(3\), got 4/,
    );
    assert.throws(() => decodeStep(sentence, 3, 1.5), /newTokens must be a whole number/);
  });
});

describe("the backends", () => {
  interface Row {
    module: string;
    node_entry: string | null;
    dtypes: string[];
    records_steps: boolean;
    explorer: { name: string; label: string } | null;
  }
  const table = new URL("../../contract/ports.json", import.meta.url);
  const rows = (JSON.parse(readFileSync(table, "utf8")) as { ports: Row[] }).ports.filter(
    (row) => row.explorer !== null,
  );

  test("are the port table's explorer rows, in its order, each computing with its row's module", async () => {
    assert.deepEqual(
      BACKENDS.map((b) => [b.name, b.label, b.source, b.nodeSource, b.dtype, b.diagnostics]),
      rows.map((row) => [
        row.explorer?.name,
        row.explorer?.label,
        row.module,
        row.node_entry ?? undefined,
        row.dtypes[0],
        row.records_steps ? "own" : "readable",
      ]),
    );
    const [query, key, value] = [
      [
        [1, 0],
        [0, 1],
        [1, 1],
      ],
      [
        [1, 2],
        [0, -1],
      ],
      [
        [3, 4],
        [5, 6],
      ],
    ];
    for (const [backend, row] of BACKENDS.map((b, n) => [b, rows[n]] as const)) {
      if (backend.diagnostics === "own") {
        const module = (await import(`../../${row.module}`)) as { attentionSteps: typeof attentionSteps };
        const steps = await backend.steps(query, key, value, { isCausal: true });
        assert.deepEqual(steps, module.attentionSteps(query, key, value, { isCausal: true }), backend.name);
      }
    }
  });
});
