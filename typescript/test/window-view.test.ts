// The explorer's window view without a browser (typescript/explorer/window-model.ts): the options it
// hands the port for each setting and mistake. Its numbers against the oracle's are held in Chromium
// by python/tests/test_explorer_window.py.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { WINDOW_DEFAULTS, windowExample, windowInputs, windowOptions } from "../explorer/window-model.ts";
import { attentionSteps } from "../src/attention.ts";

const readable = async (...args: Parameters<typeof attentionSteps>) => attentionSteps(...args);

describe("the window view's model", () => {
  test("a window of w keys is [w - 1, 0]; the mistakes read it [w, 0] or drop the offset", () => {
    const settings = { ...WINDOW_DEFAULTS, windowKeys: 4, queryOffset: 5, mistake: "too-wide" as const };
    assert.deepEqual(windowOptions(settings), {
      isCausal: true,
      queryOffset: 5,
      window: [3, 0],
      sinkTokens: 1,
      sinkLogits: [0],
      kvSeqlen: [10, 7],
    });
    assert.deepEqual(windowOptions(settings, true).window, [4, 0]);
    assert.equal(windowOptions(settings, true).queryOffset, 5);
    const topLeft = { ...settings, mistake: "top-left" as const };
    assert.deepEqual(windowOptions(topLeft, true).window, [3, 0]);
    assert.equal(windowOptions(topLeft, true).queryOffset, 0);
    assert.equal(windowOptions({ ...settings, sinkLogit: null }).sinkLogits, null);
  });

  test("the seeded inputs are [2, 1, 4, 4], [2, 1, 10, 4] and [2, 1, 10, 2], the same every time", () => {
    const { query, key, value } = windowInputs();
    const shape = (x: unknown[]): number[] =>
      Array.isArray(x) ? [x.length, ...shape(x[0] as unknown[])] : [];
    assert.deepEqual(
      [shape(query), shape(key), shape(value)],
      [
        [2, 1, 4, 4],
        [2, 1, 10, 4],
        [2, 1, 10, 2],
      ],
    );
    assert.deepEqual(windowInputs(), { query, key, value });
  });

  test("without a mistake nothing is outlined, and without a sink logit the sink's share is 0", async () => {
    const [first, second] = await windowExample({ ...WINDOW_DEFAULTS, sinkLogit: null }, readable);
    for (const s of [first, second]) {
      assert.equal(s.mistaken, null);
      assert.ok(s.changed.flat().every((c) => !c));
      assert.deepEqual(s.sinkShare, [0, 0, 0, 0]);
      assert.equal(s.outputDifference, 0);
    }
    // Sequence 1 holds 7 keys: keys 7, 8 and 9 are hidden from every row.
    assert.ok(second.hidden.every((row) => row.slice(7).every(Boolean)));
  });
});
