/**
 * What the explorer's core views share: the page's state (the last good result, the backend, the
 * loaded case), the input names, and the reading of the inputs for the head on view. recompute.ts
 * computes the state; the views draw it. A view that changes an input asks for a recompute through
 * `requestRecompute`, which main.ts wires to recompute.ts, so that no view imports the module that
 * redraws it.
 */

import type { AttentionOptions, AttentionSteps } from "../src/attention.ts";
import { type Backend, backendNamed, DEFAULT_BACKEND } from "./backends.ts";
import { type ExplorerCase, outerIndices, sliceAt } from "./model.ts";

declare global {
  interface Window {
    EXPLORER_CASES?: readonly ExplorerCase[];
  }
}

export const INPUT_NAMES = ["query", "key", "value", "attnMask"] as const;
export type InputName = (typeof INPUT_NAMES)[number];
export const INPUT_LABELS: Record<InputName, string> = {
  query: "query (Q) [..., Hq, Lq, E]",
  key: "key (K) [..., Hkv, Lk, E]",
  value: "value (V) [..., Hkv, Lk, Ev]",
  attnMask: "attnMask (empty: none; booleans: true = may attend; numbers: added)",
};
export const EDITABLE_CELLS = 256; // cell editors for a rank-2 input of at most this many numbers
export const NUMBERS_UP_TO = 24; // columns beyond which numbers no longer fit in a cell

export const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
export const cases: readonly ExplorerCase[] = window.EXPLORER_CASES ?? [];

interface Result {
  readonly steps: AttentionSteps;
  readonly inputs: Record<InputName, unknown>;
  readonly options: AttentionOptions;
  readonly scale: number;
}

export const state = {
  fixture: null as ExplorerCase | null, // the fixture case loaded, while nothing was changed since
  tokens: null as readonly string[] | null, // the loaded case's tokens: its rows' and keys' labels
  result: null as Result | null, // the last good result (kept on screen when an input goes bad)
  lit: null as { step: string; i: number; j: number } | null,
  backend: backendNamed(DEFAULT_BACKEND) as Backend,
  generation: 0, // counts recomputes: an answer that arrives after a newer request is dropped
};

export function element<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Partial<Record<string, string>> = {},
  text?: string,
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props)) {
    if (value !== undefined) {
      node.setAttribute(name, value);
    }
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function textOf(name: InputName): HTMLTextAreaElement {
  return $(`text-${name}`);
}

export function shapeOf(value: unknown): number[] {
  if (typeof value === "object" && value !== null && !Array.isArray(value) && "shape" in value) {
    return [...(value as { shape: number[] }).shape];
  }
  const shape: number[] = [];
  let node = value;
  while (Array.isArray(node)) {
    shape.push(node.length);
    node = node[0];
  }
  return shape;
}

/** The [batch..., head] index being viewed; null when a batch or head dim is 0 (nothing to view). */
export function currentOuter(): number[] | null {
  const result = state.result;
  if (result === null) {
    return [];
  }
  const indices = outerIndices(result.steps.scoresShape.slice(0, -2));
  return indices[Number($<HTMLSelectElement>("head").value) || 0] ?? indices[0] ?? null;
}

/** The [rows, cols] matrix of an input for the viewed head (key and value: the key/value head the
 * query head reads), or null when the input has no nested rows to show (a shaped tensor). */
export function inputMatrix(name: "query" | "key" | "value", outer: readonly number[]): number[][] | null {
  const result = state.result;
  if (result === null || !Array.isArray(result.inputs[name])) {
    return null;
  }
  let index = [...outer];
  if (name !== "query" && outer.length > 0) {
    const heads = result.steps.scoresShape.at(-3) ?? 1;
    const kvHeads = shapeOf(result.inputs.key).at(-3) ?? 1;
    index = [...outer.slice(0, -1), Math.floor(outer[outer.length - 1] / (heads / kvHeads))];
  }
  try {
    return sliceAt(result.inputs[name] as number[][], index);
  } catch {
    return null;
  }
}

/** The guided mode: whether it is open, and at which step (guide.ts draws it). */
export const guide = { open: false, step: 0 };

/** Recompute with the chosen backend: recompute.ts's, wired by main.ts (a view that changes an
 * input calls this, and so never imports the module that redraws it). */
let recomputeWith: () => Promise<void> = async () => {};

export function requestRecompute(): Promise<void> {
  return recomputeWith();
}

export function wireRecompute(recompute: () => Promise<void>): void {
  recomputeWith = recompute;
}
