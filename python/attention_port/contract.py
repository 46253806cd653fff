"""The contract as data: the files of contract/ (at the top of the checkout, shipped in the wheel).

What both languages must agree on is declared there once, as JSON: the options, the words of the
two spellings, the check levels, the port table and the learner protocol. Python reads the files
through `load`; what TypeScript and the docs need is generated from them by
`attention-port contract` (attention_port/pages/generated.py) and held fresh by a test.
"""

from __future__ import annotations

import functools
import json

from attention_port.paths import CONTRACT


@functools.cache
def load(name: str) -> dict:
    """contract/<name>.json, parsed once per process."""
    return json.loads((CONTRACT / f"{name}.json").read_text(encoding="utf-8"))
