/**
 * "Copy as a TypeScript call": the last good inputs and options as a call of the chosen backend.
 */

import { type Backend, DEFAULT_BACKEND } from "./backends.ts";
import { formatTensorText, numberText } from "./model.ts";
import { $, state } from "./page.ts";

/** The package's module of each backend: what a project that installed attention-port imports. */
function packageModule(backend: Backend): string {
  return backend.name === DEFAULT_BACKEND ? "attention-port" : `attention-port/${backend.name}`;
}

/** The last good inputs and options as a call of the chosen backend's scaledDotProductAttention,
 * to paste into a file at the repository's root (or, with the package installed, to import from
 * the package's module instead). */
function typescriptCall(): string {
  const result = state.result;
  if (result === null) {
    return "";
  }
  const { inputs, options } = result;
  const backend = state.backend;
  const given: string[] = [];
  if (inputs.attnMask !== null) {
    given.push(`attnMask`);
  }
  if (options.isCausal === true) {
    given.push("isCausal: true");
  }
  if (options.scale !== null && options.scale !== undefined) {
    given.push(`scale: ${numberText(options.scale)}`);
  }
  if (Number(options.softcap ?? 0) !== 0) {
    given.push(`softcap: ${numberText(options.softcap)}`);
  }
  if (options.enableGqa === true) {
    given.push("enableGqa: true");
  }
  if (options.queryOffset !== undefined) {
    given.push(`queryOffset: ${numberText(options.queryOffset)}`);
  }
  const tensor = (name: string, x: unknown) => `const ${name} = ${formatTensorText(x)};`;
  // The GPU port hands its work to the device and answers later: its call is awaited.
  const wait = backend.name === "webgpu" ? "await " : "";
  return [
    `// computed by ${backend.label}; with the package installed, import from "${packageModule(backend)}"`,
    `import { scaledDotProductAttention } from "./${backend.nodeSource ?? backend.source}";`,
    "",
    tensor("query", inputs.query),
    tensor("key", inputs.key),
    tensor("value", inputs.value),
    ...(inputs.attnMask !== null ? [tensor("attnMask", inputs.attnMask)] : []),
    "",
    `const output = ${wait}scaledDotProductAttention(query, key, value${given.length > 0 ? `, { ${given.join(", ")} }` : ""});`,
    "console.log(output);",
    "",
  ].join("\n");
}

/** Once the copy box is open it follows every change: rewritten for the new inputs, options or
 * backend (and said so, since the clipboard still holds the old call). */
export function refreshCopy(): void {
  if ($("copy-panel").hidden) {
    return;
  }
  const box = $<HTMLTextAreaElement>("copy-text");
  const text = typescriptCall();
  if (box.value !== text) {
    box.value = text;
    $("copy-note").textContent =
      "Rewritten for the current inputs and options: press “Copy as a TypeScript call” again to copy it.";
  }
}

/** While the inputs have an error there is no call to copy: the box is emptied and says why. */
export function clearCopy(why: string): void {
  if ($("copy-panel").hidden) {
    return;
  }
  $<HTMLTextAreaElement>("copy-text").value = "";
  $("copy-note").textContent = `Nothing to copy: ${why}`;
}

export function wireCopy(): void {
  $("copy-call").addEventListener("click", async () => {
    const box = $<HTMLTextAreaElement>("copy-text");
    $("copy-panel").hidden = false;
    if ($("steps").classList.contains("stale")) {
      clearCopy("fix the red line first.");
      return;
    }
    const text = typescriptCall();
    box.value = text;
    let copied = false;
    try {
      await navigator.clipboard.writeText(text);
      copied = true;
    } catch {
      box.select(); // no clipboard here (a file:// page may not have one): selected, for Ctrl-C
    }
    $("copy-note").textContent = copied
      ? "Copied. Paste it into a .ts file at the repository's root and run it with node."
      : "Selected below: press Ctrl-C (or ⌘-C) to copy it.";
  });
}
