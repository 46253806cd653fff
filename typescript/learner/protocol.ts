/**
 * The protocol between `attention-port check` and the Node process that runs a learner's code
 * (worker.ts). python/attention_port/learner/protocol.py tells it in full; the names both sides must
 * agree on (the steps, each message's fields) are in learner-protocol.json, which this module and
 * protocol.py both load, by their Python names: the vocabulary gives their JavaScript ones. The
 * options a request may set, with both their names, are options.json's.
 *
 * In short: the process is given the learner's module path and the number of its answer file
 * descriptor, on which it writes {"hello"} or {"fatal"} and then one answer line per request; the
 * learner's own console.log and console.error go to stdout and stderr, which check shows under the
 * case that printed them. A request holds one case's inputs and the options it sets, never its
 * expected values; each tensor of a valid case comes flat with its shape, so that one with a
 * zero-size dim is given as {shape, data}.
 */

import { readFileSync } from "node:fs";
import { decodeNumbers, type FixtureTensor } from "../golden/reader.ts";
import { FIXTURE_OPTIONS } from "../src/generated/options.ts";

interface Protocol {
  readonly steps: readonly string[];
  readonly threw: readonly (keyof Threw)[];
  readonly layerSteps: readonly string[];
}

const PROTOCOL = JSON.parse(
  readFileSync(new URL("../../contract/learner-protocol.json", import.meta.url), "utf8"),
) as Protocol;

export const STEP_NAMES: readonly string[] = PROTOCOL.steps;
/** The options a request may set, by their Python names (the fixtures'), and as a learner's
 * options object spells them: those a fixture case holds (contract/options.json). */
export const OPTION_NAMES: Readonly<Record<string, string>> = Object.fromEntries(
  FIXTURE_OPTIONS.map(({ python, javascript }) => [python, javascript]),
);
/** What a layer's answer may hold, by the harness's names: output, weights, present_key and
 * present_value (the object's presentKey and presentValue). */
export const LAYER_STEPS: readonly string[] = PROTOCOL.layerSteps;
/** A "threw" answer's fields, in this order. */
export const THREW_FIELDS: readonly (keyof Threw)[] = PROTOCOL.threw;

/** What a function threw: its name and message, its kind (an AttentionInputError's, or the
 * learner's own), whether it was thrown on purpose (not a crash in the learner's math), and the line
 * of the learner's code it came from ("line N of FILE"), when known. */
export interface Threw {
  name: string;
  message: string;
  kind: string | null;
  deliberate: boolean;
  where: string | null;
}

/** One request: a case's inputs and the options it sets, never its expected values. */
export interface Request {
  readonly id: string;
  readonly valid: boolean; // false: the inputs are handed over as written, to be refused
  readonly output_shape: readonly number[] | null; // the expected output's shape (valid cases)
  readonly inputs: { readonly query: unknown; readonly key: unknown; readonly value: unknown };
  readonly options: Readonly<Record<string, unknown>>;
  readonly same_query_key: boolean; // true: one array is given as both query and key
}

/** The answer (its JSON) for a function that threw. */
export function threwAnswer(id: string, threw: Threw): string {
  const fields = Object.fromEntries(THREW_FIELDS.map((field) => [field, threw[field]]));
  return `{"id": ${JSON.stringify(id)}, "threw": ${JSON.stringify(fields)}}`;
}

/** A request's input back: a FixtureTensor (data flat) for a valid case, the values as written else. */
export function readInput(entry: unknown, valid: boolean): unknown {
  if (!valid) {
    return decodeNumbers(entry);
  }
  const tensor = entry as FixtureTensor;
  return { dtype: tensor.dtype, shape: tensor.shape, data: decodeNumbers(tensor.data) } as FixtureTensor;
}
