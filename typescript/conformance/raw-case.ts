/**
 * One fixture case as the conformance kit stores it: the fixture format (fixtures/README.md) in
 * TypeScript spelling, what typescript/conformance/fixture-data.ts gives and the npm package embeds.
 */

import type { FixtureCase } from "../golden/reader.ts"; // a type only: nothing of Node is bundled
import type { ErrorKind } from "../src/inputs.ts";
import type { RuleValues } from "./judge.ts";

/** A fixture tensor as stored: its dtype, shape, and values flat in row-major order. */
export interface RawTensor {
  readonly dtype: "float64" | "bool";
  readonly shape: readonly number[];
  readonly data: readonly (number | boolean)[];
}

/** One fixture case as the kit stores it (the fixture format in TypeScript spelling; for an
 * invalid case the inputs and options exactly as written). */
export interface RawCase {
  readonly id: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly inputs: FixtureCase["inputs"];
  readonly params: FixtureCase["params"];
  readonly expected: RuleValues | null;
  readonly expectedError: { readonly kind: ErrorKind; readonly message: string } | null;
}
