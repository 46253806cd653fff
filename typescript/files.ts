/**
 * Output files written so that no reader sees half of one: the twin of python/attention_port/files.py.
 *
 * The data goes to a scratch file beside the path, and one rename puts it in place: a write that
 * fails leaves the old file whole and removes the scratch file.
 */

import { renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/** `data` into `path`, through a scratch file beside it and one rename. */
export function writeAtomic(path: string, data: string | Uint8Array): void {
  const scratch = join(dirname(path), `.${basename(path)}.tmp-${process.pid}`);
  try {
    writeFileSync(scratch, data);
    renameSync(scratch, path);
  } catch (error) {
    rmSync(scratch, { force: true });
    throw error;
  }
}
