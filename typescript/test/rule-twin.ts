// The tolerance rule's twin (helpers.ts's outputProblem) on answers python/tests/test_rule_twin.py
// makes: `node typescript/test/rule-twin.ts answers.json` reads {"case id": [output, ...]} (flat,
// non-finite numbers as the fixtures write them) and prints {"case id": [passed, ...]}.

import { readFileSync } from "node:fs";

import { decodeNumbers, type FixtureTensor, loadFixtures } from "../src/fixtures.ts";
import { outputProblem } from "./helpers.ts";

const answers = JSON.parse(readFileSync(process.argv[2], "utf-8")) as Record<string, unknown[][]>;
const verdicts: Record<string, boolean[]> = {};
for (const c of loadFixtures(undefined, Object.keys(answers))) {
  verdicts[c.id] = answers[c.id].map(
    (output) =>
      outputProblem(decodeNumbers(output) as number[], c.expected!, c.inputs.value as FixtureTensor) === null,
  );
}
console.log(JSON.stringify(verdicts));
