// Generated from contract/options.json by `attention-port contract`: do not edit. Change the
// declaration, then run `attention-port contract` (scripts/generate-contract) to write this again.

/** The attention core's options as the ports take them. `Mask` is the mask's form: nested or
 * shaped for the nested entries (AttentionOptions), flat for the flat ones (FlatAttentionOptions);
 * inputs.ts gives both their public names. */
export interface CoreOptions<Mask> {
  /** Boolean (true = may attend) or numeric (added to the scores); broadcasts to [B..., Hq, Lq, Lk]. */
  readonly attnMask?: Mask | null;
  /** Query i may attend to key j only when j <= i + queryOffset. Combines with attnMask: both must allow. */
  readonly isCausal?: boolean;
  /** Multiplies the scores; defaults to 1/sqrt(E). */
  readonly scale?: number | null;
  /** Grouped-query attention: Hq may be a multiple of Hkv. */
  readonly enableGqa?: boolean;
  /** If > 0, logits become softcap * tanh(logits / softcap). */
  readonly softcap?: number;
  /** The position of query row 0 among the keys, for isCausal: 0 (the default) is torch's top-left rule,
   * Lk - Lq its causal_lower_right (a decode step after Lk - Lq cached keys). An integer >= 0. */
  readonly queryOffset?: number;
  /** The most bytes one call may need; larger inputs are refused (kind "size"). 2 GiB by default. */
  readonly memoryLimit?: number;
}

/** A scalar option as inputs.ts checks it: its type and range, and the kind and words of the
 * error a wrong value throws ({name}: the option, {value}: what was given, in words). */
export interface OptionCheck {
  readonly name: keyof CoreOptions<unknown>;
  readonly type: "boolean" | "integer" | "number";
  readonly nullable: boolean; // null is a value of its own, the default's
  readonly finite: boolean;
  readonly minimum: number | null; // inclusive
  readonly exclusiveMinimum: number | null;
  readonly maximum: number | null; // inclusive
  readonly kind: "value";
  readonly message: string;
}

/** The core's scalar options in the order they are checked, before any tensor is read: the first
 * failure is thrown. */
export const CORE_CHECKS: readonly OptionCheck[] = [
  {
    name: "isCausal",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
  },
  {
    name: "enableGqa",
    type: "boolean",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a boolean, got {value}",
  },
  {
    name: "scale",
    type: "number",
    nullable: true,
    finite: true,
    minimum: null,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a finite number, got {value}",
  },
  {
    name: "softcap",
    type: "number",
    nullable: false,
    finite: true,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: null,
    kind: "value",
    message: "{name} must be a finite number >= 0, got {value}",
  },
  {
    name: "memoryLimit",
    type: "number",
    nullable: false,
    finite: false,
    minimum: null,
    exclusiveMinimum: 0,
    maximum: null,
    kind: "value",
    message: "{name} must be a number of bytes > 0, got {value}",
  },
  {
    name: "queryOffset",
    type: "integer",
    nullable: false,
    finite: false,
    minimum: 0,
    exclusiveMinimum: null,
    maximum: 9007199254740991,
    kind: "value",
    message: "{name} must be an integer from 0 to 2^53 - 1, got {value}",
  },
];

/** Each option's default, taken where the caller gives none (or undefined). */
export const CORE_DEFAULTS = {
  attnMask: null,
  isCausal: false,
  scale: null,
  enableGqa: false,
  softcap: 0,
  queryOffset: 0,
  memoryLimit: 2147483648,
} as const;

/** The options a fixture case holds, by their names in the file (Python's) and in TypeScript:
 * `held` is "inputs" (a tensor among its inputs), "every" (among the params of every case) or
 * "set" (only in the cases that set it). */
export const FIXTURE_OPTIONS = [
  { python: "attn_mask", javascript: "attnMask", held: "inputs" },
  { python: "is_causal", javascript: "isCausal", held: "every" },
  { python: "scale", javascript: "scale", held: "every" },
  { python: "enable_gqa", javascript: "enableGqa", held: "every" },
  { python: "softcap", javascript: "softcap", held: "every" },
  { python: "query_offset", javascript: "queryOffset", held: "set" },
] as const;

/** A fixture case's options as the TypeScript readers give them (runners/fixtures.ts, the kit),
 * as written: an invalid case may hold anything. (A type, not an interface: it is a record of
 * strings too.) */
export type FixtureOptions = {
  readonly isCausal: unknown;
  readonly scale: unknown;
  readonly enableGqa: unknown;
  readonly softcap: unknown;
  /** Only where the case sets it. */
  readonly queryOffset?: unknown;
};
