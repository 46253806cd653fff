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

import { nest } from "../src/batching.ts";
import type { NestedArray, TensorInput } from "../src/inputs.ts";
import { applyRotary, type LayerOptions, type LayerParams, type LayerResult } from "../src/layer.ts";
import { tensorJson } from "./results.ts";

/** A layer or RoPE case as the readers give it (fixtures.ts's LayerFixtureCase). */
export interface LayerCase {
  readonly id: string;
  readonly kind: "layer" | "rope";
  readonly inputs: Readonly<Record<string, unknown>>;
  readonly params: Readonly<Record<string, unknown>>;
  readonly valid: boolean;
}

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

/** The case through `layer` (or applyRotary), as a results-document answer; throws what the port
 * throws (the caller writes it as an error or a crash). */
export function runLayerCase(layer: AnyLayer, c: LayerCase): string | Promise<string> {
  const p = c.params;
  if (c.kind === "rope") {
    const output = applyRotary(argument(c, "x"), argument(c, "positions"), {
      theta: p.theta as number,
      rotaryDim: p.rotary_dim as number | null,
      interleaved: p.interleaved as boolean,
    });
    return answerJson(output);
  }
  const rope = p.rope as Record<string, unknown> | null;
  const result = layer(
    argument(c, "x_q"),
    argument(c, "x_kv"),
    {
      wQ: argument(c, "w_q"),
      wK: argument(c, "w_k"),
      wV: argument(c, "w_v"),
      wO: argument(c, "w_o"),
      bQ: argument(c, "b_q"),
      bK: argument(c, "b_k"),
      bV: argument(c, "b_v"),
      bO: argument(c, "b_o"),
    },
    {
      numHeads: p.num_heads as number,
      numKvHeads: p.num_kv_heads as number | null,
      attnMask: argument(c, "attn_mask"),
      isCausal: p.is_causal as boolean,
      scale: p.scale as number | null,
      softcap: p.softcap as number,
      rope:
        rope === null
          ? null
          : Object.fromEntries(
              Object.entries(rope).map(([k, v]) => [k === "rotary_dim" ? "rotaryDim" : k, v]),
            ),
      needWeights: p.need_weights as boolean,
      pastKey: argument(c, "past_key"),
      pastValue: argument(c, "past_value"),
      ...("return_cache" in p ? { returnCache: p.return_cache as boolean } : {}),
    },
  );
  return result instanceof Promise ? result.then(answerJson) : answerJson(result);
}
