/**
 * Adapters onto the layer's contract (weights [out, in] as nn.Linear stores them, SDPA's mask
 * polarity: true = may attend), from the layouts ported code meets; the twin of
 * python/attention_port/adapters.py.
 *
 *   fromConv1d     GPT-2's Conv1D and ONNX Runtime's contrib Attention store weights [in, out];
 *   fromPacked     torch's in_proj_weight and nanoGPT's c_attn hold q | k | v by rows;
 *   torchMhaMask   nn.MultiheadAttention's masks: a boolean true means "ignore", a key padding
 *                  mask is [N, S], a 3-D attn_mask [N·H, L, S]; float masks are added.
 */

type Matrix = readonly (readonly number[])[];

/** A weight stored [in, out] (y = x · W + b) as [out, in] (y = x · Wᵀ + b). */
export function fromConv1d(weight: Matrix): number[][] {
  const columns = weight[0]?.length ?? 0;
  return Array.from({ length: columns }, (_, c) => weight.map((row) => row[c]));
}

/** wQ, wK, wV (and bQ, bK, bV) from one packed weight whose rows are q | k | v, in thirds or in
 * the row counts `sizes` (q, k, v) for grouped-query heads or Ev != E. */
export function fromPacked(
  weight: Matrix,
  bias: readonly number[] | null = null,
  sizes: readonly [number, number, number] | null = null,
): { wQ: number[][]; wK: number[][]; wV: number[][]; bQ?: number[]; bK?: number[]; bV?: number[] } {
  const [q, k] = sizes ?? [weight.length / 3, weight.length / 3, weight.length / 3];
  const cut = <T>(x: readonly T[]) => [x.slice(0, q), x.slice(q, q + k), x.slice(q + k)];
  const [wQ, wK, wV] = cut(weight).map((rows) => rows.map((row) => [...row]));
  if (bias === null) {
    return { wQ, wK, wV };
  }
  const [bQ, bK, bV] = cut(bias);
  return { wQ, wK, wV, bQ, bK, bV };
}

type BoolOrFloat = boolean | number;
type Nested = BoolOrFloat | Nested[];

/** nn.MultiheadAttention's attnMask ([L, S] or [N·H, L, S]) and keyPaddingMask ([N, S]) as one
 * mask of this contract, broadcasting to [N, H, L, S] (or [L, S]): a boolean true there (ignore)
 * becomes false here; float masks are added, as the module adds them, and a boolean one meeting
 * a float one becomes 0 / -inf first. */
export function torchMhaMask(
  attnMask: readonly unknown[] | null,
  keyPaddingMask: readonly (readonly BoolOrFloat[])[] | null,
  numHeads: number,
): Nested[] | null {
  const parts: Nested[][] = [];
  if (attnMask !== null) {
    const mask = attnMask as Nested[];
    const threeD = Array.isArray(mask[0]) && Array.isArray((mask[0] as Nested[])[0]);
    // [N·H, L, S] is batch-major then head: [N, H, L, S].
    parts.push(
      threeD
        ? Array.from({ length: mask.length / numHeads }, (_, n) =>
            mask.slice(n * numHeads, (n + 1) * numHeads),
          )
        : mask,
    );
  }
  if (keyPaddingMask !== null) {
    parts.push(keyPaddingMask.map((row) => [[[...row]]])); // [N, 1, 1, S]
  }
  if (parts.length === 0) {
    return null;
  }
  const leaves = (x: Nested): BoolOrFloat[] => (Array.isArray(x) ? x.flatMap(leaves) : [x]);
  const allBool = parts.every((p) => leaves(p).every((v) => typeof v === "boolean"));
  const map = (x: Nested, f: (v: BoolOrFloat) => BoolOrFloat): Nested =>
    Array.isArray(x) ? x.map((y) => map(y, f)) : f(x);
  const converted = parts.map((p) =>
    map(p, (v) => (typeof v === "boolean" ? (allBool ? !v : v ? -Infinity : 0) : v)),
  );
  return converted.reduce((a, b) =>
    broadcastWith(a, b, (x, y) =>
      allBool ? (x as boolean) && (y as boolean) : (x as number) + (y as number),
    ),
  ) as Nested[];
}

/** a ∘ b, numpy-broadcast (aligned on the right). */
function broadcastWith(a: Nested, b: Nested, f: (x: BoolOrFloat, y: BoolOrFloat) => BoolOrFloat): Nested {
  const depth = (x: Nested): number => (Array.isArray(x) ? 1 + depth(x[0] as Nested) : 0);
  const lift = (x: Nested, d: number): Nested => (d <= 0 ? x : lift([x], d - 1));
  const [da, db] = [depth(a), depth(b)];
  const [x, y] = [lift(a, db - da), lift(b, da - db)];
  if (!Array.isArray(x) || !Array.isArray(y)) {
    return f(x as BoolOrFloat, y as BoolOrFloat);
  }
  const length = Math.max(x.length, y.length);
  return Array.from({ length }, (_, i) =>
    broadcastWith(x[x.length === 1 ? 0 : i] as Nested, y[y.length === 1 ? 0 : i] as Nested, f),
  );
}
