/**
 * Run a learner's own attention module on the cases check sends, one case at a time, for
 * `attention-port check`.
 *
 *     node --permission --allow-fs-read=* typescript/learner/worker.ts --module PATH --answers-fd N
 *
 * Started by python/attention_port/learner/runner.py, which judges the answers (with compare.py) and explains
 * them; the protocol is protocol.ts's (python/attention_port/learner/protocol.py says it in
 * full). This process only loads the learner's module, calls it with each case's inputs and options
 * and writes down what it returned, on the answer descriptor: the learner's console.log stays the
 * learner's. The learner's code runs here and not in the harness, so an endless loop, a crash or a
 * syntax error costs this process only, and the harness starts a fresh one for the next case.
 * Node's permission flags keep a bug from writing files or starting processes; check is not a
 * security sandbox, and the learner's code runs as the learner.
 *
 * The module exports `scaledDotProductAttention(query, key, value, options?)` and may export
 * `attentionSteps` (called instead when present, so that every step can be compared). Tensors are
 * given as nested arrays, except a tensor with a zero-size dimension, which is given as `{shape, data}`
 * as the project's ports take it: nested arrays cannot say [2, 0, 8] (it would be written [[], []]).
 * A function that returns a promise (an async function) is awaited. A throw is said as on purpose
 * or as a crash (thrownOnPurpose), with the line of the learner's code it came from.
 */

import { readFileSync, writeSync } from "node:fs";
import { basename, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { type FixtureTensor, portTensor } from "../golden/reader.ts";
import { tensorJson } from "../harness/results.ts";
import {
  describeValue,
  formatShape,
  indicesOf,
  inferShape,
  isShaped,
  leaves,
  oneLine,
  path,
  product,
} from "../src/inputs.ts";
import { javascriptName } from "../src/vocabulary.ts";
import {
  LAYER_STEPS,
  OPTION_NAMES,
  type Request,
  readInput,
  STEP_NAMES,
  type Threw,
  threwAnswer,
} from "./protocol.ts";

const stringify = JSON.stringify;
const clone = structuredClone;
const MAX_RANK = 64; // deeper nesting than any tensor has: an array that holds itself, say

type Learner = (...args: unknown[]) => unknown;

interface Loaded {
  readonly run: Learner | null; // null: the module has the layer or RoPE only
  readonly name: string | null;
  readonly takesOptions: boolean;
  readonly layer: Learner | null; // its multiHeadAttention, checked on the layer's levels
  readonly rotary: Learner | null; // its applyRotary
}

/** How many parameters a function declares. `function.length` stops at the first parameter with a
 * default value (`options = {}` is not counted), so the parameter list in its source is counted too;
 * a rest parameter (`...args`) counts as many; comments in the list do not count. */
export function declaredParameterCount(fn: (...args: never[]) => unknown): number {
  const source = Function.prototype.toString.call(fn);
  const arrow = /^(?:async\s+)?([A-Za-z_$][\w$]*)\s*=>/.exec(source);
  if (arrow !== null) {
    return Math.max(fn.length, 1);
  }
  const open = source.indexOf("(");
  if (open < 0) {
    return fn.length;
  }
  const parameters: string[] = [];
  let depth = 0;
  let quote: string | null = null;
  let current = "";
  for (let n = open + 1; n < source.length; n++) {
    const c = source[n];
    if (quote !== null) {
      current += c;
      if (c === "\\") {
        n++;
      } else if (c === quote) {
        quote = null;
      }
      continue;
    }
    if (c === "/" && (source[n + 1] === "*" || source[n + 1] === "/")) {
      // A comment: its commas and brackets are not the list's. Skip to its end.
      const end = source[n + 1] === "*" ? source.indexOf("*/", n + 2) + 1 : source.indexOf("\n", n);
      n = end <= 0 ? source.length : end;
      continue;
    }
    if (c === '"' || c === "'" || c === "`") {
      quote = c;
    } else if (c === "(" || c === "[" || c === "{") {
      depth++;
    } else if (c === ")" || c === "]" || c === "}") {
      if (depth === 0) {
        break; // the end of the parameter list
      }
      depth--;
    } else if (c === "," && depth === 0) {
      parameters.push(current.trim());
      current = "";
      continue;
    }
    current += c;
  }
  parameters.push(current.trim());
  const declared = parameters.filter((p) => p !== "");
  if (declared.some((p) => p.startsWith("..."))) {
    return Number.POSITIVE_INFINITY;
  }
  return Math.max(fn.length, declared.length);
}

/** A syntax error in the learner's file. An error from import() does not say where a JavaScript
 * file's is, and this process may not start `node --check` to find out: the harness does that. */
class LearnerSyntaxError extends Error {
  readonly file: string;
  readonly where: string | null;
  readonly said: string;

  constructor(file: string, where: string | null, said: string) {
    super(`syntax error in ${file}${where === null ? "" : ` (${where})`}: ${said}`);
    this.file = file;
    this.where = where;
    this.said = said;
  }
}

/** A thrown value in words, whatever it is: an object whose message or toString throws, Node's
 * ERR_ACCESS_DENIED (said as what check's limits refused, which is not a throw on purpose); and
 * whether it was thrown on purpose, and where (thrownOnPurpose). Never throws. */
function describeThrown(error: unknown): Threw {
  let how: { deliberate: boolean; where: string | null };
  try {
    how = thrownOnPurpose(error);
  } catch {
    how = { deliberate: true, where: null }; // its stack or class could not be read: nothing says it crashed
  }
  try {
    const e = error as { name?: unknown; message?: unknown; kind?: unknown; code?: unknown };
    if (error instanceof Error && e.code === "ERR_ACCESS_DENIED") {
      const { permission, resource } = e as { permission?: unknown; resource?: unknown };
      const what: Record<string, string> = {
        FileSystemWrite: `write ${String(resource)}`,
        ChildProcess: "start a process",
        WorkerThreads: "start a worker",
      };
      const refused = what[String(permission)] ?? `use ${String(permission)}`;
      return {
        name: "Error",
        message: `check does not let your code ${refused}`,
        kind: null,
        ...how,
      };
    }
    return {
      name: error instanceof Error ? String(e.name) : typeof error,
      message: oneLine(String(error instanceof Error ? e.message : error)),
      kind: typeof e?.kind === "string" ? e.kind : null, // an AttentionInputError's, or a learner's own
      ...how,
    };
  } catch {
    return { name: typeof error, message: "(its message or toString threw when read)", kind: null, ...how };
  }
}

async function loadLearner(path: string): Promise<Loaded> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    const e = error as Error & { code?: string };
    if (e instanceof SyntaxError || e?.code === "ERR_INVALID_TYPESCRIPT_SYNTAX") {
      // TypeScript's stripper puts "PATH:LINE" first in the stack; JavaScript's says no line.
      const stackLine = /:(\d+)\s*$/m.exec(String(e.stack ?? "").split("\n")[0] ?? "");
      throw new LearnerSyntaxError(
        path,
        stackLine === null ? null : `line ${stackLine[1]}`,
        oneLine(e.message),
      );
    }
    const thrown = describeThrown(error);
    throw new Error(`${path} threw while loading: ${thrown.name}: ${thrown.message}`);
  }
  // A CommonJS module's exports arrive as `default`.
  const hasFunction = (x: unknown): boolean =>
    typeof x === "object" &&
    x !== null &&
    ["scaledDotProductAttention", "attentionSteps", "multiHeadAttention", "applyRotary"].some(
      (name) => typeof (x as Record<string, unknown>)[name] === "function",
    );
  const scope =
    !hasFunction(module) && hasFunction(module.default)
      ? (module.default as Record<string, unknown>)
      : module;
  const name = typeof scope.attentionSteps === "function" ? "attentionSteps" : "scaledDotProductAttention";
  const run = scope[name];
  const own = (x: unknown) => (typeof x === "function" ? (x as Learner) : null);
  const layer = own(scope.multiHeadAttention);
  const rotary = own(scope.applyRotary);
  if (typeof run !== "function" && (layer !== null || rotary !== null)) {
    return { run: null, name: null, takesOptions: false, layer, rotary };
  }
  if (typeof run !== "function") {
    const names = Object.keys(scope).filter((k) => k !== "default");
    let has = `it exports ${names.join(", ")}`;
    if (names.length === 0) {
      has =
        typeof scope.default === "function"
          ? "it has only a default export: export the function by that name"
          : "it exports nothing";
    }
    throw new Error(`${path} has no export named scaledDotProductAttention (${has})`);
  }
  return {
    run: run as Learner,
    name,
    takesOptions: declaredParameterCount(run as Learner) >= 4,
    layer,
    rotary,
  };
}

const THIS_FILE = fileURLToPath(import.meta.url);

/** One stack frame's place: "at fn (file:///x.ts:3:9)" or "at file:///x.ts:3:9". */
const FRAME = /^\s*at (?:.*\()?(.+?):(\d+):(\d+)\)?$/;

/** Whether an error was thrown on purpose, and the line of the learner's module it came from.
 *
 * On purpose: the error was made where its stack begins by `new SomeError(...)`, `SomeError(...)` or
 * an Error subclass's `super(...)`, in a file of the learner's own or the project's (not Node's, not
 * node_modules), or it is not an Error at all (`throw "bad input"`), or it carries a `kind`, as the
 * project's errors do. Anything else is a crash in the learner's math: `query.map is not a function`,
 * reading a property of undefined, a reduce of an empty array, made by the engine itself. */
export function thrownOnPurpose(error: unknown): { deliberate: boolean; where: string | null } {
  if (!(error instanceof Error)) {
    return { deliberate: true, where: null };
  }
  const frames = String(error.stack ?? "")
    .split("\n")
    .map((line) => FRAME.exec(line))
    .filter((m) => m !== null)
    .map(([, file, line, column]) => ({ file: file!, line: Number(line), column: Number(column) }));
  // The innermost frame of the learner's code: a file of theirs (or of the project), not this one.
  const own = frames.find(
    (f) =>
      f.file.startsWith("file:") && !f.file.includes("/node_modules/") && fileURLToPath(f.file) !== THIS_FILE,
  );
  const where = own === undefined ? null : `line ${own.line} of ${basename(fileURLToPath(own.file))}`;
  if (typeof (error as { kind?: unknown }).kind === "string") {
    return { deliberate: true, where };
  }
  const top = frames[0];
  if (top === undefined) {
    return { deliberate: true, where }; // no stack to read: nothing says it crashed
  }
  if (!top.file.startsWith("file:") || top.file.includes("/node_modules/")) {
    return { deliberate: false, where };
  }
  let text: string;
  try {
    text = (readFileSync(fileURLToPath(top.file), "utf8").split("\n")[top.line - 1] ?? "").slice(
      top.column - 1,
    );
  } catch {
    return { deliberate: true, where };
  }
  const made = /^(?:new\s+([\w$.]+)|([\w$.]+)\s*\(|(super)\s*\()/.exec(text);
  if (made === null) {
    return { deliberate: false, where };
  }
  if (made[3] !== undefined) {
    return { deliberate: true, where };
  }
  // `new Array(-1)` makes a RangeError too: only an error class's own name counts.
  const name = (made[1] ?? made[2]!).split(".").at(-1);
  const classes: string[] = [];
  for (let p = Object.getPrototypeOf(error); p !== null; p = Object.getPrototypeOf(p)) {
    classes.push((p as { constructor: { name: string } }).constructor.name);
  }
  return { deliberate: name !== undefined && classes.includes(name), where };
}

/** Typed arrays (Float64Array rows, say) as plain arrays, at any depth up to MAX_RANK. */
function plain(x: unknown, depth = 0): unknown {
  if (depth > MAX_RANK) {
    throw new TooDeep();
  }
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) {
    return Array.from(x as unknown as ArrayLike<number>);
  }
  return Array.isArray(x) ? x.map((item) => plain(item, depth + 1)) : x;
}

/** Nesting deeper than MAX_RANK: an array that holds itself, say. */
class TooDeep extends Error {}

/** A shaped tensor's shape as a learner returned it, or a one-line reason it is not one. */
function checkedShape(name: string, shape: readonly unknown[], length: number): string | null {
  if (shape.length > MAX_RANK || !shape.every((n) => Number.isSafeInteger(n) && (n as number) >= 0)) {
    const written = shape.length > MAX_RANK ? `${shape.length} long` : `[${shape.map(String).join(", ")}]`;
    return `${name}.shape ${written} is not a list of sizes (whole numbers >= 0, at most ${MAX_RANK})`;
  }
  const size = product(shape as number[]);
  if (size !== length) {
    return `${name}.shape ${formatShape(shape as number[])} holds ${size} numbers, but ${name}.data has ${length}`;
  }
  return null;
}

/** One returned tensor as {"shape", "data"} JSON, or a one-line reason it is not nested numbers.
 * Reading it runs the learner's own code (a getter, a Proxy, a toString) that may throw or never
 * end its nesting: either is a reason too. */
function returnedTensor(
  name: string,
  value: unknown,
): { shape: readonly number[]; json: string } | { bad: string } {
  try {
    return readTensor(name, value);
  } catch (error) {
    if (error instanceof TooDeep) {
      return { bad: `${name} is nested more than ${MAX_RANK} deep (an array that holds itself?)` };
    }
    const thrown = describeThrown(error);
    return { bad: `reading the ${name} your function returned threw ${thrown.name}: ${thrown.message}` };
  }
}

function readTensor(
  name: string,
  value: unknown,
): { shape: readonly number[]; json: string } | { bad: string } {
  if (isShaped(value) && Array.isArray(value.shape)) {
    const data = plain(value.data);
    if (!Array.isArray(data)) {
      return { bad: `${name}.data is ${describeValue(value.data)}, expected an array of numbers` };
    }
    const shape = value.shape as number[];
    const wrongShape = checkedShape(name, shape, data.length);
    if (wrongShape !== null) {
      return { bad: wrongShape };
    }
    const bad = data.findIndex((x) => typeof x !== "number");
    if (bad >= 0) {
      return { bad: `${name}.data[${bad}] is ${what(data[bad])}, expected a number` };
    }
    return { shape, json: tensorJson(shape, data) };
  }
  const nested = plain(value);
  if (!Array.isArray(nested)) {
    return { bad: `${name} is ${what(value)}, expected nested arrays of numbers` };
  }
  let shape: number[];
  try {
    shape = inferShape(name, nested);
  } catch (error) {
    return { bad: oneLine((error as Error).message) };
  }
  const data = leaves(nested, shape.length);
  const bad = data.findIndex((x) => typeof x !== "number");
  if (bad >= 0) {
    return { bad: `${name}${path(indicesOf(bad, shape))} is ${what(data[bad])}, expected a number` };
  }
  return { shape, json: tensorJson(shape, data) };
}

function what(x: unknown): string {
  return x === undefined ? "undefined" : describeValue(x);
}

/** The options object of a request: only the options its case sets, so a learner's defaults apply
 * to the rest, by their JavaScript names. */
function requestOptions(request: Request): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.options)) {
    options[OPTION_NAMES[name]!] = name === "attn_mask" ? given(request, value) : readInput(value, false);
  }
  return options;
}

/** One input of a request as the learner's function is given it. */
function given(request: Pick<Request, "valid">, entry: unknown): unknown {
  const x = readInput(entry, request.valid);
  // Nested arrays, or {shape, data} for a tensor with a zero-size dim (nested arrays would lose it).
  return request.valid ? portTensor(x as FixtureTensor) : x;
}

/** Many tutorials' attention returns [output, weights]; the pair itself would read as a ragged or
 * wrongly shaped output, so it is named: two items, the first of the output's shape, the whole not. */
function outputAndWeights(learner: Loaded, request: Request, returned: unknown): string | null {
  const want = request.output_shape;
  if (want === null || !Array.isArray(returned) || returned.length !== 2) {
    return null;
  }
  const shapeOf = (x: unknown) => {
    const tensor = returnedTensor("output", x);
    return "json" in tensor ? formatShape(tensor.shape) : null;
  };
  if (shapeOf(returned[0]) !== formatShape(want) || shapeOf(returned) === formatShape(want)) {
    return null;
  }
  return (
    `${learner.name} returned a pair whose first item has the output's shape ${formatShape(want)}:` +
    " return the output alone, not [output, weights]"
  );
}

/** An error the learner's code threw outside the call (a rejected promise nobody awaited, a throw in
 * a timer), held until it can be said on the case that is running. */
let stray: { error: unknown } | null = null;

/** Whether an argument is as it was before the call (`before` is its copy from then): the same
 * nesting and numbers, NaN equal to NaN, -0 not equal to 0. */
export function unchanged(before: unknown, after: unknown, depth = 0): boolean {
  if (depth > MAX_RANK + 2) {
    return false;
  }
  if (typeof before !== "object" || before === null) {
    return Object.is(before, after);
  }
  if (typeof after !== "object" || after === null || Array.isArray(before) !== Array.isArray(after)) {
    return false;
  }
  const keys = Object.keys(before);
  const afterKeys = Object.keys(after);
  return (
    keys.length === afterKeys.length &&
    keys.every((k) =>
      unchanged((before as Record<string, unknown>)[k], (after as Record<string, unknown>)[k], depth + 1),
    )
  );
}

/** A layer or RoPE request's arguments: multiHeadAttention(xQ, xKv, params, options) or
 * applyRotary(x, positions, options), each option and rope's rotary_dim by its JavaScript name. */
function layerArguments(request: LayerRequest): unknown[] {
  const input = (name: string) => {
    const entry = request.inputs[name];
    return entry === null || entry === undefined ? null : given(request, entry);
  };
  const options: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(request.options)) {
    let option = readInput(value, false);
    if (name === "rope" && option !== null && typeof option === "object") {
      option = Object.fromEntries(Object.entries(option).map(([k, v]) => [javascriptName(k), v]));
    }
    options[javascriptName(name)] = option;
  }
  if (request.kind === "rope") {
    return [input("x"), input("positions"), options];
  }
  const params: Record<string, unknown> = {};
  for (const name of ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"]) {
    if (request.inputs[name] !== null && request.inputs[name] !== undefined) {
      params[javascriptName(name)] = input(name);
    }
  }
  // The mask and the KV cache are options, as the project's layer takes them.
  for (const name of ["attn_mask", "past_key", "past_value"]) {
    if (request.inputs[name] !== null && request.inputs[name] !== undefined) {
      options[javascriptName(name)] = input(name);
    }
  }
  return [input("x_q"), input("x_kv"), params, options];
}

/** What a layer or RoPE function returned, as steps by the protocol's names (LAYER_STEPS): the
 * output, and with needWeights or returnCache the object's output, weights, presentKey and
 * presentValue, those that were asked for. */
function layerSteps(request: LayerRequest, returned: unknown): Record<string, unknown> | string {
  const asked: Record<string, boolean> = {
    output: true,
    weights: request.options.need_weights === true,
    present_key: request.options.return_cache === true,
    present_value: request.options.return_cache === true,
  };
  const wanted = LAYER_STEPS.filter((name) => asked[name]);
  if (wanted.length === 1) {
    return { output: returned };
  }
  const all = returned as Record<string, unknown> | null;
  if (typeof all !== "object" || all === null || !wanted.every((name) => javascriptName(name) in all)) {
    const said = [asked.weights ? "needWeights: true" : "", asked.present_key ? "returnCache: true" : ""]
      .filter((option) => option !== "")
      .join(" and ");
    return `multiHeadAttention with ${said} returned ${what(returned)}, expected { ${wanted.map(javascriptName).join(", ")} }`;
  }
  return Object.fromEntries(wanted.map((name) => [name, all[javascriptName(name)]]));
}

/** Whether a learner's layer takes a KV cache. Its options object has no names to read, so the
 * layer is asked once, as the file loads: one token (D = E = 2, one head, no RoPE) after a cache of
 * one position, with returnCache. A layer that keeps a cache answers an object with presentKey
 * (awaited when it is a promise); one that does not answers the output alone, or throws. */
export async function takesPast(layer: Learner): Promise<boolean> {
  const eye = [
    [1, 0],
    [0, 1],
  ];
  const options = { numHeads: 1, pastKey: [[[0, 1]]], pastValue: [[[1, 0]]], returnCache: true };
  try {
    let returned = layer([[1, 0]], null, { wQ: eye, wK: eye, wV: eye, wO: eye }, options);
    if (typeof (returned as { then?: unknown } | null)?.then === "function") {
      returned = await returned;
    }
    return (
      typeof returned === "object" &&
      returned !== null &&
      !Array.isArray(returned) &&
      "presentKey" in returned
    );
  } catch {
    return false;
  }
}

/** A layer or RoPE case: the request names its kind (protocol.ts). */
interface LayerRequest {
  readonly id: string;
  readonly kind: "layer" | "rope";
  readonly valid: boolean;
  readonly output_shape: readonly number[] | null;
  readonly inputs: Readonly<Record<string, unknown>>;
  readonly options: Readonly<Record<string, unknown>>;
}

/** One case's answer line (its JSON), with "changed": the arguments the call changed in place
 * (each compared with a copy taken before it). */
async function answer(learner: Loaded, request: Request | LayerRequest): Promise<string> {
  if ("kind" in request) {
    return await answerOf(learner, request, {}, {});
  }
  const given: Record<string, unknown> = {};
  const before: Record<string, unknown> = {};
  const json = await answerOf(learner, request, given, before);
  let changed: string[] = [];
  try {
    changed = Object.keys(before).filter((name) => !unchanged(before[name], given[name]));
  } catch {
    changed = []; // an argument replaced by a Proxy whose reads throw: nothing to compare
  }
  if (changed.length === 0 || json.startsWith(`{"id": ${stringify(request.id)}, "bad"`)) {
    return json;
  }
  return `${json.slice(0, -1)}, "changed": ${stringify(changed)}}`;
}

async function answerOf(
  learner: Loaded,
  request: Request | LayerRequest,
  arguments_: Record<string, unknown>,
  before: Record<string, unknown>,
): Promise<string> {
  const id = stringify(request.id);
  if ("kind" in request) {
    return await answerWith(learner, request, id, layerArguments(request));
  }
  const query = given(request, request.inputs.query);
  // One array as both query and key, as scaledDotProductAttention(Q, Q, V) gives it.
  const key = request.same_query_key === true ? query : given(request, request.inputs.key);
  const args = [query, key, given(request, request.inputs.value)];
  Object.assign(arguments_, { query, key, value: args[2] });
  if (Object.keys(request.options).length > 0) {
    const options = requestOptions(request);
    args.push(options);
    if ("attnMask" in options) {
      arguments_.attnMask = options.attnMask;
    }
  }
  if (request.valid) {
    for (const [name, x] of Object.entries(arguments_)) {
      before[name] = clone(x);
    }
  }
  return await answerWith(learner, request, id, args);
}

/** The call and its answer line: a case's arguments given to the function the request is for. */
async function answerWith(
  learner: Loaded,
  request: Request | LayerRequest,
  id: string,
  args: unknown[],
): Promise<string> {
  const layered = "kind" in request;
  const run = layered ? (request.kind === "rope" ? learner.rotary : learner.layer) : learner.run;
  let returned: unknown;
  let promised: boolean;
  try {
    returned = run!(...args);
  } catch (error) {
    return threwAnswer(request.id, describeThrown(error));
  }
  try {
    promised = typeof (returned as { then?: unknown } | null)?.then === "function";
  } catch (error) {
    const thrown = describeThrown(error); // a Proxy whose every read throws, say
    const said = `reading what ${learner.name} returned threw ${thrown.name}: ${thrown.message}`;
    return `{"id": ${id}, "bad": ${stringify(said)}}`;
  }
  if (promised) {
    try {
      returned = await returned;
    } catch (error) {
      return threwAnswer(request.id, describeThrown(error));
    }
  }
  // Let the promises and timers the call left behind settle, so that an error of theirs is said on
  // this case rather than the next.
  await new Promise((done) => setImmediate(done));
  if (stray !== null) {
    const thrown = describeThrown(stray.error);
    stray = null;
    thrown.message = `${thrown.message} (thrown outside your function's call: a promise it did not await, or a timer)`;
    return threwAnswer(request.id, thrown);
  }
  let steps: Record<string, unknown>;
  try {
    if (layered) {
      const found = layerSteps(request, returned);
      if (typeof found === "string") {
        return `{"id": ${id}, "bad": ${stringify(found)}}`;
      }
      return stepsAnswer(id, found, LAYER_STEPS);
    }
    if (learner.name === "attentionSteps" && (typeof returned !== "object" || returned === null)) {
      const said = `attentionSteps returned ${what(returned)}, expected an object with scores, logits, weights and output`;
      return `{"id": ${id}, "bad": ${stringify(said)}}`;
    }
    const pair = learner.name === "attentionSteps" ? null : outputAndWeights(learner, request, returned);
    if (pair !== null) {
      return `{"id": ${id}, "bad": ${stringify(pair)}}`;
    }
    steps = { output: returned };
    if (learner.name === "attentionSteps") {
      const all = returned as Record<string, unknown>;
      steps = {}; // each step read here, so that a getter that throws is said as such
      for (const name of STEP_NAMES.filter((n) => n in all)) {
        steps[name] = all[name];
      }
    }
  } catch (error) {
    const thrown = describeThrown(error);
    const said = `reading what ${learner.name} returned threw ${thrown.name}: ${thrown.message}`;
    return `{"id": ${id}, "bad": ${stringify(said)}}`;
  }
  return stepsAnswer(id, steps, STEP_NAMES);
}

/** The answer line of returned steps, each read as a tensor (the output always). */
function stepsAnswer(id: string, steps: Record<string, unknown>, names: readonly string[]): string {
  const parts: string[] = [];
  for (const name of names) {
    if (!(name in steps) && name !== "output") {
      continue;
    }
    const tensor = returnedTensor(name, steps[name]);
    if ("bad" in tensor) {
      return `{"id": ${id}, "bad": ${stringify(tensor.bad)}}`;
    }
    parts.push(`${stringify(name)}: ${tensor.json}`);
  }
  return `{"id": ${id}, "steps": {${parts.join(", ")}}}`;
}

/** Wait until what the learner's code printed is in the pipe: Node queues what a full pipe cannot
 * take at once, and it must arrive before the answer that follows it, to be shown on its case. */
async function printed(): Promise<void> {
  for (const stream of [process.stdout, process.stderr]) {
    await new Promise((done) => stream.write("", done));
  }
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { module: { type: "string" }, "answers-fd": { type: "string" } },
    strict: true,
  });
  const fd = Number(values["answers-fd"]);
  if (values.module === undefined || !Number.isInteger(fd)) {
    console.error("usage: node typescript/learner/worker.ts --module PATH --answers-fd N");
    return 2;
  }
  const send = (json: string) => writeSync(fd, `${json}\n`);
  process.on("unhandledRejection", (error) => {
    stray ??= { error };
  });
  process.on("uncaughtException", (error) => {
    stray ??= { error };
  });
  let loaded = false;
  // A top-level await that never settles empties the event loop and Node exits (code 0, main still
  // waiting) without a word of use: say it here, in the one line the harness reads.
  process.on("exit", (code) => {
    if (!loaded) {
      const said =
        code === 0
          ? `${values.module} did not finish loading: a top-level await in it never settles`
          : `${values.module} ended its process while loading (exit code ${code})`;
      send(stringify({ fatal: said }));
    }
  });
  let learner: Loaded;
  try {
    learner = await loadLearner(values.module);
  } catch (error) {
    loaded = true;
    if (error instanceof LearnerSyntaxError && error.where === null) {
      send(stringify({ fatal: error.message, syntaxError: { file: error.file, said: error.said } }));
    } else {
      send(stringify({ fatal: (error as Error).message }));
    }
    return 0;
  }
  loaded = true;
  const layerPast = learner.layer !== null && (await takesPast(learner.layer));
  stray = null; // an error the probe's call left behind belongs to no case
  await printed();
  send(
    stringify({
      hello: {
        function: learner.name,
        takesOptions: learner.takesOptions,
        layer: learner.layer === null ? null : "multiHeadAttention",
        rotary: learner.rotary === null ? null : "applyRotary",
        layerPast,
      },
    }),
  );
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() !== "") {
      const said = await answer(learner, JSON.parse(line) as Request | LayerRequest);
      await printed();
      send(said);
    }
  }
  return 0;
}

if (import.meta.main) {
  // Not a top-level await: a learner's module whose own never settles empties the event loop while
  // main waits for it, and Node exits 0 (the exit handler says why) without a warning about this file.
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
