/**
 * What the two page builds share: the explorer's (typescript/explorer/build.ts) and the WebGPU
 * port's (webgpu-page.ts). Both are build scripts, run and never imported, that bundle TypeScript
 * into one classic browser script and embed fixture cases in the page.
 */

import type { BuildOptions } from "esbuild";

/** esbuild's options for a page's script: one self-contained iife for a browser, kept in memory
 * (the build writes the page whole, atomically), and quiet (the build reports its own errors). */
export const PAGE_BUNDLE_OPTIONS = {
  bundle: true,
  write: false,
  format: "iife",
  platform: "browser",
  target: "es2022",
  charset: "utf8",
  legalComments: "none",
  logLevel: "silent",
} as const satisfies BuildOptions;

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
