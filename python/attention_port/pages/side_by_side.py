"""docs/side-by-side.md: each attention step in Python and TypeScript next to each other.

The page is generated from the sources (python/attention_port/reference.py against
typescript/src/attention.ts, and the grouped-query lines of typescript/src/batching.ts) by cutting
them at their shared step labels ("Step 1: scores", ...), at the "Grouped-query attention:"
comment, and at the public functions with their doc comments, so it cannot drift from the code; a
test checks the committed page is up to date. Regenerate with `attention-port side-by-side`.

The same cut, the five steps of each readable port and the softmax step 4 calls, is written to
docs/lesson-steps.json for the explorer's guided mode (typescript/explorer/build.ts reads it): the
explorer shows the very lines this page shows, cut here and nowhere else.
"""

from __future__ import annotations

import html
import json
import re
import textwrap
from pathlib import Path

from attention_port.files import write_atomic
from attention_port.paths import DOCS, PYTHON_PACKAGE, TYPESCRIPT_SRC

PYTHON_SOURCE = PYTHON_PACKAGE / "reference.py"
TYPESCRIPT_SOURCE = TYPESCRIPT_SRC / "attention.ts"
BATCHING_SOURCE = TYPESCRIPT_SRC / "batching.ts"  # batch dims, heads, GQA
PYTHON_LAYER = PYTHON_PACKAGE / "layer.py"  # the layer and RoPE, around the core
TYPESCRIPT_LAYER = TYPESCRIPT_SRC / "layer.ts"
LAYER_STEP_COUNT = 6
GQA_LABEL = "Grouped-query attention:"
OUTPUT = DOCS / "side-by-side.md"
STEPS_OUTPUT = DOCS / "lesson-steps.json"  # the explorer's guided mode reads it
STEP_COUNT = 5


class SourceLayoutError(Exception):
    """A source no longer has the labels the page is cut at."""


def step_blocks(text: str, comment: str, source: Path, count: int = STEP_COUNT) -> dict[int, str]:
    """The lines of each `<comment> Step N:` block (N from 1 to count), up to the next step label
    or the `return` at the label's indentation."""
    lines = text.splitlines()
    label = re.compile(rf"^\s*{re.escape(comment)} Step (\d+):")
    starts = {}
    for number, line in enumerate(lines):
        match = label.match(line)
        if match:
            starts[int(match.group(1))] = number
    if sorted(starts) != list(range(1, count + 1)):
        raise SourceLayoutError(f"{source}: expected step labels 1..{count}, found {sorted(starts)}")
    blocks = {}
    for step, start in starts.items():
        indent = lines[start][: len(lines[start]) - len(lines[start].lstrip())]
        end = start + 1  # up to the next label or the function's own return (not a callback's)
        while (
            end < len(lines) and not label.match(lines[end]) and not lines[end].startswith(f"{indent}return")
        ):
            end += 1
        blocks[step] = textwrap.dedent("\n".join(lines[start:end])).strip("\n")
    return blocks


def labelled_block(text: str, comment: str, label: str, source: Path) -> str:
    """The lines from the comment `<comment> <label>` to the next blank line, dedented."""
    lines = text.splitlines()
    try:
        start = next(n for n, line in enumerate(lines) if line.strip().startswith(f"{comment} {label}"))
    except StopIteration:
        raise SourceLayoutError(f"{source}: no comment starts with {label!r}") from None
    end = start + 1
    while end < len(lines) and lines[end].strip():
        end += 1
    return textwrap.dedent("\n".join(lines[start:end]))


def _header_line(lines: list[str], header: str, source: Path) -> int:
    try:
        return next(n for n, line in enumerate(lines) if line.startswith(header))
    except StopIteration:
        raise SourceLayoutError(f"{source}: no line starts with {header!r}") from None


def _doc_comment_start(lines: list[str], start: int) -> int:
    """Where the /** ... */ block right above line `start` begins (start itself if none)."""
    if start > 0 and lines[start - 1].rstrip().endswith("*/"):
        begin = start - 1
        while begin > 0 and not lines[begin].lstrip().startswith("/**"):
            begin -= 1
        return begin
    return start


def signature_and_doc(text: str, header: str, source: Path) -> str:
    """A function's doc comment and signature: Python's def line(s) and docstring; TypeScript's
    /** */ block and the first signature (an overloaded function's first overload)."""
    lines = text.splitlines()
    start = _header_line(lines, header, source)
    if header.startswith("def "):
        end = next(n for n in range(start, len(lines)) if lines[n].rstrip().endswith(":"))
        if lines[end + 1].strip().startswith('"""'):  # the docstring, one line or more
            end += 1
            if lines[end].count('"""') == 1:  # opened here, closed on a later line
                end = next(n for n in range(end + 1, len(lines)) if '"""' in lines[n])
        return "\n".join(lines[start : end + 1])
    end = next(n for n in range(start, len(lines)) if lines[n].rstrip().endswith(("{", ";")))
    return "\n".join(lines[_doc_comment_start(lines, start) : end + 1])


def function_source(text: str, header: str, source: Path) -> str:
    """A top-level function, with a TypeScript doc comment above it, to its end (the next line at
    column 0)."""
    lines = text.splitlines()
    start = _header_line(lines, header, source)
    end = start + 1
    while end < len(lines) and (not lines[end] or lines[end][0] in " \t)"):
        end += 1
    if end < len(lines) and lines[end].startswith("}"):
        end += 1  # TypeScript's closing brace belongs to the function
    return "\n".join(lines[_doc_comment_start(lines, start) : end]).rstrip()


def _pair(
    python: str, typescript: str, typescript_file: str = "attention.ts", python_file: str = "reference.py"
) -> str:
    return (
        f"<table>\n<tr><th>Python ({python_file})</th><th>TypeScript ({typescript_file})</th></tr>\n<tr>\n"
        f'<td valign="top">\n\n<pre lang="python">\n{html.escape(python)}\n</pre>\n\n</td>\n'
        f'<td valign="top">\n\n<pre lang="typescript">\n{html.escape(typescript)}\n</pre>\n\n</td>\n'
        "</tr>\n</table>\n"
    )


def render() -> str:
    python_text = PYTHON_SOURCE.read_text(encoding="utf-8")
    typescript_text = TYPESCRIPT_SOURCE.read_text(encoding="utf-8")
    batching_text = BATCHING_SOURCE.read_text(encoding="utf-8")
    python_steps = step_blocks(python_text, "#", PYTHON_SOURCE)
    typescript_steps = step_blocks(typescript_text, "//", TYPESCRIPT_SOURCE)
    parts = [
        "# Attention, side by side\n",
        "Generated by `attention-port side-by-side` from `python/attention_port/reference.py` and\n"
        "`typescript/src/attention.ts`; do not edit by hand (a test checks it is up to date).\n\n"
        "The numpy port works on whole arrays at once; the TypeScript port spells the same step out\n"
        "as loops over `number[][]`. Both run on the same fixtures and agree with the high-precision\n"
        "oracle to within a few percent of the float64 error budget.\n",
        "\n## The functions\n\n",
    ]
    for python_header, typescript_header in (
        ("def scaled_dot_product_attention(", "export function scaledDotProductAttention("),
        ("def attention_steps(", "export function attentionSteps("),
    ):
        python = signature_and_doc(python_text, python_header, PYTHON_SOURCE)
        parts.append(_pair(python, signature_and_doc(typescript_text, typescript_header, TYPESCRIPT_SOURCE)))
    parts += [
        "\n## Grouped-query heads\n\n",
        "numpy repeats each key/value head for the query heads that share it; the TypeScript port\n"
        "reads the shared head in place, in `typescript/src/batching.ts` (used by every TypeScript\n"
        "port), one (batch, head) slice at a time, and hands each slice to `attentionHead`.\n\n",
        _pair(
            labelled_block(python_text, "#", GQA_LABEL, PYTHON_SOURCE),
            labelled_block(batching_text, "//", GQA_LABEL, BATCHING_SOURCE),
            "batching.ts",
        ),
    ]
    for step in range(1, STEP_COUNT + 1):
        title = python_steps[step].splitlines()[0].lstrip("# ").split(".")[0]
        parts += [f"\n## {title}\n\n", _pair(python_steps[step], typescript_steps[step])]
    parts += [
        "\n## Step 4 in detail: a stable softmax\n\n",
        _pair(
            function_source(python_text, "def softmax(", PYTHON_SOURCE),
            function_source(typescript_text, "export function softmax(", TYPESCRIPT_SOURCE),
        ),
    ]
    return "".join(parts + _layer_parts())


def _layer_parts() -> list[str]:
    """The layer around the core, and RoPE: layer.py against layer.ts, step by step."""
    python_text = PYTHON_LAYER.read_text(encoding="utf-8")
    typescript_text = TYPESCRIPT_LAYER.read_text(encoding="utf-8")
    python_steps = step_blocks(python_text, "#", PYTHON_LAYER, LAYER_STEP_COUNT)
    typescript_steps = step_blocks(typescript_text, "//", TYPESCRIPT_LAYER, LAYER_STEP_COUNT)
    files = {"typescript_file": "layer.ts", "python_file": "layer.py"}
    parts = [
        "\n# The layer: multi-head attention around the core\n\n",
        "Generated from `python/attention_port/layer.py` and `typescript/src/layer.ts`. Q, K and V\n"
        "come from the inputs through three learned projections (`y = x·Wᵀ + b`, weights [out, in]\n"
        "as nn.Linear stores them), are split into heads, turned by RoPE if asked, attended by the\n"
        "core above head by head, merged and projected out. numpy reshapes and transposes; the\n"
        "TypeScript layer writes the same index arithmetic as loops over flat arrays.\n",
        "\n## The function\n\n",
        _pair(
            signature_and_doc(python_text, "def layer_with(", PYTHON_LAYER),
            signature_and_doc(typescript_text, "export function layerWith(", TYPESCRIPT_LAYER),
            **files,
        ),
    ]
    for step in range(1, LAYER_STEP_COUNT + 1):
        title = python_steps[step].splitlines()[0].lstrip("# ").split(".")[0]
        parts += [f"\n## Layer {title}\n\n", _pair(python_steps[step], typescript_steps[step], **files)]
    parts += [
        "\n## Rotary position embeddings\n\n",
        _pair(
            signature_and_doc(python_text, "def apply_rotary(", PYTHON_LAYER),
            signature_and_doc(typescript_text, "export function applyRotary(", TYPESCRIPT_LAYER),
            **files,
        ),
        "\nThe rotation itself: each pair of features turns by its own angle.\n\n",
        _pair(
            function_source(python_text, "def rotate(", PYTHON_LAYER),
            function_source(typescript_text, "function rotate(", TYPESCRIPT_LAYER),
            **files,
        ),
    ]
    return parts


def lesson_steps() -> dict:
    """Each readable port's five steps (by number) and its softmax, as the guided mode shows them,
    and the six steps of each layer lesson, as the layer view shows them."""

    def cut(source: Path, comment: str, softmax: str) -> dict:
        text = source.read_text(encoding="utf-8")
        steps = step_blocks(text, comment, source)
        return {
            "steps": {str(n): steps[n] for n in sorted(steps)},
            "softmax": function_source(text, softmax, source),
        }

    def layer_steps(source: Path, comment: str) -> dict:
        steps = step_blocks(source.read_text(encoding="utf-8"), comment, source, LAYER_STEP_COUNT)
        return {"steps": {str(n): steps[n] for n in sorted(steps)}}

    return {
        "typescript": cut(TYPESCRIPT_SOURCE, "//", "export function softmax("),
        "python": cut(PYTHON_SOURCE, "#", "def softmax("),
        # The layer view's six steps, of layer.ts and layer.py.
        "layer": {
            "typescript": layer_steps(TYPESCRIPT_LAYER, "//"),
            "python": layer_steps(PYTHON_LAYER, "#"),
        },
    }


def render_steps() -> str:
    return json.dumps(lesson_steps(), indent=2, ensure_ascii=False) + "\n"


def write(path: Path = OUTPUT, steps_path: Path = STEPS_OUTPUT) -> None:
    write_atomic(path, render())
    write_atomic(steps_path, render_steps())


def is_fresh(path: Path = OUTPUT, steps_path: Path = STEPS_OUTPUT) -> bool:
    return all(
        written.is_file() and written.read_text(encoding="utf-8") == text
        for written, text in ((path, render()), (steps_path, render_steps()))
    )
