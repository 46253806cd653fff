/**
 * What a TypeScript port's run sends the Python harness: one reply per port (replyJson). cli.ts
 * under Node and the WebGPU page (webgpu-browser.ts) in a browser judge their ports themselves:
 * the kit's verdicts, and the answers that cross (kit-cases.ts says which). Also the float32 form
 * of a fixture case's inputs. Nothing here touches Node's modules, so a browser bundle can hold it.
 *
 * An answer is {"scores", "logits", "weights", "output"} (each {"shape", "data"}, data flat
 * row-major; a port that gives the output only writes "output" alone), {"error": {"kind",
 * "message"}} for an AttentionInputError, or {"crash": "..."} for anything else. Numbers are
 * written as in the fixtures ("NaN", "Infinity", "-Infinity"), and -0.0 keeps its sign.
 */

import type { Verdict } from "../conformance/kit.ts";
import type { FixtureTensor } from "../golden/reader.ts";
import { AttentionInputError, type FlatMask, type FlatTensor } from "../src/inputs.ts";

/** What a port's run gives for one case (attentionSteps' fields; the other steps are optional). */
export interface StepsLike {
  readonly scores?: unknown; // absent when a port gives the output only
  readonly logits?: unknown;
  readonly weights?: unknown;
  readonly output: unknown;
  readonly scoresShape: readonly number[];
  readonly outputShape: readonly number[];
}

/** One number as JSON: non-finite ones as the fixtures' strings, -0 as -0.0 (Python reads "-0"
 * as the integer 0, losing the sign that compare.py checks). */
export function numberJson(x: number): string {
  if (Number.isNaN(x)) {
    return '"NaN"';
  }
  if (!Number.isFinite(x)) {
    return x > 0 ? '"Infinity"' : '"-Infinity"';
  }
  return Object.is(x, -0) ? "-0.0" : JSON.stringify(x);
}

/** The leaves of nested arrays (or of a typed array), row-major. */
export function flat(x: unknown): number[] {
  if (ArrayBuffer.isView(x)) {
    return Array.from(x as Float32Array);
  }
  return Array.isArray(x) ? x.flatMap(flat) : [x as number];
}

/** A tensor as the results document writes it: {"shape", "data"}, data flat row-major. */
export function tensorJson(shape: readonly number[], nested: unknown): string {
  return `{"shape": ${JSON.stringify(shape)}, "data": [${flat(nested).map(numberJson).join(", ")}]}`;
}

/** One case's answer, as a JSON text: the steps a port gave. */
export function stepsJson(steps: StepsLike): string {
  const parts = [];
  if (steps.scores !== undefined && steps.logits !== undefined && steps.weights !== undefined) {
    for (const name of ["scores", "logits", "weights"] as const) {
      parts.push(`"${name}": ${tensorJson(steps.scoresShape, steps[name])}`);
    }
  }
  parts.push(`"output": ${tensorJson(steps.outputShape, steps.output)}`);
  return `{${parts.join(", ")}}`;
}

/** One case's answer, as a JSON text, when the port threw: its error, or a crash. */
export function thrownJson(error: unknown): string {
  if (error instanceof AttentionInputError) {
    return JSON.stringify({ error: { kind: error.kind, message: error.message } });
  }
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return JSON.stringify({ crash: text });
}

/** One answer as what a port gave: its steps, a flat tensor (a flat entry's output), or the Error
 * it threw (as the kit's `call` gives it). */
export function answerJson(got: unknown): string {
  if (got instanceof Error) {
    return thrownJson(got);
  }
  if (got !== null && typeof got === "object" && "shape" in got && "data" in got) {
    const { shape, data } = got as FlatTensor;
    return `{"output": ${tensorJson(shape, data)}}`;
  }
  return stepsJson(got as StepsLike);
}

/** A value of the verdict exchange as JSON, its numbers written as numberJson writes them. */
function exchangeJson(value: unknown): string {
  if (typeof value === "number") {
    return numberJson(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(exchangeJson).join(", ")}]`;
  }
  if (value !== null && typeof value === "object") {
    const fields = Object.entries(value).map(([name, x]) => `${JSON.stringify(name)}: ${exchangeJson(x)}`);
    return `{${fields.join(", ")}}`;
  }
  return JSON.stringify(value ?? null);
}

/** One port's reply to the harness, on one line: the verdict on each case that passed cleanly or
 * is outside the contract (what of the kit's Verdict the report reads: verdict, problem and the
 * steps' checks), the answers (JSON texts) that cross, by case id, and what else it says of the run
 * (`about`: the WebGPU page's adapter). */
export function replyJson(
  port: string,
  elapsedMs: number,
  verdicts: Readonly<Record<string, Verdict>>,
  answers: Readonly<Record<string, string>>,
  about: Readonly<Record<string, string>> = {},
): string {
  const judged = Object.entries(verdicts).map(
    ([id, { verdict, problem, steps }]) =>
      `${JSON.stringify(id)}: ${exchangeJson({ verdict, problem, steps })}`,
  );
  const given = Object.entries(answers).map(([id, answer]) => `${JSON.stringify(id)}: ${answer}`);
  const said = Object.entries(about).map(
    ([name, text]) => `, ${JSON.stringify(name)}: ${JSON.stringify(text)}`,
  );
  return (
    `{"port": ${JSON.stringify(port)}${said.join("")}, "elapsed_ms": ${elapsedMs.toFixed(3)},` +
    ` "verdicts": {${judged.join(", ")}}, "answers": {${given.join(", ")}}}`
  );
}

/** A valid case's tensor as a float32 port takes it: flat, its values rounded to float32. */
export function float32Tensor(tensor: Pick<FixtureTensor, "shape" | "data">): FlatTensor {
  return { shape: tensor.shape, data: Float32Array.from(tensor.data as number[]) };
}

/** A valid case's mask in flat form: bytes for a boolean mask, float64 for a float mask (each port
 * rounds it as it computes). */
export function flatMask(mask: FixtureTensor | null): FlatMask | null {
  if (mask === null) {
    return null;
  }
  return mask.dtype === "bool"
    ? { dtype: "bool", shape: mask.shape, data: Uint8Array.from(mask.data, Number) }
    : { dtype: "float", shape: mask.shape, data: Float64Array.from(mask.data as number[]) };
}
