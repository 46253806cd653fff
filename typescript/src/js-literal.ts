/**
 * A value as JavaScript source, for the pages that embed fixture cases: the explorer's
 * (typescript/explorer/build.ts) and the WebGPU port's (webgpu-page.ts). Both are build scripts,
 * run and never imported; what they share lives here.
 */

/** A value as JavaScript source: numbers in shortest round-trip form with NaN, ±Infinity and -0
 * kept (JSON has none of them), so the page reads the fixtures' numbers exactly. */
export function jsLiteral(value: unknown): string {
  if (typeof value === "number") {
    return Object.is(value, -0) ? "-0" : String(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(jsLiteral).join(",")}]`;
  }
  if (typeof value === "object" && value !== null) {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${jsLiteral(v)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}
