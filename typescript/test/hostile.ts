// Hostile input, for every port (attention.ts, flash.ts, simd.ts; their flat entries where the
// input is flat): sparse and absurd lengths, nesting of any depth and cycles, objects whose own code
// throws or lies, and objects that change while they are read. Each must end in one
// AttentionInputError naming the argument, quickly, or in the answer for exactly the values the
// port read: never a RangeError, a TypeError, a hang, or a row made up from memory.
//
// adversarial.test.ts runs each section in a child process it kills at a deadline: a port that
// regresses into reading 2 ** 31 holes or walking a cycle would otherwise hang the test run, which
// no timeout of node:test can interrupt in synchronous code.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

import fc from "fast-check";

import * as readable from "../src/attention.ts";
import * as flash from "../src/flash.ts";
import { AttentionInputError, describeValue, ERROR_KINDS } from "../src/inputs.ts";
import * as simd from "../src/simd-node.ts";
import { generator } from "./generate.ts";

type Entry = (query: unknown, key: unknown, value: unknown, options?: unknown) => unknown;
const PORTS: Record<string, Entry> = {
  attention: readable.scaledDotProductAttention as Entry,
  flash: flash.scaledDotProductAttention as Entry,
  simd: simd.scaledDotProductAttention as Entry,
};
const FLAT_PORTS: Record<string, Entry> = {
  flash: flash.scaledDotProductAttentionFlat as Entry,
  simd: simd.scaledDotProductAttentionFlat as Entry,
};
/** Every check, by section, in the order written. */
export const SECTIONS = new Map<string, Map<string, () => void>>();
let current = new Map<string, () => void>();

function section(name: string, body: () => void): void {
  current = new Map();
  SECTIONS.set(name, current);
  body();
}

function check(name: string, body: () => void): void {
  current.set(name, body);
}

const PORT_NAMES = Object.keys(PORTS);
const MAX_RANK = 64; // inputs.ts's, written out: these checks also run against an entry without it
const ARGUMENTS = ["query", "key", "value", "attnMask"] as const;
type Argument = (typeof ARGUMENTS)[number];

// A valid problem, [2, 2] x [3, 2] -> [2, 1]; the mask [2, 3] is numeric (0 lets every key in).
const VALID: Record<Argument, unknown> = {
  query: [
    [1, 0],
    [0.5, 2],
  ],
  key: [
    [1, -1],
    [0.25, 0.5],
    [2, 0],
  ],
  value: [[1], [2], [3]],
  attnMask: [
    [0, 0, 0],
    [0, 0, 0],
  ],
};

/** The problem with `argument` replaced by `input`, through `port`. */
function callWith(port: Entry, argument: Argument, input: unknown): unknown {
  const given = { ...VALID, [argument]: input };
  return port(given.query, given.key, given.value, { attnMask: given.attnMask });
}

/** `run` throws an AttentionInputError of a shared kind (one of `kinds`, if given) whose message
 * names `argument`, within `ms` milliseconds; the error's message is returned. */
function refused(run: () => unknown, argument: Argument, kinds?: readonly string[], ms = 250): string {
  const start = performance.now();
  let thrown: unknown = null;
  try {
    run();
  } catch (error) {
    thrown = error;
  }
  const elapsed = performance.now() - start;
  assert.ok(thrown instanceof AttentionInputError, `not an AttentionInputError: ${describeValue(thrown)}`);
  assert.ok((ERROR_KINDS as readonly string[]).includes(thrown.kind));
  if (kinds !== undefined) {
    assert.ok(kinds.includes(thrown.kind), `kind ${thrown.kind}: ${thrown.message}`);
  }
  assert.ok(thrown.message.includes(argument), `does not name ${argument}: ${thrown.message}`);
  assert.ok(elapsed < ms, `took ${elapsed.toFixed(0)} ms: ${thrown.message}`);
  return thrown.message;
}

/** An array that claims `length` but holds nothing (`r = []; r.length = n`). */
function sparse(length: number): unknown[] {
  const array: unknown[] = [];
  array.length = length;
  return array;
}

section("sparse and absurd lengths are refused from the length alone", () => {
  // Each input would take minutes and gigabytes if its elements were read or allocated first.
  check("nested rows and shaped data, for every port", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PORT_NAMES),
        fc.constantFrom(...ARGUMENTS),
        fc.constantFrom("first row", "later row", "outer", "shaped data"),
        fc.integer({ min: 2 ** 28 + 1, max: 2 ** 32 - 1 }), // past 2 GiB of float64: the default limit
        (portName, argument, where, length) => {
          const valid = VALID[argument] as unknown[][];
          let input: unknown;
          if (where === "first row") {
            input = [sparse(length), ...valid.slice(1)];
          } else if (where === "later row") {
            input = [valid[0], sparse(length)];
          } else if (where === "outer") {
            input = Object.assign(sparse(length), { 0: valid[0] });
          } else {
            input = { shape: [1, length], data: sparse(length) };
          }
          const kinds = where === "later row" ? ["ragged"] : ["size"];
          refused(() => callWith(PORTS[portName], argument, input), argument, kinds);
        },
      ),
      { numRuns: 120 },
    );
  });

  check("a shape longer than any rank, for the flat entries", () => {
    for (const [portName, port] of Object.entries(FLAT_PORTS)) {
      const flat = { shape: sparse(2 ** 31), data: new Float64Array(4) };
      const key = { shape: [3, 2], data: new Float64Array(6) };
      const value = { shape: [3, 1], data: new Float64Array(3) };
      const message = refused(() => port(flat, key, value), "query", ["rank"]);
      assert.equal(
        message,
        "query.shape has 2147483648 dimensions; at most 64 dimensions are supported",
        portName,
      );
    }
  });
});

section("nesting of any depth, and cycles, are refused as rank without recursion", () => {
  check("for every port and argument", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PORT_NAMES),
        fc.constantFrom(...ARGUMENTS),
        fc.oneof(fc.integer({ min: MAX_RANK + 1, max: 30_000 }), fc.constant("cycle" as const)),
        (portName, argument, depth) => {
          let input: unknown;
          if (depth === "cycle") {
            const cycle: unknown[] = [];
            cycle.push(cycle, cycle);
            input = cycle;
          } else {
            input = 1;
            for (let d = 0; d < depth; d++) {
              input = [input];
            }
          }
          const message = refused(() => callWith(PORTS[portName], argument, input), argument, ["rank"]);
          assert.equal(
            message,
            `${argument} is nested more than 64 arrays deep; at most 64 dimensions are supported`,
          );
        },
      ),
      { numRuns: 80 },
    );
  });

  check("64 dimensions are still read (and then refused by the shape checks)", () => {
    let input: unknown = 1;
    for (let d = 0; d < MAX_RANK; d++) {
      input = [input];
    }
    for (const port of Object.values(PORTS)) {
      refused(() => callWith(port, "query", input), "query", ["rank"]); // not the rank of key
    }
  });
});

/** Objects whose own code throws or lies when it is looked at. */
function hostile(kind: number): unknown {
  const revoked = Proxy.revocable([[1, 2]], {});
  revoked.revoke();
  const things: (() => unknown)[] = [
    () => revoked.proxy,
    () => Object.create(Object.create(null)), // no constructor anywhere on its prototype chain
    () =>
      Object.defineProperty([1, 2], 0, {
        get: () => {
          throw new Error("getter");
        },
      }),
    () =>
      new Proxy([1, 2], {
        get: () => {
          throw new RangeError("trap");
        },
      }),
    () =>
      new Proxy(
        {},
        {
          getPrototypeOf: () => {
            throw new Error("prototype");
          },
        },
      ),
    () =>
      Object.defineProperty({}, "constructor", {
        get: () => {
          throw new Error("constructor");
        },
      }),
    () => ({ constructor: { name: Symbol("not a string") } }),
    () => Symbol("leaf"),
    () => 10n,
    () => () => 1,
    () => new Proxy([1, 2], { get: (target, key) => (key === "length" ? -1 : Reflect.get(target, key)) }),
    () =>
      new Proxy([1, 2], { get: (target, key) => (key === "length" ? Number.NaN : Reflect.get(target, key)) }),
    () => ({ shape: revoked.proxy, data: [1, 2] }),
    // biome-ignore lint/suspicious/noSparseArray: a hole in the shape is the point
    () => ({ shape: [, 2], data: [1, 2] }),
    () => ({ shape: [1, 2], data: revoked.proxy }),
    () => ({
      get shape(): unknown {
        throw new Error("shape getter");
      },
      data: [1, 2],
    }),
    () => ({
      shape: [1, 2],
      data: {
        length: 2,
        0: 1,
        get 1(): unknown {
          throw new Error("data getter");
        },
      },
    }),
    () => ({ shape: [1, 3], data: Object.defineProperty(new Float64Array(2), "length", { value: 3 }) }),
  ];
  return things[kind % things.length]();
}
const HOSTILE_KINDS = 18;
const FIRST_SHAPED = 12; // hostile(12) and on are shaped { shape, data }

section("objects whose own code throws or lies end in an AttentionInputError naming the argument", () => {
  check("as the argument, as a row, or as a leaf, for every port", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PORT_NAMES),
        fc.constantFrom(...ARGUMENTS),
        fc.constantFrom("argument", "row", "leaf"),
        fc.nat(HOSTILE_KINDS - 1),
        (portName, argument, where, kind) => {
          const thing = hostile(kind);
          assert.equal(typeof describeValue(thing), "string"); // describing it never throws
          const valid = VALID[argument] as unknown[][];
          const input =
            where === "argument"
              ? thing
              : where === "row"
                ? [valid[0], thing]
                : [valid[0], [...valid[1].slice(0, -1), thing]];
          refused(() => callWith(PORTS[portName], argument, input), argument);
        },
      ),
      { numRuns: 300 },
    );
  });

  check("in the flat entries' tensors and masks", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...Object.keys(FLAT_PORTS)),
        fc.nat(HOSTILE_KINDS - 1),
        (portName, kind) => {
          const thing = hostile(kind);
          const query = { shape: [2, 2], data: new Float64Array(4) };
          const key = { shape: [3, 2], data: new Float64Array(6) };
          const value = { shape: [3, 1], data: new Float64Array(3) };
          const port = FLAT_PORTS[portName];
          refused(() => port(thing, key, value), "query");
          refused(() => port(query, key, value, { attnMask: thing }), "attnMask");
          if (kind >= FIRST_SHAPED) {
            // its own properties, getters kept as getters
            const mask = Object.defineProperties({ dtype: "float" }, Object.getOwnPropertyDescriptors(thing));
            refused(() => port(query, key, value, { attnMask: mask }), "attnMask");
          }
        },
      ),
      { numRuns: 60 },
    );
  });

  check("a revoked Proxy as the options is one error too", () => {
    const revoked = Proxy.revocable({}, {});
    revoked.revoke();
    for (const port of Object.values(PORTS)) {
      assert.throws(
        () => port(VALID.query, VALID.key, VALID.value, revoked.proxy),
        (error: unknown) => error instanceof AttentionInputError && error.kind === "value",
      );
    }
  });
});

/** `plain` rebuilt with every array behind a Proxy whose elements, and lengths, are drawn anew on
 * each read from `choices` (plain values of their own); `log` keeps the last value each array
 * handed out, so that the values the port read can be rebuilt as plain arrays. */
function changing(
  plain: unknown,
  random: () => number,
  alternatives: (at: unknown, key: string) => readonly unknown[],
  log: Map<object, Map<PropertyKey, unknown>>,
): unknown {
  if (!Array.isArray(plain)) {
    return plain;
  }
  const children = plain.map((child) => changing(child, random, alternatives, log));
  const seen = new Map<PropertyKey, unknown>();
  const proxy = new Proxy(children, {
    get(target, key) {
      if (typeof key === "symbol" || (key !== "length" && !/^\d+$/.test(key))) {
        return Reflect.get(target, key);
      }
      const original = key === "length" ? target.length : target[Number(key)];
      const options = [original, ...alternatives(original, key)];
      const read = options[Math.floor(random() * options.length)];
      seen.set(key, read);
      return read;
    },
  });
  log.set(proxy, seen);
  return proxy;
}

/** The plain arrays a port read from changing(): each array with its last length and elements. */
function snapshot(x: unknown, log: Map<object, Map<PropertyKey, unknown>>): unknown {
  const seen = typeof x === "object" && x !== null ? log.get(x) : undefined;
  if (seen === undefined) {
    return x;
  }
  const length = seen.get("length") as number;
  return Array.from({ length }, (_, i) => snapshot(seen.get(String(i)), log));
}

// A query that a call leaves in simd.ts's memory: a port that read past what it was given would
// answer from it.
const LEFT_IN_MEMORY = [
  [7, 7],
  [9, 9],
  [8, 8],
];

/** A port, just after a call that left another query in its memory, either refuses `input` or
 * answers exactly as for the plain values it read (`read()`, asked after the call). */
function answersForWhatItRead(port: Entry, argument: Argument, input: unknown, read: () => unknown): void {
  port(LEFT_IN_MEMORY, VALID.key, VALID.value);
  let answer: unknown;
  try {
    answer = callWith(port, argument, input);
  } catch (error) {
    assert.ok(error instanceof AttentionInputError, `not an AttentionInputError: ${describeValue(error)}`);
    return;
  }
  assert.deepEqual(answer, callWith(port, argument, read()));
}

section("what changes while it is read cannot change the answer", () => {
  // A port either refuses the input or answers for exactly the plain values it read: the same
  // answer it gives for those values passed as plain arrays. The old entry read shapes several
  // times and returned a row made up from memory; simd.ts's was the previous call's query.
  check("nested arrays whose lengths and elements change at each read", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PORT_NAMES),
        fc.constantFrom(...ARGUMENTS),
        fc.integer(),
        (portName, argument, seed) => {
          const port = PORTS[portName];
          const random = generator(seed);
          const log = new Map<object, Map<PropertyKey, unknown>>();
          const other = (at: unknown): readonly unknown[] =>
            typeof at === "number" && Number.isInteger(at) && at >= 0 && at < 5
              ? [at + 1, Math.max(at - 1, 0)] // a length, or a small integer
              : Array.isArray(at)
                ? [[0], [1, 2, 3]] // a row of another length
                : [random() * 8 - 4];
          const input = changing(VALID[argument], random, other, log);
          answersForWhatItRead(port, argument, input, () => snapshot(input, log));
        },
      ),
      { numRuns: 300 },
    );
  });

  check("simd.ts's attentionSteps takes every step from the values it read", () => {
    fc.assert(
      fc.property(fc.constantFrom(...ARGUMENTS), fc.integer(), (argument, seed) => {
        const random = generator(seed);
        const log = new Map<object, Map<PropertyKey, unknown>>();
        const other = (at: unknown, key: string): readonly unknown[] =>
          typeof at === "number" && key !== "length" ? [random() * 8 - 4] : [];
        const input = changing(VALID[argument], random, other, log); // numbers change, lengths do not
        const steps = (given: unknown) => {
          const all = { ...VALID, [argument]: given };
          return simd.attentionSteps(all.query as never, all.key as never, all.value as never, {
            attnMask: all.attnMask as never,
          });
        };
        assert.deepEqual(steps(input), steps(snapshot(input, log)));
      }),
      { numRuns: 100 },
    );
  });

  check("a shaped tensor whose shape and data change at each read", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...PORT_NAMES),
        fc.constantFrom("query", "key", "value") as fc.Arbitrary<Argument>,
        fc.integer(),
        (portName, argument, seed) => {
          const port = PORTS[portName];
          const random = generator(seed);
          const valid = VALID[argument] as number[][];
          const shape = [valid.length, valid[0].length];
          const data = valid.flat();
          // Each read of a shape entry or a datum draws again; the last draw is what was read.
          const shapeRead: number[] = [];
          const dataRead: number[] = [];
          const drawn = <T>(into: T[], i: number, options: readonly T[]) => {
            into[i] = options[Math.floor(random() * options.length)];
            return into[i];
          };
          const changingShape = shape.map(() => 0);
          shape.forEach((n, i) =>
            Object.defineProperty(changingShape, i, { get: () => drawn(shapeRead, i, [n, n, n + 1, 1]) }),
          );
          const changingData = data.map(() => 0);
          data.forEach((x, i) =>
            Object.defineProperty(changingData, i, { get: () => drawn(dataRead, i, [x, x + 1, -x]) }),
          );
          answersForWhatItRead(port, argument, { shape: changingShape, data: changingData }, () => ({
            shape: shapeRead,
            data: Array.from({ length: data.length }, (_, i) => dataRead[i]),
          }));
        },
      ),
      { numRuns: 300 },
    );
  });

  check("the flat entries read a typed array's length from the array, not from an own property", () => {
    for (const port of Object.values(FLAT_PORTS)) {
      const lying = Object.defineProperty(new Float64Array([1, 0, 0.5, 2]), "length", { value: 6 });
      const query = { shape: [3, 2], data: lying }; // 4 numbers that claim to be 6
      const key = { shape: [3, 2], data: new Float64Array([1, -1, 0.25, 0.5, 2, 0]) };
      const value = { shape: [3, 1], data: new Float64Array([1, 2, 3]) };
      refused(() => port(query, key, value), "query", ["shape"]);
    }
  });
});

// Run as a script by adversarial.test.ts (`node hostile.ts SECTION`): run every check of that
// section, and print how each ended (null: passed) as JSON.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const failures: Record<string, string | null> = {};
  for (const [checkName, body] of SECTIONS.get(process.argv[2])!) {
    try {
      body();
      failures[checkName] = null;
    } catch (error) {
      failures[checkName] = error instanceof Error ? (error.stack ?? error.message) : String(error);
    }
  }
  process.stdout.write(JSON.stringify(failures));
}
