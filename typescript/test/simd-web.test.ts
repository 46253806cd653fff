// simd.ts as a browser takes it (package.json's "default" condition): no Node host, so the kernel
// comes from initSimd and workers only where a page is cross-origin isolated. Run here in Node
// without simd-node.ts (each test file is its own process): the same module a bundle holds.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { loadCases, runCases } from "../conformance/kit.ts";
import * as readable from "../src/attention.ts";
import * as simd from "../src/simd.ts";
import { BUILDS } from "../wasm/stamp.ts";

const { query, key, value } = readable.TUTORIAL_EXAMPLE;
const bytes = (name: keyof typeof BUILDS) => new Uint8Array(readFileSync(BUILDS[name].file));

test("before initSimd a call says to await it, in one line", () => {
  assert.throws(
    () => simd.scaledDotProductAttention(query, key, value),
    /^Error: the SIMD kernel's relaxed build is not loaded: await initSimd\(\) once before the first call/,
  );
});

test("initSimd wants a source it can read", async () => {
  await assert.rejects(simd.initSimd({}), /initSimd needs a kernel source/);
  await assert.rejects(
    simd.initSimd(new Response("missing", { status: 404 })),
    /the SIMD kernel could not be fetched from .*HTTP 404/,
  );
});

test("a lone source is the baseline build; both given, relaxed runs where it validates", async () => {
  assert.equal(await simd.initSimd(bytes("baseline")), "baseline");
  assert.equal(simd.kernelBuild(), "baseline");
  assert.equal(await simd.initSimd({ relaxed: bytes("relaxed"), baseline: bytes("baseline") }), "relaxed");
  assert.equal(simd.kernelBuild(), "relaxed");
});

test("loaded by initSimd, the port passes the conformance kit on every case (the errors too)", async () => {
  await simd.initSimd({ relaxed: bytes("relaxed"), baseline: bytes("baseline") });
  // The kit's judge is compare.py's rule (test_cross_language.py holds the port to compare.py itself).
  const verdicts = [];
  for await (const verdict of runCases(simd.scaledDotProductAttention, { matchKind: true })) {
    verdicts.push(verdict);
  }
  assert.equal(verdicts.length, loadCases().length);
  const failed = verdicts.filter((v) => v.verdict === "fail").map((v) => `${v.caseId}: ${v.problem}`);
  assert.deepEqual(failed, []);
  assert.ok(verdicts.filter((v) => v.verdict === "pass").length >= verdicts.length - 2);
});

test("without cross-origin isolation, workers: N runs on this thread, with the same output", async () => {
  assert.equal(await simd.initSimd(undefined, { workers: 3 }), "relaxed"); // starts none here
  const n = 200;
  const data = Float32Array.from({ length: n * 16 }, (_, i) => Math.sin(i));
  const input = { shape: [n, 16], data };
  const one = simd.scaledDotProductAttentionFlat(input, input, input);
  const three = simd.scaledDotProductAttentionFlat(input, input, input, { workers: 3 });
  assert.deepEqual(three.data, one.data);
});
