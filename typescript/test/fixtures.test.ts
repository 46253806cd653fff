// The fixture reader: what it gives a port, and its refusals.

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";

import {
  DEFAULT_FIXTURES,
  FixtureError,
  type FixtureTensor,
  loadFixtures,
  portTensor,
} from "../golden/reader.ts";

const cases = loadFixtures();

// Every port on every fixture, held to compare.py's rule, is python/tests/test_cross_language.py's
// job (one owner for the TypeScript-port x fixture matrix); here, the reader itself.
describe("the fixture reader", () => {
  test("the tutorial's fixture holds the tutorial's Q, K and V", () => {
    const tutorial = cases.find((c) => c.id === "tutorial_seq3_dk4")!;
    assert.deepEqual(portTensor(tutorial.inputs.query as FixtureTensor), [
      [1, 0, 1, 0],
      [0, 1, 0, 1],
      [1, 1, 0, 0],
    ]);
    assert.deepEqual(portTensor(tutorial.inputs.value as FixtureTensor), [
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
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

  test("an older manifest version (before logits were stored), with the hint to regenerate", () => {
    const folder = brokenCopy((f) => editJson(join(f, "manifest.json"), (m) => (m.version = 1)));
    expectFixtureError(
      folder,
      "manifest.json",
      /format version 1 is not supported .*attention-port generate/,
    );
  });

  test("a folder from before the budgets (version 4): the judges would have nothing to compare", () => {
    const folder = brokenCopy((f) => editJson(join(f, "manifest.json"), (m) => (m.version = 4)));
    expectFixtureError(folder, "manifest.json", /format version 4 is not supported .*version 5.*generate/);
  });

  test("a budget that is not of the output's shape, one whose listed places are not in it, a dtype without one", () => {
    /** rank2_square's budgets edited, and the file resealed (its sha256 in the manifest). */
    const budgetsEdited = (edit: (budgets: Record<string, Record<string, unknown>>) => void) =>
      brokenCopy((f) => {
        const path = join(f, "cases", "rank2_square.json");
        editJson(path, (c) =>
          edit((c.expected as { budgets: Record<string, Record<string, unknown>> }).budgets),
        );
        const sha256 = createHash("sha256").update(readFileSync(path)).digest("hex");
        editJson(join(f, "manifest.json"), (m) => {
          const entries = m.cases as { id: string; sha256: string }[];
          entries.find((e) => e.id === "rank2_square")!.sha256 = sha256;
        });
      });
    const file = join("cases", "rank2_square.json");
    const small = budgetsEdited((b) => (b.float32.output = { shape: [1], data: [1] }));
    expectFixtureError(
      small,
      file,
      /expected\.budgets\.float32\.output and expected\.output differ in shape/,
    );
    const past = budgetsEdited((b) => (b.float32.output = { float64_times: 2, index: [48], data: [1] }));
    expectFixtureError(past, file, /expected\.budgets\.float32\.output\.index does not give a place/);
    const none = budgetsEdited((b) => delete b.bfloat16);
    expectFixtureError(none, file, /missing field 'expected\.budgets\.bfloat16'/);
  });

  test("a case file edited by hand (sha256)", () => {
    const folder = brokenCopy((f) => writeFileSync(join(f, "cases", "rank2_square.json"), "{}\n"));
    expectFixtureError(
      folder,
      join("cases", "rank2_square.json"),
      /sha256 .* does not match .*attention-port generate/,
    );
  });

  test("a missing case file", () => {
    const folder = brokenCopy((f) => rmSync(join(f, "cases", "softcap.json")));
    expectFixtureError(folder, join("cases", "softcap.json"), /missing; regenerate/);
  });

  test("a directory where a case file belongs", () => {
    const folder = brokenCopy((f) => {
      rmSync(join(f, "cases", "softcap.json"));
      mkdirSync(join(f, "cases", "softcap.json"));
    });
    expectFixtureError(folder, join("cases", "softcap.json"), /is a folder, not a regular file/);
  });

  test("a manifest that is not JSON, and a folder that does not exist", () => {
    const folder = brokenCopy((f) => writeFileSync(join(f, "manifest.json"), "{ not json"));
    expectFixtureError(folder, "manifest.json", /is not valid JSON/);
    assert.throws(() => loadFixtures(join(scratch, "nowhere")), /nowhere: is not a fixture folder/);
  });

  test("a file entry that leaves the folder", () => {
    const folder = brokenCopy((f) =>
      editJson(
        join(f, "manifest.json"),
        (m) => ((m.cases as Record<string, unknown>[])[0].file = "../outside.json"),
      ),
    );
    expectFixtureError(folder, "manifest.json", /file '\.\.\/outside\.json' leaves the fixture folder/);
  });

  test("a symlink loop where a case file belongs", () => {
    const loop = brokenCopy((f) => {
      rmSync(join(f, "cases", "softcap.json"));
      symlinkSync("softcap.json", join(f, "cases", "softcap.json"));
    });
    expectFixtureError(loop, join("cases", "softcap.json"), /cannot be read \(ELOOP/);
  });

  test("a manifest that lists no case", () => {
    const folder = brokenCopy((f) => editJson(join(f, "manifest.json"), (m) => (m.cases = [])));
    expectFixtureError(folder, "manifest.json", /lists no case; regenerate/);
  });
});
