/**
 * Which level of `attention-port check` a case is on, for the conformance kit: the attention core's
 * levels are generated from contract/levels.json (generated/levels.ts), and this is the rule that
 * reads them, cases.py's level_of (a test holds the two equal on every fixture case). A case belongs
 * to the last level that any of its tags names; a case whose tags name no level is on the plain one.
 */

import { LEVELS, PLAIN_LEVEL } from "./generated/levels.ts";

export { LEVELS } from "./generated/levels.ts";

/** The level (1-based) of a case with these tags. */
export function levelOf(tags: readonly string[]): number {
  const named = LEVELS.flatMap((entry, n) => (entry.tags.some((tag) => tags.includes(tag)) ? [n + 1] : []));
  return named.length === 0 ? PLAIN_LEVEL : Math.max(...named);
}
