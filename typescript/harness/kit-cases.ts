/**
 * An attention fixture case through the conformance kit: the same call and the same judging for
 * cli.ts (Node) and the WebGPU page (webgpu-browser.ts), so that each language judges its own
 * ports and both sort what crosses to Python alike. Imports nothing of Node's: the page bundles it
 * (with the kit, whose fixture-data.ts the page build stands in for).
 *
 * A case is called through the kit's `call` and judged by its `judge` in the dtype the port
 * computes in. It crosses as its verdict alone where Python has nothing to add: a clean pass (every
 * step the port gave inside its yardstick), a case outside the contract, and an invalid case
 * refused with its kind (the kit holds it) and its message word for word (held here, as compare.py
 * holds it). The answer crosses otherwise (a failure, which verify's report words step by step),
 * and for every case where the caller asks (verify's typescript~torch cross-check holds the answers
 * to torch's).
 */

import { type AttentionFunction, call, judge, type TestCase, type Verdict } from "../conformance/kit.ts";
import type { FixtureTensor } from "../golden/reader.ts";
import type { FlatMask, FlatTensor } from "../src/inputs.ts";
import { spelled } from "../src/vocabulary.ts";
import { answerJson, flat, flatMask, float32Tensor } from "./results.ts";

/** A port's flat entry: {shape, data} tensors in (Float32Array ones compute in float32), the output
 * out, or a promise of it (the WebGPU port's). */
export type FlatEntry = (
  query: FlatTensor,
  key: FlatTensor,
  value: FlatTensor,
  options: unknown,
) => FlatTensor | Promise<FlatTensor>;

/** A tensor as the kit hands it over (nested arrays, or { shape, data } where a dim is zero), flat. */
function flatForm(x: unknown): { shape: number[]; data: unknown[] } {
  if (x !== null && typeof x === "object" && !Array.isArray(x)) {
    const { shape, data } = x as { shape: readonly number[]; data: ArrayLike<unknown> };
    return { shape: [...shape], data: Array.from(data) };
  }
  const shape: number[] = [];
  for (let node = x; Array.isArray(node); node = node[0]) {
    shape.push(node.length);
  }
  return { shape, data: flat(x) };
}

const float32 = (x: unknown): FlatTensor =>
  float32Tensor(flatForm(x) as Pick<FixtureTensor, "shape" | "data">);

/** A mask as the kit hands it over, in flat form (booleans as bytes, numbers as float64). */
function maskOf(mask: unknown): FlatMask | null {
  if (mask === null || mask === undefined) {
    return null;
  }
  const { shape, data } = flatForm(mask);
  return flatMask({ dtype: typeof data[0] === "boolean" ? "bool" : "float64", shape, data } as FixtureTensor);
}

/** A float32 port's flat entry as the kit calls a port: Float32Array tensors of the case's values
 * (the port computes in float32), the mask in flat form. */
export function float32Entry(entry: FlatEntry): AttentionFunction {
  return (query, key, value, options = {}) =>
    entry(float32(query), float32(key), float32(value), { ...options, attnMask: maskOf(options.attnMask) });
}

/** Whether what a port gave says the case's error message, if it threw: the fixtures hold it in
 * Python's spelling, and the ports' messages are the same words but for the names each language
 * spells its own way (compare.py's normalize_message). Only a refusal of an invalid case can be a
 * clean pass; its kind the kit has already held. */
function saysItsMessage(test: TestCase, got: unknown): boolean {
  if (!(got instanceof Error)) {
    return true;
  }
  return test.expected.error !== null && spelled(got.message, "python") === test.expected.message;
}

/** What a run of one port sends back of its attention cases: verdicts and answers (JSON texts), by
 * case id (results.ts's replyJson writes them). */
export interface Judged {
  readonly verdicts: Record<string, Verdict>;
  readonly answers: Record<string, string>;
}

/** `fn` on one case through the kit, judged in `dtype`, into `into`: its verdict where that is all
 * that crosses, its answer where Python has more to say of it or `everyAnswer` asks for it. */
export async function runCase(
  into: Judged,
  fn: AttentionFunction,
  test: TestCase,
  dtype: "float64" | "float32",
  everyAnswer: boolean,
): Promise<void> {
  const got = await call(fn, test);
  const verdict = judge(test, got, { dtype, matchKind: true });
  const clean =
    verdict.verdict !== "fail" && verdict.steps.every((s) => s.passed) && saysItsMessage(test, got);
  if (clean) {
    into.verdicts[test.id] = verdict;
  }
  if (!clean || everyAnswer) {
    into.answers[test.id] = answerJson(got);
  }
}
