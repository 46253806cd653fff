/**
 * The protocol between `attention-port check` and the Node process that runs a learner's code
 * (check.ts): the TypeScript twin of python/attention_port/learner/protocol.py, which describes it in
 * full and is what the harness (learner.py) and the Python process (learner_worker.py) read.
 *
 * In short: the process is given only the learner's module path and the number of its answer file
 * descriptor; the first line on stdin is a secret, read before the learner's code is imported, and
 * every answer line starts with it (a line without it was written by the learner's code and is not
 * an answer); then {"hello"} or {"fatal"}, and one answer line per request. A request holds one
 * case's inputs and the options it sets, never its expected values; each tensor of a valid case
 * comes flat with its shape, so that one with a zero-size dim is given as {shape, data}.
 */

import { readSync } from "node:fs";

import { decodeNumbers, type FixtureTensor } from "./fixtures.ts";

// Held before the learner's code runs, which could replace it to change what this process answers.
const stringify = JSON.stringify;

export const SECRET_HEX = 32; // hex digits: 128 random bits
export const STEP_NAMES = ["scores", "logits", "weights", "output"] as const;
/** The options a request may set, by their Python names (the fixtures'), and as a learner's
 * options object spells them. */
export const OPTION_NAMES = {
  attn_mask: "attnMask",
  is_causal: "isCausal",
  scale: "scale",
  enable_gqa: "enableGqa",
  softcap: "softcap",
} as const;
/** A "threw" answer's fields, in this order. */
export const THREW_FIELDS = ["name", "message", "kind", "deliberate", "where"] as const;

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
  readonly options: Readonly<Partial<Record<keyof typeof OPTION_NAMES, unknown>>>;
  readonly same_query_key?: boolean; // true: one array is given as both query and key
}

/** The secret: the first line on stdin, read synchronously, so that it is in hand before the
 * learner's module is imported. */
export function readSecret(): string {
  const bytes = Buffer.alloc(SECRET_HEX + 1);
  let got = 0;
  while (got < bytes.length) {
    const n = readSync(0, bytes, got, bytes.length - got, null);
    if (n === 0) {
      break;
    }
    got += n;
  }
  return bytes.toString("latin1", 0, got).trim();
}

/** The answer (its JSON) for a function that threw. */
export function threwAnswer(id: string, threw: Threw): string {
  const { name, message, kind, deliberate, where } = threw; // THREW_FIELDS, in its order
  return `{"id": ${stringify(id)}, "threw": ${stringify({ name, message, kind, deliberate, where })}}`;
}

/** One answer as the process writes it: the secret, a space, the JSON text, a newline. */
export function answerLine(secret: string, json: string): string {
  return `${secret} ${json}\n`;
}

/** A request's input back: a FixtureTensor (data flat) for a valid case, the values as written else. */
export function readInput(entry: unknown, valid: boolean): unknown {
  if (!valid) {
    return decodeNumbers(entry);
  }
  const tensor = entry as FixtureTensor;
  return { dtype: tensor.dtype, shape: tensor.shape, data: decodeNumbers(tensor.data) } as FixtureTensor;
}
