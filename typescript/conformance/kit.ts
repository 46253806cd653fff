/**
 * The conformance kit, `attention-port/conformance`: the project's fixtures and its tolerance rule
 * for anyone's attention function, in any test runner, in Node and in a browser page.
 *
 *     import { runCases } from "attention-port/conformance";
 *     for await (const v of runCases(myAttention, { dtype: "float32" })) {
 *       assert.notEqual(v.verdict, "fail", `${v.caseId}: ${v.problem}`);
 *     }
 *
 * loadCases gives the cases (all, or by level or tag), judge holds one answer to one case, and
 * runCases calls a function the way the ports are called, fn(query, key, value, { attnMask,
 * isCausal, scale, enableGqa, softcap, ... }) with the options the case holds, on every case and
 * judges each answer (each call on fresh copies of the inputs, each bounded by timeoutSeconds).
 * The verdict is compare.py's: "pass", "fail", or "outside" where the contract defines no answer in that dtype.
 * The Python twin is attention_port.conformance (load_cases, judge, run_cases).
 *
 * No `node:` import: the cases come from ./fixture-data.ts, which reads fixtures/ in the checkout
 * and which the npm package's build replaces with the cases embedded in the module.
 */

import { nest } from "../src/batching.ts";
import type { FixtureOptions } from "../src/generated/options.ts";
import type { AttentionOptions, ErrorKind } from "../src/inputs.ts";
import { rawCases } from "./fixture-data.ts";
import {
  cellName,
  DTYPES,
  type Dtype,
  type FlatTensor,
  holdSteps,
  outsideContract,
  type RuleCase,
  type RuleValues,
  STEPS,
  type StepCheck,
  type StepName,
} from "./judge.ts";
import { LEVELS, levelOf } from "./levels.ts";
import type { RawCase, RawTensor } from "./raw-case.ts";

export { DTYPES, type Dtype, type FlatTensor, type StepCheck, type StepName } from "./judge.ts";
export { LEVELS } from "./levels.ts";
export type { RawCase, RawTensor } from "./raw-case.ts";

/** What a case expects: an output (the oracle's, with what the rule reads) or an error of a kind. */
export type Expected =
  | ({ readonly error: null } & RuleValues)
  | { readonly error: ErrorKind; readonly message: string };

/** One case of the kit. */
export interface TestCase {
  readonly id: string;
  readonly level: number; // `attention-port check`'s level (LEVELS), 1 the tutorial's
  readonly tags: readonly string[];
  readonly description: string;
  /** As the ports take them: nested arrays, or { shape, data } for a tensor with a zero dim (nested
   * arrays cannot say its shape); attnMask is null, booleans (true: may attend) or numbers. An
   * invalid case's inputs are exactly as written: ragged, strings, null. */
  readonly inputs: {
    readonly query: unknown;
    readonly key: unknown;
    readonly value: unknown;
    readonly attnMask: unknown;
  };
  /** The options as the ports take them: those the case's fixture holds (queryOffset only where a
   * decode case sets it), as contract/options.json declares them. */
  readonly options: FixtureOptions;
  readonly expected: Expected;
  /** What the judge reads of a valid case (the inputs flat); null for an invalid one. */
  readonly rule: RuleCase | null;
}

/** The cell where an answer used most of its budget. */
export interface Worst {
  readonly cell: readonly number[];
  readonly expected: number;
  readonly actual: number;
}

/** The judge's word on one answer to one case. */
export interface Verdict {
  readonly caseId: string;
  readonly verdict: "pass" | "fail" | "outside";
  readonly dtype: Dtype;
  /** The largest share of the output's budget used, 1 = all of it (passes); null for an error case. */
  readonly budgetUsed: number | null;
  readonly worst: Worst | null;
  /** Why it failed (or was outside), in one line; null for a plain pass. */
  readonly problem: string | null;
  /** The first of scores, logits, weights that left its own yardstick, when the output failed. */
  readonly firstDivergentStep: StepName | null;
  readonly steps: readonly StepCheck[];
}

export interface JudgeOptions {
  /** The dtype the function computes in: the rule's unit roundoff and range. Default float64. */
  readonly dtype?: Dtype;
  /** On an invalid case, demand the thrown error's `kind` be the case's (default: any thrown error
   * passes, as in `attention-port check`; the project's ports throw AttentionInputError with a kind). */
  readonly matchKind?: boolean;
}

export interface RunOptions {
  /** How long one call may take before its case fails and the run goes on, in seconds (default
   * TIMEOUT_SECONDS); null: no limit. It bounds a promise that never settles; a function that never
   * returns synchronously blocks the thread it runs in, and nothing in that thread can stop it. */
  readonly timeoutSeconds?: number | null;
}

/** runCases's per-case limit, in seconds, unless told otherwise. */
export const TIMEOUT_SECONDS = 60;

export interface CaseFilter {
  /** Only cases of these levels (among LEVELS, the attention core's). */
  readonly levels?: readonly number[];
  /** Only cases that carry at least one of these tags. */
  readonly tags?: readonly string[];
}

function flat(tensor: RawTensor): FlatTensor & { readonly dtype: "bool" | "float64" } {
  return tensor as FlatTensor & { readonly dtype: "bool" | "float64" };
}

/** A stored tensor as a port takes it, in arrays of its own: nested, or { shape, data } when a dim
 * is zero. */
function portForm(tensor: RawTensor): unknown {
  return tensor.shape.includes(0)
    ? { shape: [...tensor.shape], data: [...tensor.data] }
    : nest(tensor.data, tensor.shape);
}

/** The stored tensor the judge reads, frozen: what a function or a test does to a case's inputs
 * never reaches the values the rule reads (nor the stored case, which every loadCases shares). */
function frozen(tensor: RawTensor): RawTensor {
  Object.freeze(tensor.shape);
  Object.freeze(tensor.data);
  return Object.freeze(tensor);
}

/** One stored case as the kit gives it (loadCases gives the package's; a reader of another
 * fixture folder makes its own). */
export function testCase(raw: RawCase): TestCase {
  const about = { id: raw.id, level: levelOf(raw.tags), tags: raw.tags, description: raw.description };
  if (raw.expected === null) {
    const error = raw.expectedError as NonNullable<RawCase["expectedError"]>;
    return {
      ...about,
      inputs: structuredClone(raw.inputs), // its own: a function may change what it is given
      options: raw.params,
      expected: { error: error.kind, message: error.message },
      rule: null,
    };
  }
  const tensors = raw.inputs as Record<"query" | "key" | "value" | "attnMask", RawTensor | null>;
  const [query, key, value] = [tensors.query, tensors.key, tensors.value].map((t) => frozen(t as RawTensor));
  const rule: RuleCase = {
    query: flat(query),
    key: flat(key),
    value: flat(value),
    attnMask: tensors.attnMask === null ? null : flat(frozen(tensors.attnMask)),
    scale: raw.params.scale as number | null,
    softcap: raw.params.softcap as number,
    expected: raw.expected,
  };
  return {
    ...about,
    inputs: {
      query: portForm(query),
      key: portForm(key),
      value: portForm(value),
      attnMask: tensors.attnMask === null ? null : portForm(tensors.attnMask),
    },
    options: raw.params,
    expected: { error: null, ...raw.expected },
    rule,
  };
}

/** Every case (or those of the levels and tags asked for), in the fixtures' order. */
export function loadCases(filter: CaseFilter = {}): TestCase[] {
  const { levels, tags } = filter;
  for (const level of levels ?? []) {
    if (!Number.isInteger(level) || level < 1 || level > LEVELS.length) {
      throw new RangeError(`levels: ${String(level)} is not a level (1 to ${LEVELS.length})`);
    }
  }
  return rawCases()
    .map(testCase)
    .filter((c) => levels === undefined || levels.includes(c.level))
    .filter((c) => tags === undefined || c.tags.some((tag) => tags.includes(tag)));
}

/** Two numbers written with the fewest significant digits (six at least) that tell them apart, -0
 * kept: 3.2417402 vs 3.2417397, never 3.24174 twice. The twin of compare.py's distinct_digits. */
export function distinctDigits(a: number, b: number): [string, string] {
  const text = (x: number, digits: number) =>
    Object.is(x, -0)
      ? "-0"
      : !Number.isFinite(x) || x === 0
        ? String(x)
        : String(Number(x.toPrecision(digits)));
  for (let digits = 6; digits < 17; digits++) {
    const [ta, tb] = [text(a, digits), text(b, digits)];
    if (ta !== tb) {
      return [ta, tb];
    }
  }
  return [text(a, 17), text(b, 17)];
}

type Answer = { readonly steps: Partial<Record<StepName, FlatTensor>> } | { readonly problem: string };

/** An array or a typed array (a DataView is neither: it has no elements). */
const isArray = (node: unknown): node is ArrayLike<unknown> =>
  Array.isArray(node) || (ArrayBuffer.isView(node) && !(node instanceof DataView));

/** What a value is, in the problem lines' words (typeof's, null and DataView named). */
function kindOf(node: unknown): string {
  return node === null ? "null" : node instanceof DataView ? "a DataView" : typeof node;
}

/** A nested array's shape and values, or why it is not a tensor. */
function nestedTensor(value: unknown, where: string): FlatTensor | string {
  const shape: number[] = [];
  for (let node: unknown = value; isArray(node); node = (node as ArrayLike<unknown>)[0]) {
    shape.push((node as ArrayLike<unknown>).length);
    if ((node as ArrayLike<unknown>).length === 0) {
      break;
    }
  }
  const data: number[] = [];
  const walk = (node: unknown, depth: number): string | null => {
    if (depth === shape.length) {
      if (typeof node !== "number") {
        return `${where} holds ${kindOf(node)}, not a number`;
      }
      data.push(node);
      return null;
    }
    if (!isArray(node) || node.length !== shape[depth]) {
      return `${where} is ragged (not a tensor)`;
    }
    for (const item of Array.from(node as ArrayLike<unknown>)) {
      const problem = walk(item, depth + 1);
      if (problem !== null) {
        return problem;
      }
    }
    return null;
  };
  const problem = walk(value, 0);
  return problem ?? { shape, data };
}

/** { shape, data } as a flat tensor, or why it is not one: the shape whole numbers, the data
 * numbers, exactly as many as the shape holds. */
function shapedTensor(shape: unknown, data: unknown, where: string): FlatTensor | string {
  if (!Array.isArray(shape) || !shape.every((n) => Number.isInteger(n) && n >= 0)) {
    return `${where}'s shape is not a list of whole numbers`;
  }
  const values = nestedTensor(data, `${where}'s data`);
  if (typeof values === "string") {
    return values;
  }
  if (values.shape.length !== 1) {
    return `${where}'s data is not a flat list of numbers`;
  }
  const size = shape.reduce((a: number, n: number) => a * n, 1);
  if (values.data.length !== size) {
    return `${where} has ${values.data.length} numbers, its shape [${shape.join(", ")}] holds ${size}`;
  }
  return { shape: [...shape], data: values.data };
}

/** An answer for one step as a flat tensor in the expected shape where it can be read so: nested
 * arrays (which stop at a zero dim: [2, 0, 4] comes back [[], []]), { shape, data }, or a flat
 * typed array of the expected size. */
function asTensor(value: unknown, expected: FlatTensor, where: string): FlatTensor | string {
  if (value instanceof BigInt64Array || value instanceof BigUint64Array) {
    return `${where} holds bigint, not a number`;
  }
  if (isArray(value) && !Array.isArray(value) && value.length === expected.data.length) {
    return { shape: expected.shape, data: value as ArrayLike<number> };
  }
  if (value !== null && typeof value === "object" && !isArray(value) && "shape" in value && "data" in value) {
    return shapedTensor(value.shape, value.data, where);
  }
  const tensor = nestedTensor(value, where);
  if (typeof tensor === "string") {
    return tensor;
  }
  const zero = expected.shape.indexOf(0);
  if (
    zero >= 0 &&
    tensor.data.length === 0 &&
    tensor.shape.join() === expected.shape.slice(0, zero + 1).join()
  ) {
    return { shape: expected.shape, data: [] };
  }
  return tensor;
}

function readAnswer(actual: unknown, expected: RuleValues): Answer {
  const isSteps =
    actual !== null &&
    typeof actual === "object" &&
    !Array.isArray(actual) &&
    "output" in actual &&
    !("shape" in actual);
  const given = isSteps ? (actual as Record<string, unknown>) : { output: actual };
  const steps: Partial<Record<StepName, FlatTensor>> = {};
  for (const step of STEPS) {
    if (given[step] === undefined) {
      continue;
    }
    const tensor = asTensor(given[step], expected[step], step);
    if (typeof tensor === "string") {
      return { problem: tensor };
    }
    steps[step] = tensor;
  }
  return { steps };
}

/** Any value as text, even one String() refuses (a null-prototype object, a symbol's description). */
function text(value: unknown): string {
  try {
    return String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** What a value given in the wrong place is, for a TypeError's message. */
function described(value: unknown): string {
  return typeof value === "string"
    ? `the string ${JSON.stringify(value)}`
    : value === null
      ? "null"
      : typeof value;
}

/** The dtype asked for (float64 if none), or a RangeError. */
function checkedDtype(dtype: Dtype | undefined): Dtype {
  if (dtype !== undefined && !Object.hasOwn(DTYPES, dtype)) {
    throw new RangeError(`dtype: ${text(dtype)} is not one of ${Object.keys(DTYPES).join(", ")}`);
  }
  return dtype ?? "float64";
}

/** One answer to one case, held to the rule: `actual` is what the function returned (the output,
 * or its steps { scores?, logits?, weights?, output }), or the Error it threw. */
export function judge(test: TestCase, actual: unknown, options: JudgeOptions = {}): Verdict {
  if (test === null || typeof test !== "object" || !("expected" in test) || !("rule" in test)) {
    throw new TypeError(`judge: the case is ${described(test)}, not one of loadCases()'s cases`);
  }
  if (options !== null && options !== undefined && typeof options !== "object") {
    throw new TypeError(
      `judge: the options are ${described(options)}, not an object such as { dtype: "float32" }`,
    );
  }
  const { matchKind = false } = options ?? {};
  const dtype = checkedDtype(options?.dtype);
  const verdict = (passed: Verdict["verdict"], problem: string | null, rest: Partial<Verdict> = {}) =>
    verdictOn(test, dtype, passed, problem, rest);
  const threw = actual instanceof Error;
  const thrownKind = threw ? (actual as Error & { kind?: unknown }).kind : undefined;
  const thrown = threw
    ? `${actual.name}${thrownKind === undefined ? "" : ` (${text(thrownKind)})`}: ${actual.message}`
    : "";
  if (test.expected.error !== null) {
    const kind = test.expected.error;
    if (!threw) {
      return verdict(
        "fail",
        `returned an answer, expected an error of kind '${kind}' (${test.expected.message})`,
      );
    }
    if (matchKind && thrownKind !== kind) {
      return verdict("fail", `threw ${thrown}; expected kind '${kind}'`);
    }
    return verdict("pass", null);
  }
  if (threw) {
    return verdict("fail", `threw ${thrown}`);
  }
  const rule = test.rule as RuleCase;
  const outside = outsideContract(rule.expected, dtype);
  if (outside !== null) {
    return verdict("outside", outside);
  }
  const answer = readAnswer(actual, rule.expected);
  if ("problem" in answer) {
    return verdict("fail", answer.problem);
  }
  if (answer.steps.output === undefined) {
    return verdict("fail", "no output");
  }
  const held = holdSteps(rule, answer.steps, dtype);
  const output = held.output;
  const worst =
    output.index === null || output.actual === null || output.expected === null
      ? null
      : { cell: output.index, expected: output.expected, actual: output.actual };
  let problem = output.problem;
  if (!output.passed && problem === null && worst !== null) {
    const [got, want] = distinctDigits(worst.actual, worst.expected);
    const used = output.budgetUsed > 1e4 ? "> 1e6 %" : `${(100 * output.budgetUsed).toFixed(1)}%`;
    problem = `${cellName("output", worst.cell)} is ${got}, expected ${want} (${used} of the ${dtype} budget)`;
  }
  if (held.firstDivergentStep !== null) {
    problem = `${problem}; first step that differs: ${held.firstDivergentStep}`;
  }
  return verdict(output.passed ? "pass" : "fail", problem, {
    budgetUsed: output.budgetUsed,
    worst,
    firstDivergentStep: held.firstDivergentStep,
    steps: held.steps,
  });
}

/** A function under test, called as the ports are: fn(query, key, value, { attnMask, isCausal,
 * scale, enableGqa, softcap, ... }), any option of AttentionOptions; it returns the output (or its
 * steps), maybe as a promise, or throws. */
// As a method's type, whose parameters TypeScript checks both ways: a port typed for nested
// number[][] (the cases' usual form) is accepted, though a case may hand it anything.
export type AttentionFunction = {
  call(
    query: unknown,
    key: unknown,
    value: unknown,
    options?: { readonly [Name in keyof AttentionOptions]?: unknown },
  ): unknown;
}["call"];

/** `fn` called on one case the way the ports are called: its answer (awaited), or what it threw
 * (as an Error), for judge. Each call gets fresh copies of the case's inputs: a function that
 * changes them in place changes nothing another call (or the judge) sees. */
export async function call(fn: AttentionFunction, test: TestCase): Promise<unknown> {
  const { query, key, value, attnMask } = structuredClone(test.inputs);
  try {
    return await fn(query, key, value, { attnMask, ...test.options });
  } catch (error) {
    return error instanceof Error ? error : new Error(`threw a non-Error: ${text(error)}`);
  }
}

/** What runCases gives for a call still running at the limit. */
const timedOut = Symbol("timed out");

/** call(fn, test), or timedOut if it has not settled after `seconds` (null: no limit). */
async function callWithin(fn: AttentionFunction, test: TestCase, seconds: number | null): Promise<unknown> {
  if (seconds === null) {
    return await call(fn, test);
  }
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise((settle) => {
    timer = setTimeout(() => settle(timedOut), seconds * 1000);
  });
  try {
    return await Promise.race([call(fn, test), limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** A verdict with no numbers: what the judge says where no budget was used (an error case, a
 * refused answer, a time-out); `rest` fills in what is known. */
function verdictOn(
  test: TestCase,
  dtype: Verdict["dtype"],
  passed: Verdict["verdict"],
  problem: string | null,
  rest: Partial<Verdict> = {},
): Verdict {
  return {
    caseId: test.id,
    verdict: passed,
    dtype,
    budgetUsed: null,
    worst: null,
    problem,
    firstDivergentStep: null,
    steps: [],
    ...rest,
  };
}

/** Calls `fn` on every case asked for, in order, one at a time, and yields the verdict on each. A
 * call that has not settled after `timeoutSeconds` fails its case, and the run goes on (the promise
 * itself cannot be stopped: it is left to settle, unheard). */
export async function* runCases(
  fn: AttentionFunction,
  options: JudgeOptions & CaseFilter & RunOptions = {},
): AsyncGenerator<Verdict> {
  const { timeoutSeconds = TIMEOUT_SECONDS } = options ?? {};
  if (timeoutSeconds !== null && !(typeof timeoutSeconds === "number" && timeoutSeconds > 0)) {
    throw new RangeError(`timeoutSeconds: ${text(timeoutSeconds)} is not a positive number of seconds`);
  }
  const dtype = checkedDtype(options?.dtype);
  for (const test of loadCases(options ?? {})) {
    const answer = await callWithin(fn, test, timeoutSeconds);
    if (answer === timedOut) {
      yield verdictOn(test, dtype, "fail", `did not return within ${timeoutSeconds} s`);
      continue;
    }
    yield judge(test, answer, options);
  }
}
