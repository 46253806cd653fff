/**
 * Read a fixture folder: the only TypeScript code that reads the file format.
 *
 * The format is the JSON Schema in fixtures/schema, and python/attention_port/golden/reader.py checks
 * every folder against it before the harness runs a TypeScript port on it. So this reader checks
 * only what TypeScript needs to read safely: the format version (an old folder is told to
 * regenerate), files inside the folder, each file's sha256, each case's id, each tensor's data of
 * its shape; and it decodes the strings that stand for NaN and the infinities. Every problem
 * throws a FixtureError whose message is one line: the file, then what is wrong with it; nothing
 * defends against a file that changes while it is read (docs/design.md, "Whom the checks serve").
 * Nothing here ever writes.
 */

import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { nest } from "../src/batching.ts";
import { FIXTURE_OPTIONS, type FixtureOptions } from "../src/generated/options.ts";
import type { ErrorKind } from "../src/inputs.ts";

export const MANIFEST_FORMAT = "attention-port-fixtures";
export const CASE_FORMAT = "attention-port-fixture";
// 2: `expected.logits`; 3: spread, magnitude, errorFloor, scoreBound; 4: kind; 5: budgets (no magnitude, errorFloor)
export const FORMAT_VERSION = 5;
export const REGENERATE_HINT = "regenerate with `attention-port generate` (or scripts/generate)";

/** The repository's fixtures/ folder (this file is typescript/golden/reader.ts). */
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

/** The dtypes a valid case holds a budget for. */
export const BUDGET_DTYPES = ["float64", "float32", "float16", "bfloat16"] as const;

/** What a port computing in one dtype is held to on one valid case, as the oracle derived it. */
export interface FixtureBudget {
  readonly outside: string | null; // why the contract defines no answer in this dtype, or null
  readonly output: FixtureNumbers; // [B..., Hq, Lq, Ev]  bound on |actual - expected| (Infinity: the fallback's)
  readonly fallback: FixtureNumbers | null; // [B..., Hq, Lq, Ev]  bound on |actual| where output is Infinity
}

/** The oracle's values for a valid case, float64. */
export interface ExpectedValues {
  readonly scores: FixtureNumbers; // [B..., Hq, Lq, Lk]
  readonly logits: FixtureNumbers; // [B..., Hq, Lq, Lk]  scaled, softcapped and masked: softmax's input
  readonly weights: FixtureNumbers; // [B..., Hq, Lq, Lk]
  readonly output: FixtureNumbers; // [B..., Hq, Lq, Ev]
  readonly errorScale: FixtureNumbers; // [B..., Hq, Lq, Ev]  (1 + spread) * sum_j |w_ij| |v_jt|
  readonly spread: FixtureNumbers; // [B..., Hq, Lq]  S_i of the tolerance rule
  readonly scoreBound: number; // the largest exact |score| or |logit| bound (Infinity: beyond float64)
  readonly budgets: Readonly<Record<(typeof BUDGET_DTYPES)[number], FixtureBudget>>;
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
  readonly params: FixtureOptions; // the options the file holds (contract/options.json)
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

/** The bytes of `path`, or a FixtureError of one line: missing, a folder, or unreadable. */
function readBytes(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") {
      throw new FixtureError(path, `missing; ${REGENERATE_HINT}`);
    }
    if (code === "EISDIR") {
      throw new FixtureError(path, "is a folder, not a regular file");
    }
    throw new FixtureError(path, `cannot be read (${(error as Error).message})`); // no permission, ...
  }
}

// The documents as fixtures/schema describes them (python/attention_port/golden/reader.py checks every
// folder against the schema, so only what TypeScript reads is spelled out here).
interface TensorDocument {
  readonly dtype?: "float64" | "bool" | null;
  readonly shape: number[];
  readonly data: unknown;
}
type StepName = "scores" | "logits" | "weights" | "output" | "error_scale" | "spread";
/** A budget tensor below float64 may be float64's times a power of two, with the elements where
 * that is not the budget given by their flat index (fixtures/README.md). */
interface ScaledDocument {
  readonly float64_times: number;
  readonly index: readonly number[];
  readonly data: readonly (number | string)[];
}
interface BudgetDocument {
  readonly outside: string | null;
  readonly output: TensorDocument | ScaledDocument;
  readonly fallback: TensorDocument | null;
}
interface CaseDocument {
  readonly id: string;
  readonly description: string;
  readonly tags: string[];
  readonly inputs: Readonly<Record<"query" | "key" | "value" | "attn_mask", TensorDocument | null>>;
  readonly params: Readonly<Record<string, unknown>>; // by the options' Python names
  readonly expected?: Readonly<Record<StepName, TensorDocument>> & {
    readonly score_bound: number | string;
    readonly budgets: Readonly<Record<string, BudgetDocument | undefined>>;
  };
  readonly expected_error?: { readonly kind: ErrorKind; readonly message: string };
}
interface ManifestDocument {
  readonly cases: readonly {
    readonly id: string;
    readonly kind: FixtureKind;
    readonly file: string;
    readonly sha256: string;
  }[];
}

/** The function a case calls: the attention core, the layer (multiHeadAttention) or applyRotary. */
export type FixtureKind = "attention" | "layer" | "rope";

/** A layer or RoPE case: its inputs and options by their Python names (as the file has them),
 * tensors read as FixtureTensors (null where absent) for a valid case, as written for an invalid
 * one. The harness judges the answers; this reader only hands the inputs over. */
export interface LayerFixtureCase {
  readonly id: string;
  readonly kind: "layer" | "rope";
  readonly inputs: Readonly<Record<string, unknown>>;
  readonly params: Readonly<Record<string, unknown>>;
  readonly valid: boolean;
}

/** A JSON object whose format and version this code reads. */
function readDocument<T>(data: Buffer, format: string, display: string): T {
  let document: unknown;
  try {
    document = JSON.parse(data.toString("utf8"));
  } catch (error) {
    throw new FixtureError(display, `is not valid JSON (${(error as Error).message})`);
  }
  if (typeof document !== "object" || document === null || Array.isArray(document)) {
    throw new FixtureError(display, "is not a JSON object");
  }
  const found = document as Record<string, unknown>;
  if (found.format !== format) {
    throw new FixtureError(display, `format is '${String(found.format)}', expected '${format}'`);
  }
  if (found.version !== FORMAT_VERSION) {
    throw new FixtureError(
      display,
      `format version ${String(found.version)} is not supported (this code reads version ${FORMAT_VERSION});` +
        ` ${REGENERATE_HINT}`,
    );
  }
  return found as T;
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

function readTensor(entry: TensorDocument, display: string, where: string): FixtureTensor {
  const shape = entry.shape;
  // A zero dim ends the nesting ([2, 0, 8] is written [[], []]), so flatten up to it.
  const cut = shape.includes(0) ? shape.indexOf(0) + 1 : shape.length;
  const leaves = flattenExact(decodeNumbers(entry.data), shape.slice(0, cut));
  if (leaves === null) {
    throw new FixtureError(display, `${where}.data does not have the shape ${JSON.stringify(shape)}`);
  }
  const data = shape.includes(0) ? [] : leaves; // [[], []] holds no leaf
  return { dtype: entry.dtype ?? "float64", shape, data } as FixtureTensor;
}

function readCase(path: string, data: Buffer, id: string): FixtureCase {
  const document = readDocument<CaseDocument>(data, CASE_FORMAT, path);
  if (document.id !== id) {
    throw new FixtureError(path, `id '${String(document.id)}' does not match the manifest's '${id}'`);
  }
  const { inputs, params, expected, expected_error: expectedError } = document;
  const input = (name: keyof CaseDocument["inputs"]) => {
    const tensor = inputs[name];
    if (tensor === null) {
      return null;
    }
    return expected ? readTensor(tensor, path, `inputs.${name}`) : decodeNumbers(tensor.data);
  };
  const step = (steps: NonNullable<CaseDocument["expected"]>, name: StepName) =>
    readTensor(steps[name], path, `expected.${name}`) as FixtureNumbers;
  return {
    id,
    description: document.description,
    tags: document.tags,
    path,
    inputs: { query: input("query"), key: input("key"), value: input("value"), attnMask: input("attn_mask") },
    params: Object.fromEntries(
      FIXTURE_OPTIONS.filter(({ python }) => python in params).map(({ python, javascript }) => [
        javascript,
        decodeNumbers(params[python]),
      ]),
    ) as unknown as FixtureOptions,
    expected: expected
      ? {
          scores: step(expected, "scores"),
          logits: step(expected, "logits"),
          weights: step(expected, "weights"),
          output: step(expected, "output"),
          errorScale: step(expected, "error_scale"),
          spread: step(expected, "spread"),
          scoreBound: decodeNumbers(expected.score_bound) as number,
          budgets: readBudgets(expected.budgets, path, expected.output.shape),
        }
      : null,
    expectedError: expectedError ?? null,
  };
}

/** expected.budgets: a budget for every dtype, its tensors of the output's shape. */
function readBudgets(
  budgets: NonNullable<CaseDocument["expected"]>["budgets"],
  path: string,
  shape: readonly number[],
): ExpectedValues["budgets"] {
  const read = (dtype: (typeof BUDGET_DTYPES)[number], wider: FixtureBudget | null): FixtureBudget => {
    const where = `expected.budgets.${dtype}`;
    const entry = budgets[dtype];
    if (entry === undefined) {
      throw new FixtureError(path, `missing field '${where}'`);
    }
    const tensor = (name: "output" | "fallback", document: TensorDocument | ScaledDocument) => {
      const read =
        "float64_times" in document
          ? scaled(document, wider, `${where}.${name}`)
          : (readTensor(document, path, `${where}.${name}`) as FixtureNumbers);
      if (read.shape.join() !== shape.join()) {
        throw new FixtureError(path, `${where}.${name} and expected.output differ in shape`);
      }
      return read;
    };
    return {
      outside: entry.outside,
      output: tensor("output", entry.output),
      fallback: entry.fallback === null ? null : tensor("fallback", entry.fallback),
    };
  };
  const scaled = (document: ScaledDocument, wider: FixtureBudget | null, where: string): FixtureNumbers => {
    if (wider === null) {
      throw new FixtureError(path, `${where} is float64's times a factor, but float64 has no budget`);
    }
    const data = wider.output.data.map((x) => x * document.float64_times);
    const values = decodeNumbers(document.data) as number[];
    if (document.index.length !== values.length || document.index.some((i) => !(i >= 0 && i < data.length))) {
      throw new FixtureError(path, `${where}.index does not give a place in the tensor for each of its data`);
    }
    document.index.forEach((i, n) => {
      data[i] = values[n];
    });
    return { dtype: "float64", shape: wider.output.shape, data };
  };
  const float64 = read("float64", null);
  const all = { float64, ...Object.fromEntries(BUDGET_DTYPES.slice(1).map((d) => [d, read(d, float64)])) };
  return all as ExpectedValues["budgets"];
}

/** Every attention case of a fixture folder (or only `caseIds`), checked against the manifest.
 *
 * Any problem throws FixtureError naming the file; nothing is ever written. */
export function loadFixtures(folder: string = DEFAULT_FIXTURES, caseIds?: Iterable<string>): FixtureCase[] {
  return readEntries(folder, caseIds, ["attention"]).map(({ path, data, id }) => readCase(path, data, id));
}

/** Every layer and RoPE case of a fixture folder (or only `caseIds`). */
export function loadLayerFixtures(
  folder: string = DEFAULT_FIXTURES,
  caseIds?: Iterable<string>,
): LayerFixtureCase[] {
  return readEntries(folder, caseIds, ["layer", "rope"]).map(({ path, data, id }) => {
    const document = readDocument<{
      kind: "layer" | "rope";
      inputs: Record<string, TensorDocument | null>;
      params: Record<string, unknown>;
      expected?: unknown;
    }>(data, CASE_FORMAT, path);
    const valid = document.expected !== undefined;
    const inputs = Object.fromEntries(
      Object.entries(document.inputs).map(([name, tensor]) => [
        name,
        tensor === null
          ? null
          : valid
            ? readTensor(tensor, path, `inputs.${name}`)
            : decodeNumbers(tensor.data),
      ]),
    );
    return { id, kind: document.kind, inputs, params: document.params, valid };
  });
}

function readEntries(
  folder: string,
  caseIds: Iterable<string> | undefined,
  kinds: readonly FixtureKind[],
): { path: string; data: Buffer; id: string }[] {
  const manifestPath = join(folder, "manifest.json");
  let isFolder: boolean;
  try {
    isFolder = statSync(folder).isDirectory();
  } catch {
    isFolder = false;
  }
  if (!isFolder) {
    throw new FixtureError(folder, `is not a fixture folder; ${REGENERATE_HINT}`);
  }
  const manifest = readDocument<ManifestDocument>(readBytes(manifestPath), MANIFEST_FORMAT, manifestPath);
  const entries = manifest.cases;
  if (!Array.isArray(entries) || entries.length === 0) {
    throw new FixtureError(manifestPath, `lists no case; ${REGENERATE_HINT}`);
  }
  const root = resolve(folder);
  entries.forEach(({ file }, number) => {
    const inside = relative(root, resolve(folder, file));
    if (isAbsolute(file) || inside === "" || inside.startsWith("..") || isAbsolute(inside)) {
      throw new FixtureError(manifestPath, `cases[${number}].file '${file}' leaves the fixture folder`);
    }
  });
  const wanted = caseIds === undefined ? null : new Set(caseIds);
  if (wanted !== null) {
    const missing = [...wanted].filter((id) => !entries.some((entry) => entry.id === id)).sort();
    if (missing.length > 0) {
      throw new FixtureError(manifestPath, `no case named '${missing[0]}'`);
    }
  }
  return entries
    .filter((entry) => (wanted === null || wanted.has(entry.id)) && kinds.includes(entry.kind))
    .map((entry) => {
      const path = join(folder, entry.file);
      const data = readBytes(path);
      const actual = createHash("sha256").update(data).digest("hex");
      if (actual !== entry.sha256) {
        throw new FixtureError(
          path,
          `sha256 ${actual.slice(0, 12)}… does not match the manifest's ${entry.sha256.slice(0, 12)}…;` +
            ` the file was edited by hand or is damaged; ${REGENERATE_HINT}`,
        );
      }
      return { path, data, id: entry.id };
    });
}

/** A fixture tensor the way a port takes it: nested arrays when it has no zero dim (the form a
 * reader sees in the file), else the shaped flat form (nested [] cannot say the shape). */
export function portTensor(tensor: FixtureTensor): unknown {
  return tensor.shape.includes(0)
    ? { shape: tensor.shape, data: tensor.data }
    : nest(tensor.data, tensor.shape);
}
