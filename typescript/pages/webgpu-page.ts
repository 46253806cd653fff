/**
 * Build the WebGPU port's page: one HTML file holding webgpu-browser.ts bundled by esbuild (with
 * webgpu.ts, its shader and inputs.ts) and, for verify, the fixture cases. The Python harness
 * (python/attention_port/harness/browser.py) opens it from disk in headless Chromium and calls the
 * script's functions; nothing is fetched at run time.
 *
 *     node typescript/pages/webgpu-page.ts --out DIR [--fixtures DIR] [--case ID]... [--no-cases]
 *
 * writes DIR/index.html. The cases are read by golden/reader.ts (the only TypeScript code that knows
 * the fixture format; the attention cases with their expected values, as the conformance kit reads
 * them, for the page to judge its port) and written as JavaScript literals, so NaN, the infinities and -0 reach the
 * page exactly. Exit codes: 0 written; 2 a bad command line or an unusable fixture folder, said in
 * one line on stderr.
 */

import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { build, type Plugin } from "esbuild";
import { rawCasesIn } from "../conformance/fixture-data.ts";
import { writeAtomic } from "../files.ts";
import {
  DEFAULT_FIXTURES,
  FixtureError,
  type LayerFixtureCase,
  loadLayerFixtures,
} from "../golden/reader.ts";
import { jsLiteral, PAGE_BUNDLE_OPTIONS } from "./page-build.ts";
import type { PageCase, PageLayerCase } from "./webgpu-browser.ts";

const HERE = dirname(fileURLToPath(import.meta.url));

/** The kit's fixture-data.ts as the page has it: the page holds its cases itself (WEBGPU_CASES)
 * and hands each to the kit's testCase, so the reader of the fixture folder (Node only) stays out
 * of the bundle, as the npm package's build leaves it out. */
const PAGE_FIXTURE_DATA: Plugin = {
  name: "page-fixture-data",
  setup(build) {
    build.onResolve({ filter: /\/fixture-data[.]ts$/ }, () => ({ path: "fixture-data", namespace: "page" }));
    build.onLoad({ filter: /.*/, namespace: "page" }, () => ({
      contents: 'export function rawCases() { throw new Error("the page holds its cases in WEBGPU_CASES"); }',
      loader: "js",
    }));
  },
};

/** webgpu-browser.ts and what it imports, as one classic browser script. */
export async function bundle(): Promise<string> {
  const result = await build({
    absWorkingDir: resolve(HERE, "..", ".."),
    entryPoints: [join(HERE, "webgpu-browser.ts")],
    plugins: [PAGE_FIXTURE_DATA],
    ...PAGE_BUNDLE_OPTIONS,
  });
  return result.outputFiles[0].text;
}

/** The page, with the given cases: the attention ones as the kit reads them (fixture-data.ts), the
 * layer's and RoPE's as the reader gives them. */
export async function buildPage(
  cases: readonly PageCase[],
  layerCases: readonly LayerFixtureCase[] = [],
): Promise<string> {
  const all: (PageCase | PageLayerCase)[] = [...cases, ...layerCases];
  const literal = `globalThis.WEBGPU_CASES = [\n${all.map((c) => jsLiteral(c)).join(",\n")}\n];`;
  const safe = (source: string) => source.replace(/<\/(script)/gi, "<\\/$1"); // "</script" would end it
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>attention-port: the WebGPU port</title></head>
<body>
<p>The WebGPU port of attention-port, for the harness (python/attention_port/harness/browser.py).</p>
<script>${safe(literal)}</script>
<script>${safe(await bundle())}</script>
</body>
</html>
`;
}

export async function main(argv: string[]): Promise<number> {
  try {
    const { values } = parseArgs({
      args: argv,
      options: {
        out: { type: "string" },
        fixtures: { type: "string", default: DEFAULT_FIXTURES },
        case: { type: "string", multiple: true },
        "no-cases": { type: "boolean", default: false },
      },
      strict: true,
    });
    if (values.out === undefined) {
      console.error("attention-port (webgpu page): --out DIR is required");
      return 2;
    }
    const cases = values["no-cases"] ? [] : rawCasesIn(values.fixtures, values.case);
    const layerCases = values["no-cases"] ? [] : loadLayerFixtures(values.fixtures, values.case);
    const html = await buildPage(cases, layerCases);
    mkdirSync(values.out, { recursive: true });
    writeAtomic(join(values.out, "index.html"), html);
    return 0;
  } catch (error) {
    if (error instanceof FixtureError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      console.error(`attention-port (webgpu page): ${(error as Error).message}`);
      return 2;
    }
    throw error;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
