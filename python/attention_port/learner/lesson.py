"""Where the lesson does each step right, so that check can point a learner at the line to read.

The lesson is typescript/src/attention.ts for a JavaScript or TypeScript learner and
python/attention_port/reference.py for a Python one; the layer's is typescript/src/layer.ts and
python/attention_port/layer.py (all ship with the package). Each place is found by a marker, a step
label or a phrase written on that line, never by a line number, so a pointer stays right when the
lesson moves. A marker on a comment points at the code line the comment explains: the first line
after it that is not a comment.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from attention_port.paths import IN_CHECKOUT, PACKAGE_DIR, REPO_ROOT, TYPESCRIPT_SRC

LESSONS = {"JavaScript": TYPESCRIPT_SRC / "attention.ts", "Python": PACKAGE_DIR / "reference.py"}
BATCHING_TS = TYPESCRIPT_SRC / "batching.ts"  # Part 2's grouping of heads, in TypeScript
LAYER_LESSONS = {"JavaScript": TYPESCRIPT_SRC / "layer.ts", "Python": PACKAGE_DIR / "layer.py"}
# Which keys a row sees (the window, the sink tokens, kv_seqlen, a per-sequence offset): the lesson
# asks the key-range module, which decides it in a few integers per row.
KEY_RANGE = {"JavaScript": TYPESCRIPT_SRC / "key-range.ts", "Python": PACKAGE_DIR / "key_range.py"}

# topic -> the marker in each language's lesson (a (file, marker) pair where it is not the lesson).
PLACES: dict[str, dict[str, str | tuple[Path, str]]] = {
    "scores": {"JavaScript": "// Step 1: scores.", "Python": "# Step 1: scores."},
    "scale": {"JavaScript": "// Step 2: scale.", "Python": "# Step 2: scale."},
    "softcap": {"JavaScript": "Softcap squashes", "Python": "Softcap squashes"},
    "mask": {"JavaScript": "// Step 3: mask.", "Python": "# Step 3: mask."},
    "causal": {
        "JavaScript": "may look at keys j <= i + queryOffset only",
        "Python": "may look at keys j <= i + query_offset only",
    },
    "bool_mask": {"JavaScript": "cell === false", "Python": "True = may attend"},
    "float_mask": {"JavaScript": "a numeric mask is added", "Python": "a float mask is added"},
    "mask_broadcast": {"JavaScript": "maskOf(mask, at, Lq, Lk)", "Python": "True = may attend; broadcasts"},
    "sentinel": {
        "JavaScript": "never a sentinel like -1e9",
        "Python": "logits = np.where(allowed, logits, -np.inf)",
    },
    "softmax_max": {"JavaScript": "Math.exp(x - rowMax)", "Python": "shifted = logits - np.where"},
    "weights": {"JavaScript": "// Step 4: weights.", "Python": "# Step 4: weights."},
    "output": {"JavaScript": "// Step 5: output.", "Python": "# Step 5: output."},
    "fully_masked": {
        "JavaScript": "A fully-masked row's output is +0.0 by construction",
        "Python": "A fully-masked row's output is +0.0 by construction",
    },
    "gqa": {
        "JavaScript": (BATCHING_TS, "query head h reads key/value head"),
        "Python": "# Grouped-query attention",
    },
    "options": {"JavaScript": "readOptions<MaskInput>(options)", "Python": "= check_options("},
    "batch": {
        "JavaScript": "for (const at of slices(shapes",
        "Python": "scores = query @ np.swapaxes(key, -1, -2)",
    },
    "checks": {"JavaScript": "const shapes = checkShapes(", "Python": "shapes = check_shapes("},
    "lengths": {"JavaScript": "queryLength: Lq, keyLength: Lk", "Python": "# Step 1: scores."},
    "sink_logits": {"JavaScript": "const sinkShare =", "Python": "the sink's share"},
    # the key range's: the same words in both languages, but for the spelling of the names
    **{
        topic: {language: (KEY_RANGE[language], marker) for language, marker in markers.items()}
        for topic, markers in (
            ("window", {"JavaScript": "// keys j >= p - left", "Python": "# keys j >= p - left"}),
            (
                "sink_tokens",
                {"JavaScript": "sinkEnd: Math.min(sinkTokens", "Python": "sink_end=min(sink_tokens"},
            ),
            ("kv_seqlen", {"JavaScript": "const limit = kvSeqlen", "Python": "limit = lk if kv_seqlen"}),
            (
                "query_offset",
                {"JavaScript": "const offsets = perBatch(", "Python": "offsets = _per_batch(query_offset"},
            ),
        )
    },
    # the layer's lesson: its steps, the same words in both languages
    **{
        topic: {language: (file, marker) for language, file in LAYER_LESSONS.items()}
        for topic, marker in (
            ("projections", "Step 1: project"),
            ("rotation", "Step 3: rotate"),
            ("kv_cache", "The cache: the earlier keys"),
        )
    },
}


@cache
def _line_of(file: Path, marker: str) -> int | None:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    found = next((n for n, line in enumerate(lines) if marker in line), None)
    if found is None:
        return None
    for n in range(found, len(lines)):
        text = lines[n].strip()
        if text and not text.startswith(("//", "#", "*", "/*")):
            return n + 1
    return found + 1


def _shown(file: Path) -> str:
    """The file as a learner finds it: from the checkout's root, or where the package put it."""
    if IN_CHECKOUT and file.is_relative_to(REPO_ROOT):
        return str(file.relative_to(REPO_ROOT))
    return str(file)


def place(topic: str, language: str) -> str | None:
    """ "typescript/src/attention.ts line 125": where the lesson does `topic` right, or None."""
    marker = PLACES[topic][language]
    file, marker = marker if isinstance(marker, tuple) else (LESSONS[language], marker)
    return place_in(file, marker)


def place_in(file: Path, marker: str) -> str | None:
    """ "FILE line N": the line `marker` is on, or the code line its comment explains; None when
    the file or the marker is not there."""
    line = _line_of(file, marker)
    return None if line is None else f"{_shown(file)} line {line}"


def pointer(topic: str | None, language: str) -> str:
    """ " (the lesson does this at FILE line N)", or "" when there is nowhere to point."""
    where = None if topic is None else place(topic, language)
    return "" if where is None else f" (the lesson does it right at {where})"
