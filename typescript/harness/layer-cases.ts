/**
 * A layer or RoPE fixture case through a port's layer: the same call for cli.ts (Node) and the
 * WebGPU page (webgpu-browser.ts), so that both hand the inputs over alike. Imports nothing of
 * Node's: the page bundles it.
 *
 * A case holds its inputs and options by their Python names (x_q, w_q, num_heads, rotary_dim);
 * here they become the TypeScript layer's (xQ, wQ, numHeads, rotaryDim). The answer is written
 * as cli.ts's results document writes an answer: {"output"} (and "weights" with needWeights,
 * "present_key" and "present_value" with returnCache).
 */

import type { LayerFixtureCase } from "../golden/reader.ts";
import { nest } from "../src/batching.ts";
import type { NestedArray, TensorInput } from "../src/inputs.ts";
import { applyRotary, type LayerOptions, type LayerParams, type LayerResult } from "../src/layer.ts";
import { javascriptName } from "../src/vocabulary.ts";
import { tensorJson } from "./results.ts";

/** A layer or RoPE case as the readers give it. */
export type LayerCase = LayerFixtureCase;

type AnyLayer = (
  xQ: TensorInput,
  xKv: TensorInput | null,
  params: LayerParams,
  options: LayerOptions,
) => NestedArray | LayerResult | Promise<NestedArray | LayerResult>;

interface Tensor {
  readonly shape: readonly number[];
  readonly data: readonly (number | boolean)[];
}

/** A valid case's tensor as nested arrays (the form a caller writes), or shaped where a zero dim
 * leaves nesting unable to say the shape; an invalid case's input as written. */
function argument(c: LayerCase, name: string): never {
  const x = c.inputs[name];
  if (!c.valid || x === null || x === undefined) {
    return (x ?? null) as never;
  }
  const { shape, data } = x as Tensor;
  return (shape.includes(0) ? { shape, data } : nest(data, shape)) as never;
}

function shapeOf(x: unknown): number[] {
  return Array.isArray(x) ? [x.length, ...shapeOf(x[0])] : [];
}

function answerJson(result: NestedArray | LayerResult): string {
  const { output, ...rest } = Array.isArray(result) ? { output: result } : (result as LayerResult);
  const parts = [`"output": ${tensorJson(shapeOf(output), output)}`];
  for (const [name, tensor] of [
    ["weights", rest.weights],
    ["present_key", rest.presentKey],
    ["present_value", rest.presentValue],
  ] as const) {
    if (tensor !== undefined) {
      parts.push(`"${name}": ${tensorJson(shapeOf(tensor), tensor)}`);
    }
  }
  return `{${parts.join(", ")}}`;
}

/** The layer's weights and biases, which it takes as its params object. */
const PARAMS = ["w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o"];
/** The inputs the layer takes among its options: the mask and the KV cache. */
const OPTION_INPUTS = ["attn_mask", "past_key", "past_value"];

/** An object by the JavaScript names of `names` (Python's), each with its value. */
function named(names: readonly string[], value: (name: string) => unknown): Record<string, unknown> {
  return Object.fromEntries(names.map((name) => [javascriptName(name), value(name)]));
}

/** The case through `layer` (or applyRotary), as a results-document answer; throws what the port
 * throws (the caller writes it as an error or a crash). */
export function runLayerCase(layer: AnyLayer, c: LayerCase): string | Promise<string> {
  // The case's options by their JavaScript names, and rope's own (its rotary_dim is rotaryDim).
  const options = named(Object.keys(c.params), (name) => {
    const option = c.params[name];
    return name === "rope" && typeof option === "object" && option !== null
      ? named(Object.keys(option), (k) => (option as Record<string, unknown>)[k])
      : option;
  });
  if (c.kind === "rope") {
    return answerJson(applyRotary(argument(c, "x"), argument(c, "positions"), options));
  }
  const result = layer(
    argument(c, "x_q"),
    argument(c, "x_kv"),
    named(PARAMS, (name) => argument(c, name)) as never,
    { ...options, ...named(OPTION_INPUTS, (name) => argument(c, name)) } as never,
  );
  return result instanceof Promise ? result.then(answerJson) : answerJson(result);
}
