/**
 * Read and validate a fixture folder: the only TypeScript code that knows the file format.
 *
 * The twin of the reading half of python/attention_port/fixtures.py (fixtures/README.md describes
 * the format in prose). Every problem with a folder throws a FixtureError whose message is one
 * line: the file, then what is wrong with it. Nothing here ever writes.
 */

import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { ERROR_KINDS, type ErrorKind } from "./inputs.ts";

export const MANIFEST_FORMAT = "attention-port-fixtures";
export const CASE_FORMAT = "attention-port-fixture";
export const FORMAT_VERSION = 2; // 2: `expected.logits`, the softmax input, stored beside scores
export const REGENERATE_HINT = "regenerate with `attention-port generate` (or scripts/generate)";
const INPUT_NAMES = ["query", "key", "value", "attn_mask"] as const;
const EXPECTED_NAMES = ["scores", "logits", "weights", "output", "error_scale"] as const;
const PARAM_NAMES = ["is_causal", "scale", "enable_gqa", "softcap"] as const;

/** The repository's fixtures/ folder (this file is typescript/src/fixtures.ts). */
export const DEFAULT_FIXTURES = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "fixtures");

// JSON has no NaN or Infinity: these strings stand for them wherever a number may appear.
const NUMBER_STRINGS: Readonly<Record<string, number>> = {
  NaN: NaN,
  Infinity: Infinity,
  "-Infinity": -Infinity,
};

/** A fixture folder that cannot be used: one line naming the file and the problem. */
export class FixtureError extends Error {
  readonly path: string;
  readonly problem: string;

  constructor(path: string, problem: string) {
    super(`${path}: ${problem}`);
    this.name = "FixtureError";
    this.path = path;
    this.problem = problem;
  }
}

/** A checked tensor of a valid case: its shape, and its values flat in row-major order. */
export interface FixtureTensor {
  readonly dtype: "float64" | "bool";
  readonly shape: readonly number[];
  readonly data: readonly (number | boolean)[];
}

/** A float64 tensor (expected values are never boolean). */
export interface FixtureNumbers extends FixtureTensor {
  readonly dtype: "float64";
  readonly data: readonly number[];
}

/** The oracle's values for a valid case, float64. */
export interface ExpectedValues {
  readonly scores: FixtureNumbers; // [B..., Hq, Lq, Lk]
  readonly logits: FixtureNumbers; // [B..., Hq, Lq, Lk]  scaled, softcapped and masked: softmax's input
  readonly weights: FixtureNumbers; // [B..., Hq, Lq, Lk]
  readonly output: FixtureNumbers; // [B..., Hq, Lq, Ev]
  readonly errorScale: FixtureNumbers; // [B..., Hq, Lq, Ev]
}

/** One case as read from disk, with argument names in TypeScript spelling.
 *
 * For a valid case `inputs` holds FixtureTensors (attnMask may be null). For an invalid case it
 * holds the inputs exactly as written (nested arrays, maybe ragged, maybe holding strings; the
 * number strings decoded), to be handed to a port as they are. */
export interface FixtureCase {
  readonly id: string;
  readonly description: string;
  readonly tags: readonly string[];
  readonly path: string;
  readonly inputs: {
    readonly query: unknown;
    readonly key: unknown;
    readonly value: unknown;
    readonly attnMask: unknown;
  };
  readonly params: {
    readonly isCausal: unknown;
    readonly scale: unknown;
    readonly enableGqa: unknown;
    readonly softcap: unknown;
  };
  readonly expected: ExpectedValues | null;
  readonly expectedError: { readonly kind: ErrorKind; readonly message: string } | null;
}

/** "NaN", "Infinity", "-Infinity" become numbers, at any depth; everything else is kept. */
export function decodeNumbers(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(decodeNumbers);
  }
  if (typeof value === "string" && Object.hasOwn(NUMBER_STRINGS, value)) {
    return NUMBER_STRINGS[value];
  }
  return value;
}

/** Numbers as the fixtures write them: non-finite ones as strings (the inverse of decodeNumbers). */
export function encodeNumbers(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(encodeNumbers);
  }
  if (typeof value === "number" && !Number.isFinite(value)) {
    return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
  }
  return value;
}

function sha256(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

function jsonType(value: unknown): string {
  if (value === null) {
    return "null";
  }
  return Array.isArray(value) ? "array" : typeof value;
}

function readJson(path: string, display: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new FixtureError(display, `missing; ${REGENERATE_HINT}`);
    }
    throw new FixtureError(display, `cannot be read (${(error as Error).message})`);
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new FixtureError(display, `is not valid JSON (${(error as Error).message})`);
  }
}

type JsonType = "string" | "number" | "boolean" | "array" | "object" | "null";

function field(
  document: unknown,
  name: string,
  types: readonly JsonType[],
  display: string,
  where = "",
): unknown {
  if (
    typeof document !== "object" ||
    document === null ||
    Array.isArray(document) ||
    !Object.hasOwn(document, name)
  ) {
    throw new FixtureError(display, `missing field '${where}${name}'`);
  }
  const value = (document as Record<string, unknown>)[name];
  if (!types.includes(jsonType(value) as JsonType)) {
    throw new FixtureError(display, `field '${where}${name}' has the wrong type (${jsonType(value)})`);
  }
  return value;
}

function checkFormat(document: unknown, expectedFormat: string, display: string): void {
  const found = field(document, "format", ["string"], display);
  if (found !== expectedFormat) {
    throw new FixtureError(display, `format is '${String(found)}', expected '${expectedFormat}'`);
  }
  const version = field(document, "version", ["number"], display);
  if (version !== FORMAT_VERSION) {
    throw new FixtureError(
      display,
      `format version ${String(version)} is not supported (this code reads version ${FORMAT_VERSION});` +
        ` ${REGENERATE_HINT}`,
    );
  }
}

function nestedShape(data: unknown): number[] {
  const shape: number[] = [];
  while (Array.isArray(data)) {
    shape.push(data.length);
    if (data.length === 0) {
      break;
    }
    data = data[0];
  }
  return shape;
}

/** Leaves of nested arrays of the given shape, row-major; null if the nesting is ragged. */
function flattenExact(data: unknown, shape: readonly number[]): unknown[] | null {
  if (shape.length === 0) {
    return Array.isArray(data) ? null : [data];
  }
  if (!Array.isArray(data) || data.length !== shape[0]) {
    return null;
  }
  const leaves: unknown[] = [];
  for (const child of data) {
    const part = flattenExact(child, shape.slice(1));
    if (part === null) {
      return null;
    }
    leaves.push(...part);
  }
  return leaves;
}

function readTensor(entry: unknown, display: string, where: string, allowBool: boolean): FixtureTensor {
  const shape = field(entry, "shape", ["array"], display, `${where}.`) as unknown[];
  const data = field(entry, "data", ["array", "number", "boolean", "string"], display, `${where}.`);
  if (!shape.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
    throw new FixtureError(display, `${where}.shape ${JSON.stringify(shape)} is not a list of sizes`);
  }
  const sizes = shape as number[];
  const dtype = (entry as Record<string, unknown>).dtype ?? "float64";
  if (!(dtype === "float64" || (allowBool && dtype === "bool"))) {
    throw new FixtureError(display, `${where}.dtype ${JSON.stringify(dtype)} is not supported`);
  }
  // A zero dim ends the nesting ([2, 0, 8] is written [[], []]), so compare up to it.
  const cut = sizes.includes(0) ? sizes.indexOf(0) + 1 : sizes.length;
  const nested = nestedShape(data);
  if (JSON.stringify(nested) !== JSON.stringify(sizes.slice(0, cut))) {
    throw new FixtureError(
      display,
      `${where}.data has shape ${JSON.stringify(nested)}, expected ${JSON.stringify(sizes.slice(0, cut))}`,
    );
  }
  const leaves = flattenExact(decodeNumbers(data), sizes.slice(0, cut));
  if (leaves === null) {
    throw new FixtureError(display, `${where}.data is ragged (expected shape ${JSON.stringify(sizes)})`);
  }
  const values = sizes.includes(0) ? [] : leaves; // [[], []] holds no leaf
  if (dtype === "bool") {
    if (!values.every((x) => typeof x === "boolean")) {
      throw new FixtureError(display, `${where}.data holds a non-boolean in a bool tensor`);
    }
    return { dtype, shape: sizes, data: values as boolean[] };
  }
  if (!values.every((x) => typeof x === "number")) {
    throw new FixtureError(display, `${where}.data holds something that is not a number`);
  }
  return { dtype: "float64", shape: sizes, data: values as number[] };
}

function readCase(folder: string, entry: Record<string, unknown>, display: string): FixtureCase {
  const path = join(folder, entry.file as string);
  const document = readJson(path, display);
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new FixtureError(display, "is not a JSON object");
  }
  checkFormat(document, CASE_FORMAT, display);
  const id = field(document, "id", ["string"], display) as string;
  if (id !== entry.id) {
    throw new FixtureError(display, `id '${id}' does not match the manifest's '${String(entry.id)}'`);
  }
  const description = field(document, "description", ["string"], display) as string;
  const tags = field(document, "tags", ["array"], display) as string[];
  const inputsDoc = field(document, "inputs", ["object"], display) as Record<string, unknown>;
  const paramsDoc = field(document, "params", ["object"], display) as Record<string, unknown>;
  const params: Record<string, unknown> = {};
  for (const name of PARAM_NAMES) {
    if (!Object.hasOwn(paramsDoc, name)) {
      throw new FixtureError(display, `missing field 'params.${name}'`);
    }
    params[name] = decodeNumbers(paramsDoc[name]);
  }
  for (const name of INPUT_NAMES) {
    if (!Object.hasOwn(inputsDoc, name)) {
      throw new FixtureError(display, `missing field 'inputs.${name}'`);
    }
  }
  const tsParams = {
    isCausal: params.is_causal,
    scale: params.scale,
    enableGqa: params.enable_gqa,
    softcap: params.softcap,
  };
  const [hasExpected, hasError] = [
    Object.hasOwn(document, "expected"),
    Object.hasOwn(document, "expected_error"),
  ];
  if (hasExpected === hasError) {
    throw new FixtureError(display, "needs exactly one of 'expected' and 'expected_error'");
  }
  const inputs: Record<string, unknown> = {};
  if (hasError) {
    const error = field(document, "expected_error", ["object"], display);
    const kind = field(error, "kind", ["string"], display, "expected_error.") as string;
    const message = field(error, "message", ["string"], display, "expected_error.") as string;
    if (!(ERROR_KINDS as readonly string[]).includes(kind)) {
      throw new FixtureError(
        display,
        `expected_error.kind '${kind}' is not one of ${JSON.stringify(ERROR_KINDS)}`,
      );
    }
    for (const name of INPUT_NAMES) {
      const tensor = inputsDoc[name];
      inputs[name] =
        tensor === null
          ? null
          : decodeNumbers(
              field(
                tensor,
                "data",
                ["array", "number", "boolean", "string", "null"],
                display,
                `inputs.${name}.`,
              ),
            );
    }
    return {
      id,
      description,
      tags,
      path,
      inputs: { query: inputs.query, key: inputs.key, value: inputs.value, attnMask: inputs.attn_mask },
      params: tsParams,
      expected: null,
      expectedError: { kind: kind as ErrorKind, message },
    };
  }
  for (const name of INPUT_NAMES) {
    const tensor = inputsDoc[name];
    if (tensor === null) {
      if (name !== "attn_mask") {
        throw new FixtureError(display, `inputs.${name} is null`);
      }
      inputs[name] = null;
      continue;
    }
    inputs[name] = readTensor(tensor, display, `inputs.${name}`, name === "attn_mask");
  }
  const expectedDoc = field(document, "expected", ["object"], display) as Record<string, unknown>;
  const expected: Record<string, FixtureNumbers> = {};
  for (const name of EXPECTED_NAMES) {
    if (!Object.hasOwn(expectedDoc, name)) {
      throw new FixtureError(display, `missing field 'expected.${name}'`);
    }
    expected[name] = readTensor(expectedDoc[name], display, `expected.${name}`, false) as FixtureNumbers;
  }
  if (JSON.stringify(expected.error_scale.shape) !== JSON.stringify(expected.output.shape)) {
    throw new FixtureError(display, "expected.error_scale and expected.output differ in shape");
  }
  return {
    id,
    description,
    tags,
    path,
    inputs: { query: inputs.query, key: inputs.key, value: inputs.value, attnMask: inputs.attn_mask },
    params: tsParams,
    expected: {
      scores: expected.scores,
      logits: expected.logits,
      weights: expected.weights,
      output: expected.output,
      errorScale: expected.error_scale,
    },
    expectedError: null,
  };
}

/** Every case of a fixture folder (or only `caseIds`), checked against the manifest.
 *
 * Any problem throws FixtureError naming the file; nothing is ever written. */
export function loadFixtures(folder: string = DEFAULT_FIXTURES, caseIds?: Iterable<string>): FixtureCase[] {
  const manifestPath = join(folder, "manifest.json");
  const display = manifestPath;
  let isFolder = false;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    isFolder = false;
  }
  if (!isFolder) {
    throw new FixtureError(folder, `is not a fixture folder; ${REGENERATE_HINT}`);
  }
  const manifest = readJson(manifestPath, display);
  if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest)) {
    throw new FixtureError(display, "is not a JSON object");
  }
  checkFormat(manifest, MANIFEST_FORMAT, display);
  const entries = field(manifest, "cases", ["array"], display) as unknown[];
  const root = resolve(folder);
  const seen = new Set<string>();
  const wanted = caseIds === undefined ? null : new Set(caseIds);
  const selected: { entry: Record<string, unknown>; target: string; digest: string }[] = [];
  entries.forEach((entry, number) => {
    const where = `cases[${number}].`;
    const id = field(entry, "id", ["string"], display, where) as string;
    const file = field(entry, "file", ["string"], display, where) as string;
    const digest = field(entry, "sha256", ["string"], display, where) as string;
    if (seen.has(id)) {
      throw new FixtureError(display, `case id '${id}' appears twice`);
    }
    seen.add(id);
    const target = resolve(folder, file);
    const inside = relative(root, target);
    if (isAbsolute(file) || inside === "" || inside.startsWith("..") || isAbsolute(inside)) {
      throw new FixtureError(display, `${where}file '${file}' leaves the fixture folder`);
    }
    if (wanted === null || wanted.has(id)) {
      selected.push({ entry: entry as Record<string, unknown>, target, digest });
    }
  });
  if (wanted !== null) {
    const missing = [...wanted].filter((id) => !seen.has(id)).sort();
    if (missing.length > 0) {
      throw new FixtureError(display, `no case named '${missing[0]}'`);
    }
  }
  return selected.map(({ entry, target, digest }) => {
    const caseDisplay = join(folder, entry.file as string);
    let data: Buffer;
    try {
      data = readFileSync(target);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") {
        throw new FixtureError(caseDisplay, `missing; ${REGENERATE_HINT}`);
      }
      throw new FixtureError(caseDisplay, `cannot be read (${(error as Error).message})`);
    }
    const actual = sha256(data);
    if (actual !== digest) {
      throw new FixtureError(
        caseDisplay,
        `sha256 ${actual.slice(0, 12)}… does not match the manifest's ${digest.slice(0, 12)}…;` +
          ` the file was edited by hand or is damaged; ${REGENERATE_HINT}`,
      );
    }
    return readCase(folder, entry, caseDisplay);
  });
}

/** A fixture tensor the way a port takes it: nested arrays when it has no zero dim (the form a
 * reader sees in the file), else the shaped flat form (nested [] cannot say the shape). */
export function portTensor(tensor: FixtureTensor): unknown {
  if (tensor.shape.includes(0)) {
    return { shape: tensor.shape, data: tensor.data };
  }
  const nest = (offset: number, dims: readonly number[]): unknown => {
    if (dims.length === 0) {
      return tensor.data[offset];
    }
    const size = dims.slice(1).reduce((a, n) => a * n, 1);
    return Array.from({ length: dims[0] }, (_, n) => nest(offset + n * size, dims.slice(1)));
  };
  return nest(0, tensor.shape);
}
