"""docs/design.md's list of the contract's rules ("The rules, one by one"), rendered from the case
table's CONTRACT (python/attention_port/golden/cases.py) for `attention-port contract`
(pages/generated.py): each rule's id, its sentence and the tags of a case that exercises it.
"""

from __future__ import annotations

from attention_port.golden.cases import CONTRACT

SOURCE = "python/attention_port/golden/cases.py"


def design_rules() -> list[str]:
    """The lines of the rules' table, in CONTRACT's order."""
    rows = ["| id | rule | a case exercising it carries |", "| --- | --- | --- |"]
    for rule in CONTRACT:
        tags = ", ".join(f"`{tag}`" for tag in rule.tags)
        rows.append(f"| `{rule.id}` | {rule.text.replace('|', chr(92) + '|')} | {tags} |")
    return rows
