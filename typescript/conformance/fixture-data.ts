/**
 * The kit's cases in the checkout: read from the repository's fixtures/ by the fixture reader
 * (Node only). The npm package's build (typescript/package/build.ts) replaces this module with one
 * that carries the cases inside it, so that the package's kit imports nothing of Node.
 */

import { DEFAULT_FIXTURES, loadFixtures } from "../golden/reader.ts";
import type { RawCase } from "./raw-case.ts";

let cases: readonly RawCase[] | null = null;

/** Every fixture case, read once. */
export function rawCases(): readonly RawCase[] {
  cases ??= rawCasesIn(DEFAULT_FIXTURES);
  return cases;
}

/** The attention cases of a fixture folder (or only `caseIds`), checked against its manifest. */
export function rawCasesIn(folder: string, caseIds?: Iterable<string>): RawCase[] {
  return loadFixtures(folder, caseIds).map(
    ({ id, description, tags, inputs, params, expected, expectedError }): RawCase => ({
      id,
      description,
      tags,
      inputs,
      params,
      expected:
        expected === null
          ? null
          : {
              scores: expected.scores,
              logits: expected.logits,
              weights: expected.weights,
              output: expected.output,
              spread: expected.spread,
              budgets: expected.budgets,
            },
      expectedError,
    }),
  );
}
