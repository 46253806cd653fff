// Every fixture through the readable port, and the fixture reader's refusals.

import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import { AttentionInputError, attentionSteps, type AttentionOptions, type TensorInput } from "../src/attention.ts";
import { DEFAULT_FIXTURES, FixtureError, loadFixtures, portTensor, type FixtureCase, type FixtureTensor } from "../src/fixtures.ts";
import { flatten } from "./helpers.ts";

const K = 16; // DESIGN.md section 5
const UNIT_ROUNDOFF = 2 ** -53; // float64

/** The camelCase names back to Python's, so both languages' messages can be compared. */
function normalizeMessage(message: string): string {
  return message.replaceAll("attnMask", "attn_mask").replaceAll("enableGqa", "enable_gqa").replaceAll("isCausal", "is_causal");
}

function runCase(c: FixtureCase) {
  const tensor = (x: unknown) => (c.expected === null ? x : x === null ? null : portTensor(x as FixtureTensor));
  const options = {
    attnMask: tensor(c.inputs.attnMask),
    isCausal: c.params.isCausal,
    scale: c.params.scale,
    enableGqa: c.params.enableGqa,
    softcap: c.params.softcap,
  } as unknown as AttentionOptions;
  const input = (x: unknown) => tensor(x) as TensorInput;
  return attentionSteps(input(c.inputs.query), input(c.inputs.key), input(c.inputs.value), options);
}

/** |actual - expected| <= K u error_scale element-wise; NaN meets NaN; a zero budget means exact
 * equality, and a zero there must be +0.0. Returns the first violation in words, or null. */
function outputProblem(actual: readonly number[], expected: readonly number[], errorScale: readonly number[]): string | null {
  for (let n = 0; n < expected.length; n++) {
    const [a, e] = [actual[n], expected[n]];
    if (Number.isNaN(e) || Number.isNaN(a)) {
      if (Number.isNaN(e) !== Number.isNaN(a)) {
        return `output[${n}] is ${a}, expected ${e}`;
      }
      continue;
    }
    const budget = K * UNIT_ROUNDOFF * errorScale[n];
    if (budget === 0 ? !Object.is(a, e) : !(Math.abs(a - e) <= budget)) {
      return `output[${n}] is ${Object.is(a, -0) ? "-0" : a}, expected ${e} (budget ${budget})`;
    }
  }
  return null;
}

const cases = loadFixtures();

describe("every fixture through the readable port", () => {
  test("the fixture folder holds valid and invalid cases", () => {
    assert.ok(cases.filter((c) => c.expected !== null).length >= 40);
    assert.ok(cases.filter((c) => c.expectedError !== null).length >= 20);
  });

  for (const c of cases) {
    if (c.expected !== null) {
      const expected = c.expected;
      test(`${c.id}: ${c.description}`, () => {
        const steps = runCase(c);
        assert.deepEqual(steps.scoresShape, expected.scores.shape);
        assert.deepEqual(steps.outputShape, expected.output.shape);
        const [scores, weights, output] = [flatten(steps.scores), flatten(steps.weights), flatten(steps.output)];
        assert.equal(scores.length, expected.scores.data.length);
        assert.equal(weights.length, expected.weights.data.length);
        assert.equal(output.length, expected.output.data.length);
        // NaN in the same places in every step.
        scores.forEach((x, n) => assert.equal(Number.isNaN(x), Number.isNaN(expected.scores.data[n]), `scores[${n}]`));
        weights.forEach((x, n) => assert.equal(Number.isNaN(x), Number.isNaN(expected.weights.data[n]), `weights[${n}]`));
        const problem = outputProblem(output, expected.output.data, expected.errorScale.data);
        assert.equal(problem, null);
      });
    } else {
      const error = c.expectedError!;
      test(`${c.id}: ${c.description}`, () => {
        assert.throws(
          () => runCase(c),
          (thrown: unknown) => {
            assert.ok(thrown instanceof AttentionInputError, `threw ${String(thrown)}`);
            assert.equal(thrown.kind, error.kind);
            assert.equal(normalizeMessage(thrown.message), error.message);
            return true;
          },
        );
      });
    }
  }

  test("the tutorial's fixture holds the tutorial's Q, K and V", () => {
    const tutorial = cases.find((c) => c.id === "tutorial_seq3_dk4")!;
    assert.deepEqual(portTensor(tutorial.inputs.query as FixtureTensor), [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]);
    assert.deepEqual(portTensor(tutorial.inputs.value as FixtureTensor), [[1, 2], [3, 4], [5, 6]]);
  });

  test("the tolerance rule can fail: a one-ulp-scale nudge beyond the budget, a -0.0, a NaN", () => {
    assert.equal(outputProblem([1 + 1e-10], [1], [1]), "output[0] is 1.0000000001, expected 1 (budget 1.7763568394002505e-15)");
    assert.equal(outputProblem([1 + 2 ** -52], [1], [1]), null);
    assert.match(outputProblem([-0], [0], [0])!, /is -0, expected 0/);
    assert.match(outputProblem([NaN], [1], [1])!, /is NaN, expected 1/);
    assert.match(outputProblem([1], [1], [NaN])!, /budget NaN/);
  });
});

describe("loadFixtures refuses a bad folder with one line naming the file", () => {
  const scratch = mkdtempSync(join(tmpdir(), "attention-port-fixtures-"));
  after(() => rmSync(scratch, { recursive: true, force: true }));
  let copies = 0;

  /** A copy of the fixture folder, changed by `edit`. */
  function brokenCopy(edit: (folder: string) => void): string {
    const folder = join(scratch, `copy${copies++}`);
    cpSync(DEFAULT_FIXTURES, folder, { recursive: true });
    edit(folder);
    return folder;
  }

  function expectFixtureError(folder: string, file: string, pattern: RegExp): void {
    assert.throws(
      () => loadFixtures(folder),
      (error: unknown) => {
        assert.ok(error instanceof FixtureError, `threw ${String(error)}`);
        assert.equal(error.path, join(folder, file));
        assert.ok(!error.message.includes("\n"), "one line");
        assert.match(error.message, pattern);
        return true;
      },
    );
  }

  const editJson = (path: string, edit: (document: Record<string, unknown>) => void) => {
    const document = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
    edit(document);
    writeFileSync(path, JSON.stringify(document));
  };

  test("an unknown manifest version, with the hint to regenerate", () => {
    const folder = brokenCopy((f) => editJson(join(f, "manifest.json"), (m) => (m.version = 2)));
    expectFixtureError(folder, "manifest.json", /format version 2 is not supported .*attention-port generate/);
  });

  test("a case file edited by hand (sha256)", () => {
    const folder = brokenCopy((f) => writeFileSync(join(f, "cases", "rank2_square.json"), "{}\n"));
    expectFixtureError(folder, join("cases", "rank2_square.json"), /sha256 .* does not match .*attention-port generate/);
  });

  test("a missing case file", () => {
    const folder = brokenCopy((f) => rmSync(join(f, "cases", "softcap.json")));
    expectFixtureError(folder, join("cases", "softcap.json"), /missing; regenerate/);
  });

  test("a manifest that is not JSON, and a folder that does not exist", () => {
    const folder = brokenCopy((f) => writeFileSync(join(f, "manifest.json"), "{ not json"));
    expectFixtureError(folder, "manifest.json", /is not valid JSON/);
    assert.throws(() => loadFixtures(join(scratch, "nowhere")), /nowhere: is not a fixture folder/);
  });

  test("a file entry that leaves the folder", () => {
    const folder = brokenCopy((f) =>
      editJson(join(f, "manifest.json"), (m) => ((m.cases as Record<string, unknown>[])[0].file = "../outside.json")),
    );
    expectFixtureError(folder, "manifest.json", /file '\.\.\/outside\.json' leaves the fixture folder/);
  });
});
