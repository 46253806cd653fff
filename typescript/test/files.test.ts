// writeAtomic: a file is replaced whole or not at all, and no scratch file is left behind.

import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { writeAtomic } from "../files.ts";

const scratch = mkdtempSync(join(tmpdir(), "attention-port-files-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("writeAtomic replaces a file's content and leaves nothing else beside it", () => {
  const folder = mkdtempSync(join(scratch, "replace-"));
  const path = join(folder, "results.json");
  writeFileSync(path, "old");
  writeAtomic(path, "new");
  assert.equal(readFileSync(path, "utf8"), "new");
  assert.deepEqual(readdirSync(folder), ["results.json"]);
});

test("a write that cannot be put in place throws and removes its scratch file", () => {
  const folder = mkdtempSync(join(scratch, "blocked-"));
  const blocked = join(folder, "results.json");
  mkdirSync(blocked); // a folder where the file should go, not empty: the rename fails
  writeFileSync(join(blocked, "mine.txt"), "kept");
  assert.throws(() => writeAtomic(blocked, "new"));
  assert.deepEqual(readdirSync(folder), ["results.json"]);
  assert.equal(readFileSync(join(blocked, "mine.txt"), "utf8"), "kept");
});
