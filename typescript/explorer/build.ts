/**
 * Build or serve the attention explorer: one self-contained HTML page.
 *
 *     node typescript/explorer/build.ts build [--out docs/explorer] [--all-cases]
 *     node typescript/explorer/build.ts serve [--port N]
 *
 * The page is index.html with two scripts written into it: the fixture cases (read by
 * typescript/golden/reader.ts, the only TypeScript code that knows the fixture format) and main.ts
 * bundled by esbuild with the real typescript/src/attention.ts, so the page runs exactly the port
 * that `attention-port verify` checks. Nothing is fetched at run time: the built file works opened
 * from disk, offline.
 *
 * `build` bundles the fixture cases whose data is small (see CASE_BYTES_LIMIT) to keep the file
 * light; `serve` rebuilds the page on every load with every case, so a reload shows the current
 * fixtures/ and the current attention.ts. The server listens on 127.0.0.1 only (a free port unless
 * --port is given), answers only requests whose Host is 127.0.0.1 or localhost, prints its URL
 * and stops on Ctrl-C, SIGTERM or SIGHUP, or when the process that started it ends.
 */

import { mkdirSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { build } from "esbuild";
import { writeAtomic } from "../files.ts";
import {
  DEFAULT_FIXTURES,
  type FixtureCase,
  type FixtureTensor,
  loadFixtures,
  portTensor,
} from "../golden/reader.ts";
import { jsLiteral, PAGE_BUNDLE_OPTIONS } from "../pages/page-build.ts";
import { BUILDS, buildIsFresh } from "../wasm/stamp.ts";
import { type ExplorerCase, type FlatTensor, REAL_MODEL_PRESET } from "./model.ts";

const HERE = dirname(fileURLToPath(import.meta.url));
export const DEFAULT_OUT = resolve(HERE, "..", "..", "docs", "explorer");
/** `build` leaves out the cases whose embedded data is larger than this (the long-sequence cases,
 * a few hundred KB each) but the real model's, which a preset shows; `serve` and --all-cases keep
 * every case. */
export const CASE_BYTES_LIMIT = 48_000;

const USAGE =
  "usage: node typescript/explorer/build.ts build [--out DIR] [--all-cases] [--fixtures DIR]\n" +
  "       node typescript/explorer/build.ts serve [--port N] [--fixtures DIR]";

/** The dtypes the page's backends compute in (backends.ts; explorer.test.ts holds the two equal):
 * the page carries the oracle's budgets in these only. */
export const PAGE_DTYPES = ["float64", "float32"] as const;

/** The oracle's budgets in PAGE_DTYPES, each tensor flat (the page's judge only compares). */
function budgets(
  all: NonNullable<FixtureCase["expected"]>["budgets"],
): NonNullable<ExplorerCase["expected"]>["budgets"] {
  const flat = ({ outside, output, fallback }: (typeof all)[keyof typeof all]) => ({
    outside,
    output: flatTensor(output),
    fallback: fallback === null ? null : flatTensor(fallback),
  });
  return Object.fromEntries(PAGE_DTYPES.map((dtype) => [dtype, flat(all[dtype])]));
}

function flatTensor(tensor: FixtureTensor): FlatTensor {
  return { shape: tensor.shape, data: tensor.data as number[] };
}

/** A fixture case in the form the page takes: inputs as the port takes them, expected values flat. */
export function explorerCase(fixture: FixtureCase): ExplorerCase {
  const inputs = fixture.inputs;
  const valid = fixture.expected !== null;
  const asPort = (x: unknown) => (valid && x !== null ? portTensor(x as FixtureTensor) : x);
  return {
    id: fixture.id,
    description: fixture.description,
    tags: fixture.tags,
    inputs: {
      query: asPort(inputs.query),
      key: asPort(inputs.key),
      value: asPort(inputs.value),
      attnMask: asPort(inputs.attnMask),
    },
    params: fixture.params,
    expected:
      fixture.expected === null
        ? null
        : {
            weights: flatTensor(fixture.expected.weights),
            output: flatTensor(fixture.expected.output),
            logits: flatTensor(fixture.expected.logits),
            budgets: budgets(fixture.expected.budgets),
          },
    expectedError: fixture.expectedError,
  };
}

/** The SIMD kernel's two builds, carried in the page (base64) for simd.ts's initSimd (backends.ts),
 * so that the page fetches nothing. Their freshness is checked here, when the page is built: a
 * stale or missing build is left out, and the page says the SIMD backend cannot load. */
function simdKernelScript(): string {
  const fresh = buildIsFresh();
  const builds = Object.fromEntries(
    Object.entries(BUILDS).map(([name, { file }]) => [
      name,
      fresh ? readFileSync(file).toString("base64") : null,
    ]),
  );
  return `window.EXPLORER_SIMD_KERNEL = ${JSON.stringify(builds)};`;
}

/** main.ts and everything it imports (the ports, inputs.ts, model.ts) as one browser script,
 * with the source files that went into it (from esbuild's metafile, repository-relative). */
export async function bundle(): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    // simd.ts finds its kernel and worker from import.meta.url, which an iife has not: the page's
    // own address stands in (the page gives initSimd the kernel's bytes, and runs one thread).
    define: { "import.meta.url": "document.baseURI" },
    absWorkingDir: resolve(HERE, "..", ".."),
    entryPoints: [join(HERE, "main.ts")],
    ...PAGE_BUNDLE_OPTIONS,
    metafile: true,
  });
  return { code: result.outputFiles[0].text, inputs: Object.keys(result.metafile.inputs).sort() };
}

/** What the guided mode shows of one source: its five steps, and the softmax that step 4 calls. */
export interface SourceSteps {
  readonly steps: Record<number, string>;
  readonly softmax: string;
}

/** The five steps of attention.ts and of reference.py, as the guided mode shows them: cut from the
 * sources by `attention-port side-by-side` (side_by_side.py), which writes docs/side-by-side.md from
 * the same cut, into docs/lesson-steps.json. */
export function sourceSteps(): {
  typescript: SourceSteps;
  python: SourceSteps;
  layer: Record<"typescript" | "python", { steps: Record<string, string> }>;
} {
  const path = resolve(HERE, "..", "..", "docs", "lesson-steps.json");
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (error) {
    throw new Error(`${path}: ${(error as Error).message} (run \`attention-port side-by-side\`)`);
  }
}

/** Inside an inline <script>, "</script" would end the script early. */
function scriptSafe(source: string): string {
  return source.replace(/<\/(script)/gi, "<\\/$1");
}

export interface PageOptions {
  readonly fixtures?: string;
  readonly allCases?: boolean;
}

/** The whole page as one HTML string, and the ids of the cases left out of it. */
export async function buildPage(
  options: PageOptions = {},
): Promise<{ html: string; cases: string[]; left: string[] }> {
  const fixtures = loadFixtures(options.fixtures ?? DEFAULT_FIXTURES);
  const kept: string[] = [];
  const left: string[] = [];
  const literals: string[] = [];
  for (const fixture of fixtures) {
    const literal = jsLiteral(explorerCase(fixture));
    // The real model's case stays however large: the page's real-model preset shows it.
    if (!options.allCases && literal.length > CASE_BYTES_LIMIT && fixture.id !== REAL_MODEL_PRESET.caseId) {
      left.push(fixture.id);
      continue;
    }
    kept.push(fixture.id);
    literals.push(literal);
  }
  const template = readFileSync(join(HERE, "index.html"), "utf8");
  const sources = sourceSteps();
  const casesScript =
    `window.EXPLORER_CASES = [\n${literals.join(",\n")}\n];\n` +
    `window.EXPLORER_SOURCES = ${JSON.stringify({ typescript: sources.typescript, python: sources.python })};\n` +
    `window.EXPLORER_LAYER_SOURCES = ${JSON.stringify(sources.layer)};\n` +
    simdKernelScript();
  const { code: script } = await bundle();
  // Function replacers: a `$` in the script must not be read as a replacement pattern.
  const html = template
    .replace("/*EXPLORER_CASES*/", () => scriptSafe(casesScript))
    .replace("/*EXPLORER_SCRIPT*/", () => scriptSafe(script));
  return { html, cases: kept, left };
}

/** Write DIR/index.html atomically (a temporary file, then a rename). */
export async function writePage(out: string, options: PageOptions = {}): Promise<string> {
  const { html, cases, left } = await buildPage(options);
  mkdirSync(out, { recursive: true });
  const target = join(out, "index.html");
  writeAtomic(target, html);
  const size = Buffer.byteLength(html);
  const leftOut =
    left.length === 0 ? "" : `; left out as too large: ${left.join(", ")} (served mode has them)`;
  return `wrote ${target} (${(size / 1024).toFixed(0)} KiB, ${cases.length} fixture cases${leftOut})`;
}

/** The Host headers the server answers: 127.0.0.1 or localhost, with or without a port. */
const LOCAL_HOST = /^(127\.0\.0\.1|localhost)(:\d{1,5})?$/i;
/** How often the server checks that the process that started it is still there. */
const PARENT_POLL_MS = 500;

/** The path of a request target, or undefined when the target is not a URL (`http://[::1`). */
function requestPath(target: string | undefined): string | undefined {
  try {
    return new URL(target ?? "/", "http://localhost").pathname;
  } catch {
    return undefined;
  }
}

/** Serve the page on 127.0.0.1 until Ctrl-C; resolves with the URL once listening. */
export function serve(port: number, options: PageOptions = {}): Promise<string> {
  const server = createServer((request, response) => {
    const text = { "content-type": "text/plain; charset=utf-8" };
    // Only requests addressed to this machine by name: a page on another site whose name was
    // rebound to 127.0.0.1 sends its own name, and must not read the page (DNS rebinding).
    if (!LOCAL_HOST.test(request.headers.host ?? "")) {
      response.writeHead(403, text).end("this server answers only requests for 127.0.0.1 or localhost\n");
      return;
    }
    const path = requestPath(request.url);
    if (path === undefined) {
      response.writeHead(400, text).end("malformed request target\n");
      return;
    }
    if (request.method !== "GET" || (path !== "/" && path !== "/index.html")) {
      response.writeHead(404, text).end("not found\n");
      return;
    }
    buildPage({ ...options, allCases: true }).then(
      ({ html }) => {
        response
          .writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" })
          .end(html);
      },
      (error: unknown) => {
        response
          .writeHead(500, { "content-type": "text/plain; charset=utf-8" })
          .end(`the explorer page could not be built: ${(error as Error).message}\n`);
      },
    );
  });
  const stop = () => {
    server.close();
    server.closeAllConnections();
    console.log("explorer stopped");
    process.exit(0);
  };
  // Ctrl-C, `kill` and a closed terminal all stop the server (never one left answering).
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, stop);
  }
  // So does the end of the process that started it (`attention-port explore` killed with -9 can
  // pass nothing on): an orphan is adopted by another process, which changes its parent's id.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) {
      stop();
    }
  }, PARENT_POLL_MS).unref();
  return new Promise((done, fail) => {
    server.once("error", fail);
    server.listen(port, "127.0.0.1", () => {
      done(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    });
  });
}

async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCommand>;
  try {
    parsed = parseCommand(argv);
  } catch (error) {
    console.error(`error: ${(error as Error).message}\n${USAGE}`);
    return 2;
  }
  const { command, values } = parsed;
  const options = { fixtures: values.fixtures, allCases: values["all-cases"] };
  try {
    if (command === "build") {
      console.log(await writePage(resolve(values.out ?? DEFAULT_OUT), options));
      return 0;
    }
    const port = Number(values.port ?? "0");
    if (!Number.isInteger(port) || port < 0 || port > 65535) {
      console.error(`error: --port must be a whole number from 0 to 65535, got ${values.port}\n${USAGE}`);
      return 2;
    }
    await buildPage(options); // fail now, not on the first page load, if the page cannot be built
    const url = await serve(port, options);
    console.log(`attention explorer at ${url} (Ctrl-C stops it)`);
    return -1; // keep running
  } catch (error) {
    console.error(`error: ${(error as Error).message}`);
    return 2;
  }
}

function parseCommand(argv: string[]) {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      out: { type: "string" },
      port: { type: "string" },
      fixtures: { type: "string" },
      "all-cases": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const command = positionals[0];
  if (positionals.length !== 1 || (command !== "build" && command !== "serve")) {
    throw new Error("expected one command: build or serve");
  }
  return { command, values };
}

if (import.meta.main) {
  const code = await main(process.argv.slice(2));
  if (code >= 0) {
    process.exit(code);
  }
}
