/**
 * Run a learner's own attention module on fixture cases, one case at a time, for `attention-port check`.
 *
 *     node typescript/src/check.ts --module PATH --answers-fd N [--fixtures DIR]
 *
 * Started by python/attention_port/learner.py, which judges the answers (with compare.py) and explains
 * them. This process only loads the learner's module, calls it and writes down what it returned: the
 * learner's code runs here and not in the harness, so an endless loop, a crash or a syntax error costs
 * this process only, and the harness starts a fresh one for the next case.
 *
 * The module exports `scaledDotProductAttention(query, key, value, options?)` and may export
 * `attentionSteps` (called instead when present, so that every step can be compared). Tensors are
 * given as nested arrays, except a tensor with a zero-size dimension, which is given as `{shape, data}`
 * as the project's ports take it: nested arrays cannot say [2, 0, 8] (it would be written [[], []]).
 *
 * Protocol. Answers go to file descriptor N, one JSON line each, so that what the learner prints on
 * stdout cannot be mistaken for one. First {"hello": {"function", "takesOptions"}} or
 * {"fatal": "one line"}. Then for each request line on stdin, {"id", "options"} (options: call with
 * the case's options object), one of
 *     {"id", "steps": {name: {"shape", "data"}}}   output, and scores/logits/weights when returned
 *     {"id", "threw": {"name", "message", "kind", "deliberate", "where"}}  the function threw (kind: an
 *         AttentionInputError's; deliberate: thrown on purpose, not a crash; where: "line N" of the module)
 *     {"id", "bad": "one line"}                     it returned something that is not nested numbers
 * Numbers are written as in the fixtures ("NaN", "Infinity", "-Infinity"; -0.0 keeps its sign).
 */

import { spawnSync } from "node:child_process";
import { readFileSync, writeSync } from "node:fs";
import { basename, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

import { oneLine, tensorJson } from "./cli.ts";
import {
  DEFAULT_FIXTURES,
  type FixtureCase,
  type FixtureTensor,
  loadFixtures,
  portTensor,
} from "./fixtures.ts";
import { describeValue, formatShape, indicesOf, inferShape, isShaped, leaves, path } from "./inputs.ts";

const STEP_NAMES = ["scores", "logits", "weights", "output"] as const;

type Learner = (...args: unknown[]) => unknown;

interface Loaded {
  readonly run: Learner;
  readonly name: string;
  readonly takesOptions: boolean;
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

/** The first line of `node --check PATH`, which names the line of a syntax error ("PATH:3"); an
 * error from import() does not say where in the file it is. */
function syntaxErrorLocation(path: string): string | null {
  const checked = spawnSync(process.execPath, ["--check", path], { encoding: "utf8", timeout: 10_000 });
  const first = (checked.stderr ?? "").split("\n")[0]?.trim() ?? "";
  const match = /:(\d+)$/.exec(first);
  return match === null ? null : `line ${match[1]}`;
}

async function loadLearner(path: string): Promise<Loaded> {
  let module: Record<string, unknown>;
  try {
    module = (await import(pathToFileURL(resolve(path)).href)) as Record<string, unknown>;
  } catch (error) {
    const e = error as Error & { code?: string };
    if (e instanceof SyntaxError || e?.code === "ERR_INVALID_TYPESCRIPT_SYNTAX") {
      // TypeScript's stripper puts "PATH:LINE" first in the stack; JavaScript's needs `node --check`.
      const stackLine = /:(\d+)\s*$/m.exec(String(e.stack ?? "").split("\n")[0] ?? "");
      const where = stackLine !== null ? `line ${stackLine[1]}` : syntaxErrorLocation(path);
      throw new Error(`syntax error in ${path}${where === null ? "" : ` (${where})`}: ${oneLine(e.message)}`);
    }
    const what = e instanceof Error ? `${e.name}: ${oneLine(e.message)}` : String(error);
    throw new Error(`${path} threw while loading: ${what}`);
  }
  // A CommonJS module's exports arrive as `default`.
  const hasFunction = (x: unknown): boolean =>
    typeof x === "object" &&
    x !== null &&
    (typeof (x as Record<string, unknown>).scaledDotProductAttention === "function" ||
      typeof (x as Record<string, unknown>).attentionSteps === "function");
  const scope =
    !hasFunction(module) && hasFunction(module.default)
      ? (module.default as Record<string, unknown>)
      : module;
  const name = typeof scope.attentionSteps === "function" ? "attentionSteps" : "scaledDotProductAttention";
  const run = scope[name];
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

/** Typed arrays (Float64Array rows, say) as plain arrays, at any depth. */
function plain(x: unknown): unknown {
  if (ArrayBuffer.isView(x) && !(x instanceof DataView)) {
    return Array.from(x as unknown as ArrayLike<number>);
  }
  return Array.isArray(x) ? x.map(plain) : x;
}

/** One returned tensor as {"shape", "data"} JSON, or a one-line reason it is not nested numbers. */
function returnedTensor(
  name: string,
  value: unknown,
): { shape: readonly number[]; json: string } | { bad: string } {
  if (isShaped(value) && Array.isArray(value.shape)) {
    const data = plain(value.data);
    if (!Array.isArray(data)) {
      return { bad: `${name}.data is ${describeValue(value.data)}, expected an array of numbers` };
    }
    const shape = value.shape as number[];
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

/** The options object of a case: only the options it sets, so a learner's defaults apply to the rest. */
function caseOptions(c: FixtureCase): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  const mask = c.inputs.attnMask;
  if (mask !== null) {
    options.attnMask = c.expected === null ? mask : portTensor(mask as FixtureTensor);
  }
  const defaults: FixtureCase["params"] = { isCausal: false, scale: null, enableGqa: false, softcap: 0 };
  for (const name of ["isCausal", "scale", "enableGqa", "softcap"] as const) {
    if (c.params[name] !== defaults[name]) {
      options[name] = c.params[name];
    }
  }
  return options;
}

/** One case's answer line. */
/** Many tutorials' attention returns [output, weights]; the pair itself would read as a ragged or
 * wrongly shaped output, so it is named: two items, the first of the output's shape, the whole not. */
function outputAndWeights(learner: Loaded, c: FixtureCase, returned: unknown): string | null {
  if (c.expected === null || !Array.isArray(returned) || returned.length !== 2) {
    return null;
  }
  const want = c.expected.output.shape;
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

function answer(learner: Loaded, c: FixtureCase, withOptions: boolean): string {
  const id = JSON.stringify(c.id);
  // Nested arrays, or {shape, data} for a tensor with a zero-size dim (portTensor); an invalid case's as written.
  const input = (x: unknown) => (c.expected === null ? x : portTensor(x as FixtureTensor));
  const args = [input(c.inputs.query), input(c.inputs.key), input(c.inputs.value)];
  if (withOptions) {
    args.push(caseOptions(c));
  }
  let returned: unknown;
  try {
    returned = learner.run(...args);
  } catch (error) {
    const e = error as { name?: unknown; message?: unknown; kind?: unknown };
    const threw = {
      name: error instanceof Error ? error.name : typeof error,
      message: oneLine(String(error instanceof Error ? e.message : error)),
      kind: typeof e?.kind === "string" ? e.kind : null, // an AttentionInputError's, or a learner's own
      ...thrownOnPurpose(error),
    };
    return `{"id": ${id}, "threw": ${JSON.stringify(threw)}}`;
  }
  if (learner.name === "attentionSteps" && (typeof returned !== "object" || returned === null)) {
    return `{"id": ${id}, "bad": ${JSON.stringify(`attentionSteps returned ${what(returned)}, expected an object with scores, logits, weights and output`)}}`;
  }
  const pair = learner.name === "attentionSteps" ? null : outputAndWeights(learner, c, returned);
  if (pair !== null) {
    return `{"id": ${id}, "bad": ${JSON.stringify(pair)}}`;
  }
  const steps: Record<string, unknown> =
    learner.name === "attentionSteps" ? (returned as Record<string, unknown>) : { output: returned };
  const parts: string[] = [];
  for (const name of STEP_NAMES) {
    if (!(name in steps) && name !== "output") {
      continue;
    }
    const tensor = returnedTensor(name, steps[name]);
    if ("bad" in tensor) {
      return `{"id": ${id}, "bad": ${JSON.stringify(tensor.bad)}}`;
    }
    parts.push(`${JSON.stringify(name)}: ${tensor.json}`);
  }
  return `{"id": ${id}, "steps": {${parts.join(", ")}}}`;
}

async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      module: { type: "string" },
      "answers-fd": { type: "string" },
      fixtures: { type: "string", default: DEFAULT_FIXTURES },
    },
    strict: true,
  });
  const fd = Number(values["answers-fd"]);
  if (values.module === undefined || !Number.isInteger(fd)) {
    console.error("usage: node typescript/src/check.ts --module PATH --answers-fd N [--fixtures DIR]");
    return 2;
  }
  const send = (line: string) => writeSync(fd, `${line}\n`);
  let learner: Loaded;
  try {
    learner = await loadLearner(values.module);
  } catch (error) {
    send(JSON.stringify({ fatal: (error as Error).message }));
    return 0;
  }
  send(
    JSON.stringify({
      hello: { function: learner.name, takesOptions: learner.takesOptions },
    }),
  );
  let byId: Map<string, FixtureCase> | null = null; // every case, read once at the first request
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim() === "") {
      continue;
    }
    const request = JSON.parse(line) as { id: string; options: boolean };
    byId ??= new Map(loadFixtures(values.fixtures).map((c) => [c.id, c]));
    send(answer(learner, byId.get(request.id)!, request.options));
  }
  return 0;
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
