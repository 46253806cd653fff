// The fixture reader: what it gives a port, and its refusals.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
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
  MAX_DEPTH,
  nestingDepth,
  portTensor,
} from "../runners/fixtures.ts";

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

  /** Replace rank2_square's text and reseal it (the manifest's sha256), so the edit is what fails. */
  function resealed(edit: (text: string) => string): string {
    return brokenCopy((f) => {
      const path = join(f, "cases", "rank2_square.json");
      const text = edit(readFileSync(path, "utf8"));
      writeFileSync(path, text);
      const sha = createHash("sha256").update(text).digest("hex");
      editJson(join(f, "manifest.json"), (m) => {
        const entry = (m.cases as Record<string, unknown>[]).find((e) => e.id === "rank2_square")!;
        entry.sha256 = sha;
      });
    });
  }

  // Each of these hung, overflowed the stack or read a wrong number before the reader bounded them.
  test("a FIFO where a case file belongs is refused, not waited on", () => {
    const folder = brokenCopy((f) => {
      rmSync(join(f, "cases", "softcap.json"));
      execFileSync("mkfifo", [join(f, "cases", "softcap.json")]);
    });
    expectFixtureError(folder, join("cases", "softcap.json"), /is a FIFO, not a regular file/);
  });

  test("a device and a symlink loop where a case file belongs", () => {
    const device = brokenCopy((f) => {
      rmSync(join(f, "cases", "softcap.json"));
      symlinkSync("/dev/zero", join(f, "cases", "softcap.json"));
    });
    expectFixtureError(device, join("cases", "softcap.json"), /is a device, not a regular file/);
    const loop = brokenCopy((f) => {
      rmSync(join(f, "cases", "softcap.json"));
      symlinkSync("softcap.json", join(f, "cases", "softcap.json"));
    });
    expectFixtureError(loop, join("cases", "softcap.json"), /cannot be read \(ELOOP/);
  });

  test("an integer of 400 digits, a number beyond float64, in data and in score_bound", () => {
    const huge = "1".repeat(400);
    // query[0][0] of rank2_square is 2.04; its score_bound 11.117445; its seed 3.
    const edits: [string, string, RegExp][] = [
      ["[2.04,", `[${huge},`, /holds the integer 111111111111… \(400 digits\)/],
      ['"score_bound": 11.117445', `"score_bound": ${huge}`, /holds the integer 111111111111…/],
      ["[2.04,", "[1e400,", /holds the number 1e400, beyond float64/],
      ['"seed": 3,', '"seed": 9007199254740994,', /holds the integer 9007199254740994, beyond ±2\^53/],
    ];
    for (const [before, after, pattern] of edits) {
      const folder = resealed((text) => {
        assert.ok(text.includes(before), before);
        return text.replace(before, after);
      });
      expectFixtureError(folder, join("cases", "rank2_square.json"), pattern);
    }
  });

  test("arrays 100,000 deep in a case file and in the manifest", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const inCase = resealed((t) => t.replace(/"seed": 3/, `"seed": ${deep}`));
    expectFixtureError(
      inCase,
      join("cases", "rank2_square.json"),
      /nests arrays and objects more than 64 deep/,
    );
    const inManifest = brokenCopy((f) => {
      const path = join(f, "manifest.json");
      writeFileSync(path, readFileSync(path, "utf8").replace(/"generator": "[^"]*"/, `"generator": ${deep}`));
    });
    expectFixtureError(inManifest, "manifest.json", /nests arrays and objects more than 64 deep/);
  });

  test("nesting is counted outside strings only, up to the limit", () => {
    assert.equal(nestingDepth('{"a": "[[[[", "b": [[1]]}'), 3);
    assert.equal(nestingDepth('["\\"", [[]]]'), 3); // an escaped quote does not end the string
    assert.equal(nestingDepth("[".repeat(10_000)), MAX_DEPTH + 1); // stops counting past the limit
  });

  test("a manifest that lists no case", () => {
    const folder = brokenCopy((f) => editJson(join(f, "manifest.json"), (m) => (m.cases = [])));
    expectFixtureError(folder, "manifest.json", /lists no case; regenerate/);
  });
});
