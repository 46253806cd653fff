/**
 * The explorer on a narrow screen: one column, with the heatmaps moved to just after the input
 * being edited.
 */

import { $, guide } from "./page.ts";

/** At 480 px or less the page is one column, and the heatmaps would sit below every input: they
 * move to just after the input box being edited (and back, on a wider screen). */
export const NARROW = "(max-width: 480px)";

export function wireNarrowScreens(): void {
  const narrow = window.matchMedia(NARROW);
  const home = $("steps-home");
  const place = (box: Element | null) => {
    const steps = $("steps");
    if (narrow.matches && box !== null) {
      box.after(steps);
    } else if (!narrow.matches && steps.previousElementSibling !== home) {
      home.after(steps);
    }
  };
  $("inputs-panel").addEventListener("focusin", (event) => {
    if (!guide.open) {
      // While the guide is open the heatmaps stay under it, beside the explanation.
      place((event.target as HTMLElement).closest(".input-box, fieldset, .row"));
    }
  });
  narrow.addEventListener("change", () => place(narrow.matches ? $("preset").closest(".row") : null));
  if (narrow.matches) {
    place($("preset").closest(".row"));
  }
}
