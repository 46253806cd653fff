/**
 * A fixture case's verdict: the backend's output against the oracle's, judged by the conformance
 * kit's rule, or the error it raised against the one the case expects.
 */

import { checkOutput, outsideContract } from "../conformance/judge.ts";
import type { AttentionSteps } from "../src/attention.ts";
import { errorVerdict, flatten } from "./model.ts";
import { $, element, state } from "./page.ts";

export function drawFixturePanel(steps: AttentionSteps | null): void {
  const panel = $("fixture-panel");
  panel.replaceChildren();
  const fixture = state.fixture;
  if (fixture === null || steps === null) {
    if (fixture === null && $<HTMLSelectElement>("preset").value.startsWith("case:")) {
      panel.append(
        element(
          "p",
          { class: "hint" },
          "inputs or options changed: the oracle's values apply to the case as loaded (choose it again)",
        ),
      );
    }
    return;
  }
  if (fixture.expected === null) {
    return; // an invalid case: the port's error is shown next to the input, beside the expected one
  }
  const { dtype, source } = state.backend; // the rule takes the unit roundoff of the backend's dtype
  const outside = outsideContract(fixture.expected, dtype);
  if (outside !== null) {
    const why =
      dtype === "float64"
        ? "a dot product beyond the largest double"
        : `${dtype} cannot hold this case's inputs or scores`;
    panel.append(
      element(
        "p",
        { id: "fixture-verdict", class: "verdict-good", "data-used": "outside" },
        `${outside} (${why}; no answer to judge)`,
      ),
    );
    return;
  }
  const output = { shape: fixture.expected.output.shape, data: flatten(steps.output) };
  const check = checkOutput(output, { expected: fixture.expected }, dtype);
  const used = Number.isFinite(check.budgetUsed) ? `${(100 * check.budgetUsed).toFixed(1)}%` : "∞";
  const verdict = element(
    "p",
    {
      id: "fixture-verdict",
      class: check.passed ? "verdict-good" : "verdict-bad",
      "data-used": String(check.budgetUsed),
    },
    check.passed
      ? `within budget: ${used} of the error budget used`
      : `OUT OF BUDGET: ${used} of the error budget used`,
  );
  const u = dtype === "float64" ? "2⁻⁵³ (float64)" : "2⁻²⁴ (float32)";
  panel.append(
    verdict,
    element(
      "p",
      { class: "hint" },
      `fixture ${fixture.id}: ${source.split("/").at(-1)}'s output against the oracle's (exact, then 256-bit, rounded once to float64), ` +
        `every head; largest |difference| ${check.maxAbsError.toExponential(2)}. ` +
        `The rule, as compare.py: |x − expected| ≤ the fixture's ${dtype} budget, which the oracle derives as 16 · u · (1 + spread) · magnitude + 16 · error_floor, u = ${u}; ` +
        "NaN must meet NaN, an infinity the same infinity, a fully-masked row must be exactly +0.0.",
    ),
  );
  if (check.problem !== null) {
    panel.append(element("p", { class: "verdict-bad" }, check.problem));
  }
}

/** For a fixture case that must raise an error: whether the page's error is that one. */
export function drawErrorVerdict(got: { kind: string; message: string } | null): void {
  const fixture = state.fixture;
  if (fixture === null || fixture.expectedError === null) {
    return;
  }
  const { passed, text } = errorVerdict(fixture.expectedError, got);
  $("fixture-panel").replaceChildren(
    element("p", { id: "fixture-verdict", class: passed ? "verdict-good" : "verdict-bad" }, text),
  );
}
