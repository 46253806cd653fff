/**
 * The judge in TypeScript: the twin of python/attention_port/harness/compare.py. The rule is derived
 * once, by the oracle (python/attention_port/golden/rule.py says it and why), which writes into
 * every valid case, per dtype, each output element's budget, the fallback where it applies and
 * whether the case is outside the contract; this module only compares. The conformance kit's
 * `judge` and the explorer's verdict are this module; a test holds it to compare.py on every
 * fixture, every port's answers and every dtype, with answers just inside and just outside the budget.
 *
 *     |actual - expected| <= expected.budgets[dtype].output
 *
 * NaN meets only NaN, an infinity only the same infinity (or a finite value whose budget reaches
 * past the dtype's largest number); a fully-masked row (or Lk = 0) must be exactly +0.0; where the
 * budget is infinite, the fallback bounds |actual| (no larger than the largest |value| its row
 * averages). A case the budget marks outside the contract is reported as such. The scores, logits
 * and weights, where a function gives them, are held to yardsticks of their own and only say which
 * step first went wrong; the output decides.
 *
 * Plain data in, plain data out, no `node:` import: it runs in Node and in a browser page.
 */

import { broadcastStrides } from "../src/batching.ts";

/** The rule's constant. */
export const K = 16;

/** The dtypes the rule knows, and what it reads of each (compare.py's UNIT_ROUNDOFF, TINY, LARGEST):
 * the unit roundoff, the smallest subnormal, the largest finite number. */
export const DTYPES = {
  float64: { u: 2 ** -53, tiny: 2 ** -1074, largest: Number.MAX_VALUE },
  float32: { u: 2 ** -24, tiny: 2 ** -149, largest: 3.4028234663852886e38 },
  float16: { u: 2 ** -11, tiny: 2 ** -24, largest: 65504 },
  bfloat16: { u: 2 ** -8, tiny: 2 ** -133, largest: 3.3895313892515355e38 },
} as const;
export type Dtype = keyof typeof DTYPES;

/** The oracle's steps, in order; the last one decides. */
export const STEPS = ["scores", "logits", "weights", "output"] as const;
export type StepName = (typeof STEPS)[number];

/** A flat row-major tensor with its shape. */
export interface FlatTensor {
  readonly shape: readonly number[];
  readonly data: ArrayLike<number>;
}

/** What the judge reads of a valid case: its inputs (flat), options, and the oracle's values. */
export interface RuleCase {
  readonly query: FlatTensor; // [B..., Hq, Lq, E]
  readonly key: FlatTensor; // [B..., Hkv, Lk, E]
  readonly value: FlatTensor; // [B..., Hkv, Lk, Ev]
  readonly attnMask: (FlatTensor & { readonly dtype: "bool" | "float64" }) | null; // broadcasts to the logits
  readonly scale: number | null; // null: 1/sqrt(E)
  readonly softcap: number;
  readonly expected: RuleValues;
}

/** What a port computing in one dtype is held to on one valid case, as the oracle wrote it. */
export interface Budget {
  readonly outside: string | null; // why the contract defines no answer in this dtype, or null
  readonly output: FlatTensor; // [B..., Hq, Lq, Ev]  bound on |actual - expected|; Infinity: the fallback decides
  readonly fallback: FlatTensor | null; // [B..., Hq, Lq, Ev]  bound on |actual| where output is Infinity
}

/** The oracle's values of a valid case, flat and row-major (fixtures/README.md says each). */
export interface RuleValues {
  readonly scores: FlatTensor; // [B..., Hq, Lq, Lk]
  readonly logits: FlatTensor; // [B..., Hq, Lq, Lk]  -Infinity where a key is masked
  readonly weights: FlatTensor; // [B..., Hq, Lq, Lk]
  readonly output: FlatTensor; // [B..., Hq, Lq, Ev]
  readonly spread: FlatTensor; // [B..., Hq, Lq]  S_i, for the weights' diagnostic
  readonly budgets: Readonly<Record<Dtype, Budget>>;
}

/** What the output's rule reads of the oracle's values: a case may carry the budgets of only the
 * dtypes it is judged in (the explorer's page carries those of its backends). */
export type OutputValues = Pick<RuleValues, "output" | "logits"> & {
  readonly budgets: Readonly<Partial<Record<Dtype, Budget>>>;
};

/** The budget of `dtype`, which the case must carry. */
function budgetOf(values: Pick<OutputValues, "budgets">, dtype: Dtype): Budget {
  const budget = values.budgets[dtype];
  if (budget === undefined) {
    throw new RangeError(`dtype: this case carries no ${dtype} budget`);
  }
  return budget;
}

/** One step held to its yardstick (compare.py's StepCheck). */
export interface StepCheck {
  readonly step: StepName;
  readonly passed: boolean;
  readonly budgetUsed: number; // largest |actual - expected| / budget; 1 is the whole budget
  readonly maxAbsError: number;
  readonly index: readonly number[] | null; // the cell where the budget was used most
  readonly actual: number | null;
  readonly expected: number | null;
  readonly problem: string | null; // a shape, NaN or signed-zero mismatch, said in words
}

/** The index of flat position n in a tensor of `shape` (row-major). */
export function unravel(n: number, shape: readonly number[]): number[] {
  const index = new Array<number>(shape.length);
  for (let d = shape.length - 1; d >= 0; d--) {
    index[d] = n % shape[d];
    n = Math.floor(n / shape[d]);
  }
  return index;
}

/** One cell of a step as the reports name it: output[0, 2]. */
export function cellName(step: string, index: readonly number[]): string {
  return `${step}[${index.join(", ")}]`;
}

/** A number as the reports write it: the shortest text that reads back to it, -0 kept. */
function shown(x: number): string {
  return Object.is(x, -0) ? "-0.0" : String(x);
}

const sameShape = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((n, d) => n === b[d]);

const signBit = (x: number) => x < 0 || Object.is(x, -0);

/** compare.py's check_step: element-wise |actual - expected| <= budget, with NaN, infinities and
 * required +0.0 exact. `positiveZero(n)` says whether cell n must be +0.0; `limit` is the dtype's
 * largest number; where the budget is infinite, `fallback(n)` (if given) bounds |actual| instead. */
export function checkStep(
  step: StepName,
  actual: FlatTensor,
  expected: FlatTensor,
  budget: (n: number) => number,
  options: {
    readonly positiveZero?: (n: number) => boolean;
    readonly limit?: number;
    readonly fallback?: (n: number) => number;
  } = {},
): StepCheck {
  const { positiveZero, limit = Number.MAX_VALUE, fallback } = options;
  if (!sameShape(actual.shape, expected.shape)) {
    const problem = `${step} has shape [${actual.shape.join(", ")}], expected [${expected.shape.join(", ")}]`;
    return {
      step,
      passed: false,
      budgetUsed: Infinity,
      maxAbsError: Infinity,
      index: null,
      actual: null,
      expected: null,
      problem,
    };
  }
  const size = expected.data.length;
  if (size === 0) {
    return {
      step,
      passed: true,
      budgetUsed: 0,
      maxAbsError: 0,
      index: null,
      actual: null,
      expected: null,
      problem: null,
    };
  }
  let [most, worst, maxAbsError, unbounded] = [-Infinity, 0, 0, 0];
  let why: string | null = null;
  for (let n = 0; n < size; n++) {
    const [a, e] = [actual.data[n], expected.data[n]];
    let b = budget(n);
    b = Number.isNaN(b) ? Infinity : b; // a NaN yardstick constrains nothing
    let used = 0;
    let reason: string | null = null;
    const error = Math.abs(a - e);
    const finite = Number.isFinite(a) && Number.isFinite(e);
    if (Number.isNaN(a) !== Number.isNaN(e)) {
      used = Infinity;
      reason = "mismatch";
    } else if (Number.isNaN(a)) {
      used = 0;
    } else if (!Number.isFinite(e)) {
      used = a === e ? 0 : Infinity;
      reason = "mismatch";
    } else if (!Number.isFinite(a)) {
      // A finite value next to the overflow threshold is also met by the infinity of its sign
      // (not where the budget itself overflowed: there the fallback decides, and it is finite).
      const reaches = Number.isFinite(b) && Math.abs(e) + b > limit && Math.sign(e) === Math.sign(a);
      used = reaches ? 0 : Infinity;
      reason = "mismatch";
    } else if (Number.isFinite(b)) {
      used = b > 0 ? error / b : error > 0 ? Infinity : 0;
    } else if (fallback !== undefined) {
      unbounded++;
      if (Math.abs(a) > fallback(n)) {
        used = Infinity;
        reason = "beyond every value the row averages";
      }
    }
    if (positiveZero?.(n) && !Number.isNaN(a) && !(a === 0 && !signBit(a))) {
      used = Infinity;
      reason = "where +0.0 is required (a fully-masked row)";
    }
    maxAbsError = Math.max(maxAbsError, finite ? error : used > 0 ? Infinity : 0);
    if (used > most) {
      [most, worst, why] = [used, n, reason];
    }
  }
  const index = unravel(worst, expected.shape);
  const [got, want] = [actual.data[worst], expected.data[worst]];
  let problem: string | null = null;
  if (most > 1) {
    if (why === "mismatch") {
      problem = `${cellName(step, index)} is ${shown(got)} where ${shown(want)} was expected`;
    } else if (why !== null) {
      problem = `${cellName(step, index)} is ${shown(got)} ${why}`;
    }
  } else if (fallback !== undefined && unbounded > 0) {
    problem = `${unbounded} cell(s) held only to the values' reach: the bound overflowed or the weights are not determined`;
  }
  return {
    step,
    passed: most <= 1,
    budgetUsed: most,
    maxAbsError,
    index,
    actual: got,
    expected: want,
    problem,
  };
}

/** Whether row r (of [B..., Hq, Lq]) has every logit -inf, or no key: its weights and output are +0.0. */
function fullyMaskedRows(values: OutputValues): Uint8Array {
  const lk = values.logits.shape.at(-1) ?? 0;
  const ev = values.output.shape.at(-1) ?? 1;
  const rows = lk === 0 ? (ev === 0 ? 0 : values.output.data.length / ev) : values.logits.data.length / lk;
  const masked = new Uint8Array(rows);
  for (let r = 0; r < rows; r++) {
    let all = 1;
    for (let j = 0; j < lk && all; j++) {
      all = values.logits.data[r * lk + j] === -Infinity ? 1 : 0;
    }
    masked[r] = all;
  }
  return masked;
}

/** What the output's rule reads of a case: the oracle's values and budgets. */
export interface OutputRule {
  readonly expected: OutputValues;
}

/** The rule itself (compare.py's check_output): a valid case's output, computed in `dtype`, against
 * the oracle's and its budget. */
export function checkOutput(actual: FlatTensor, rule: OutputRule, dtype: Dtype = "float64"): StepCheck {
  const masked = fullyMaskedRows(rule.expected);
  const ev = rule.expected.output.shape.at(-1) ?? 1;
  const { output, fallback } = budgetOf(rule.expected, dtype);
  return checkStep("output", actual, rule.expected.output, (n) => output.data[n], {
    positiveZero: (n) => masked[Math.floor(n / ev)] === 1,
    limit: DTYPES[dtype].largest,
    fallback: fallback === null ? undefined : (n) => fallback.data[n],
  });
}

/** Why the contract defines no answer for this case in this dtype (its budget says), or null
 * (compare.py's outside_contract). */
export function outsideContract(
  values: Pick<OutputValues, "budgets">,
  dtype: Dtype = "float64",
): string | null {
  const why = budgetOf(values, dtype).outside;
  return why === null ? null : `outside the contract: ${why}`;
}

/** The yardsticks of the scores, logits and weights (compare.py's step_budgets): scores to
 * |query| · |key|ᵀ, logits to |scale| |query| · |key|ᵀ + |finite mask value| + |logit|, weights to
 * (1 + spread) |weights|, each plus the subnormal floor. Cell-wise functions over [B..., Hq, Lq, Lk]. */
function stepBudgets(
  rule: RuleCase,
  dtype: Dtype,
): Record<Exclude<StepName, "output">, (n: number) => number> {
  const { u, tiny } = DTYPES[dtype];
  const { query, key, expected } = rule;
  const shape = expected.logits.shape; // [B..., Hq, Lq, Lk]
  const [lq, lk, e] = [shape.at(-2) ?? 0, shape.at(-1) ?? 0, query.shape.at(-1) ?? 0];
  const hq = shape.length >= 3 ? (shape.at(-3) ?? 1) : 1;
  const hkv = key.shape.length >= 3 ? (key.shape.at(-3) ?? 1) : 1;
  const size = expected.logits.data.length;
  const magnitude = new Float64Array(size); // |query| · |key|ᵀ
  for (let n = 0; n < size; n++) {
    const j = n % lk;
    const row = Math.floor(n / lk); // (batch, head, query)
    const outer = Math.floor(row / lq);
    const kv = Math.floor(outer / hq) * hkv + Math.floor((outer % hq) / (hq / hkv));
    let sum = 0;
    for (let t = 0; t < e; t++) {
      sum += Math.abs(query.data[row * e + t]) * Math.abs(key.data[(kv * lk + j) * e + t]);
    }
    magnitude[n] = sum;
  }
  const scale = Math.abs(rule.scale ?? 1 / Math.sqrt(e));
  const mask = rule.attnMask;
  const maskStrides = mask === null ? [] : broadcastStrides(mask.shape, shape);
  const maskMagnitude = (n: number) => {
    if (mask === null || mask.dtype === "bool") {
      return 0;
    }
    const index = unravel(n, shape);
    const x = mask.data[index.reduce((at, i, d) => at + i * maskStrides[d], 0)];
    return Number.isFinite(x) ? Math.abs(x) : 0;
  };
  const logit = (n: number) => {
    const x = expected.logits.data[n];
    return Number.isFinite(x) ? Math.abs(x) : 0;
  };
  return {
    scores: (n) => K * u * magnitude[n] + K * tiny,
    logits: (n) => K * u * (scale * magnitude[n] + maskMagnitude(n) + logit(n)) + K * tiny,
    weights: (n) =>
      K * u * (1 + expected.spread.data[Math.floor(n / lk)]) * Math.abs(expected.weights.data[n]) + K * tiny,
  };
}

/** What one function gave for one valid case, held step by step (compare.py's _hold_steps): every
 * step it gave, the output last and deciding; the first step out of its budget is named only when
 * the output failed and a step came before it. */
export function holdSteps(
  rule: RuleCase,
  steps: Partial<Record<StepName, FlatTensor>>,
  dtype: Dtype = "float64",
): {
  readonly output: StepCheck;
  readonly steps: readonly StepCheck[];
  readonly firstDivergentStep: StepName | null;
} {
  const output = steps.output;
  if (output === undefined) {
    throw new TypeError("holdSteps needs the output");
  }
  const budgets = stepBudgets(rule, dtype);
  const masked = fullyMaskedRows(rule.expected);
  const lk = rule.expected.logits.shape.at(-1) ?? 1;
  const checks: StepCheck[] = [];
  for (const step of STEPS) {
    const actual = steps[step];
    if (step === "output" || actual === undefined) {
      continue;
    }
    checks.push(
      checkStep(step, actual, rule.expected[step], budgets[step], {
        positiveZero: step === "weights" ? (n) => masked[Math.floor(n / lk)] === 1 : undefined,
        limit: DTYPES[dtype].largest,
      }),
    );
  }
  const last = checkOutput(output, rule, dtype);
  checks.push(last);
  const first = last.passed || checks.length === 1 ? null : (checks.find((c) => !c.passed)?.step ?? null);
  return { output: last, steps: checks, firstDivergentStep: first };
}
