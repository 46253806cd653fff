"""docs/conformance.md: the peers through the conformance kit, per contract rule.

scripts/conformance runs typescript/conformance/peers.ts, which puts each peer (onnxruntime-node,
onnxruntime-web, tfjs) through the kit on every valid fixture case and writes their verdicts to a
JSON file; `attention-port conformance-page --results FILE` turns that file into the page. A rule
of the contract (cases.CONTRACT) is broken by a peer when a case fails whose most specific rule it
is (of the rules whose tags the case carries, the one with the most tags), and kept otherwise: so
each failure is counted once, under the rule it says most about, and the page names the case and
says what the peer gave. A case outside the contract in the peer's dtype counts for nothing, and so
does one the peer cannot express (an option it has no parameter for: the page says which). Some
rules are conventions, the project's and torch's, where plain arithmetic gives another answer; the
page says so beside them.
"""

from __future__ import annotations

import json
from pathlib import Path

from attention_port.files import write_atomic
from attention_port.golden.cases import CONTRACT, Rule
from attention_port.golden.reader import FixtureCase

# The rules where the contract picks one answer among defensible ones: a peer that gives the other
# one follows plain arithmetic or its own convention, and is not wrong for it.
CONVENTIONS = {
    "fully-masked-zero": "a convention, ours and torch's: plain softmax of an all -inf row is 0/0, NaN",
    "no-keys-zero": "a convention, ours and torch's: with no key there is nothing to average",
    "fully-masked-special-value": "a convention, ours and torch's: the weights are all 0, and 0 · NaN is NaN",
    "bool-mask-over-nan": "a convention, ours: a masked key is left out whatever its score",
    "causal-over-nan": "a convention, ours: a key after the query is left out whatever its score",
    "scale-given": "the contract takes any finite scale; a peer may refuse 0 or a negative one",
}
# The rules the page leaves out: invalid input (the peers take typed tensors, so an adapter, not
# the peer, would refuse ragged arrays) and score overflow (outside the contract by definition).
LEFT_OUT = ("error", "outside_contract")
PROBLEM_CHARACTERS = 140
VERDICTS = ("pass", "fail", "outside", "not expressible")
# The case groups of the options a peer may have no parameter for, each with its tag.
GROUPS = (("window", "sliding windows"), ("sinks", "attention sinks"), ("ragged", "ragged batches"))
# Each engine's convention for those options, in the contract's words (docs/design.md): what the
# peers' adapter (typescript/conformance/peers.ts) passes, and what it cannot.
ENGINE_CONVENTIONS = (
    ("ONNX Attention (opset 23, 24)", "`nonpad_kv_seqlen` [B] (opset 24)",
     "a count of valid keys per sequence: keys j >= nonpad_kv_seqlen[b] hidden, the contract's"
     " `kv_seqlen` as it is. With is_causal its rows are each sequence's last: `query_offset` ="
     " nonpad_kv_seqlen - Lq. No window, no sinks."),
    ("ONNX Attention (opset 23, 24)", "`past_key` [B, H, P, E]",
     "P keys before the new ones: its causal mask starts after them, the contract's `query_offset`"
     " P (one for the whole batch, at most Lk); without either input the mask is aligned top-left."),
    ("onnxruntime GroupQueryAttention (com.microsoft)", "`local_window_size`",
     "w keys ending at the row's own: the contract's window (w - 1, 0); -1 (its default): no window."
     " Always causal, so a window that is not causal has no parameter."),
    ("onnxruntime GroupQueryAttention (com.microsoft)", "`seqlens_k` [B]",
     "the index of sequence b's last valid key: the contract's `kv_seqlen` - 1, not a count. Its Lq"
     " rows are each sequence's last, at positions seqlens_k + 1 - Lq ..: the contract's per-sequence"
     " `query_offset` = kv_seqlen - Lq, and no other."),
    ("onnxruntime GroupQueryAttention (com.microsoft)", "`head_sink` [Hq]",
     "one logit per query head added to the softmax's denominator, with no value: the contract's"
     " `sink_logits`. No sink tokens: `sink_tokens` > 0 has no parameter in either ONNX operator."),
    ("tfjs", "none",
     "no attention operator: the adapter composes every option, one boolean mask of the keys the"
     " contract lets each row see and the sink logit as one more softmax column without a value."),
)  # fmt: skip


def rule_cases(rule: Rule, cases: list[FixtureCase]) -> list[str]:
    """The ids of the valid cases that carry every one of the rule's tags."""
    return [c.id for c in cases if not c.expects_error and set(rule.tags) <= set(c.tags)]


def _short(problem: str | None) -> str:
    """A peer's problem in one short line: onnxruntime's errors quote the source file and the
    failed check before what they mean ("... scale_ > 0 was false. scale must be greater than 0")."""
    text = " ".join((problem or "failed").split())
    if text.startswith("threw ") and " was false. " in text:
        text = "threw: " + text.rsplit(" was false. ", 1)[1]
    return text if len(text) <= PROBLEM_CHARACTERS else text[: PROBLEM_CHARACTERS - 1] + "…"


def most_specific(case_id: str, rules: list[Rule], cases: list[FixtureCase]) -> Rule | None:
    """The rule a failing case says most about: of the rules it carries the tags of, the one with
    the most tags, then the fewest cases (a fully-masked case fails the fully-masked rule, not
    "Step 1: scores")."""
    mine = [r for r in rules if case_id in rule_cases(r, cases)]
    return min(mine, key=lambda r: (-len(r.tags), len(rule_cases(r, cases))), default=None)


def rule_verdict(rule: Rule, rules: list[Rule], cases: list[FixtureCase], verdicts: dict[str, dict]):
    """ "keeps", "breaks", "outside" (every case outside the peer's dtype) or "not expressible"
    (every case the peer could be given carries an option it has no parameter for), and the
    failures the rule is the most specific one for."""
    judged = [verdicts[i] for i in rule_cases(rule, cases) if i in verdicts]
    failed = [
        v for v in judged if v["verdict"] == "fail" and most_specific(v["caseId"], rules, cases) == rule
    ]
    if failed:
        return "breaks", failed
    if judged and all(v["verdict"] == "outside" for v in judged):
        return "outside", []
    if judged and all(v["verdict"] in ("outside", "not expressible") for v in judged):
        return "not expressible", []
    return "keeps", []


def _peer_table_head(first: str, peers: list[dict]) -> list[str]:
    """A table's head: `first`, the case count, then one column per peer and dtype."""
    column = [f"{p['name']} ({p['dtype']})" for p in peers]
    return [f"| {first} | cases | " + " | ".join(column) + " |", "|---|---:|" + "---|" * len(peers)]


def group_lines(peers: list[dict], cases: list[FixtureCase]) -> list[str]:
    """The peers on each group of the options a peer may not have: pass / fail / not expressible
    per peer (outside, where any, in the cell too), and each peer's reasons."""
    lines = [
        "## Windows, sinks and ragged batches",
        "",
        "Each peer on the cases of each group: passed / failed / not expressible (and outside its",
        "dtype, where any). *Not expressible*: the case has an option the peer has no parameter for;",
        "it was not run, and counts neither way.",
        "",
        *_peer_table_head("group", peers),
    ]
    valid = [c for c in cases if not c.expects_error]
    for tag, words in GROUPS:
        ids = {c.id for c in valid if tag in c.tags}
        cells = []
        for peer in peers:
            counts = {
                k: sum(v["verdict"] == k and v["caseId"] in ids for v in peer["verdicts"]) for k in VERDICTS
            }
            cell = f"{counts['pass']} / {counts['fail']} / {counts['not expressible']}"
            cells.append(cell + (f" ({counts['outside']} outside)" if counts["outside"] else ""))
        lines.append(f"| {words} (`{tag}`) | {len(ids)} | " + " | ".join(cells) + " |")
    lines += ["", "Why a case is not expressible, per peer (each reason once, with the cases it covers):", ""]
    for peer in peers:
        reasons: dict[str, list[str]] = {}
        for v in peer["verdicts"]:
            if v["verdict"] == "not expressible":
                reasons.setdefault(v["problem"] or "", []).append(v["caseId"])
        if not reasons:
            lines.append(f"- {peer['name']} ({peer['dtype']}): every case is expressible.")
            continue
        for reason, ids in reasons.items():
            shown = ", ".join(f"`{i}`" for i in ids[:3]) + (
                f" and {len(ids) - 3} more" if len(ids) > 3 else ""
            )
            count = f"{len(ids)} case{'s' if len(ids) > 1 else ''}"
            lines.append(f"- {peer['name']} ({peer['dtype']}), {count} ({shown}): {_short(reason)}")
    lines += [
        "",
        "### Each engine's convention, in the contract's words",
        "",
        "| engine | parameter | what it attends to |",
        "|---|---|---|",
        *(f"| {engine} | {parameter} | {meaning} |" for engine, parameter, meaning in ENGINE_CONVENTIONS),
        "",
    ]
    return lines


def conformance_page(results: dict, cases: list[FixtureCase]) -> str:
    """The page, from peers.ts's results and the fixture cases they were run on."""
    peers = results["peers"]
    rules = [r for r in CONTRACT if not set(r.tags) & set(LEFT_OUT) and rule_cases(r, cases)]
    lines = [
        "# The peers through the conformance kit",
        "",
        "What a JavaScript engineer would pick instead of this project's ports, run on every valid",
        "fixture case through the conformance kit (`attention-port/conformance`) and judged by its rule",
        "in the dtype each peer computes in. Reproduce it with `scripts/conformance` (it installs the",
        "peers on first use, into typescript/bench-peers/node_modules). The contract is this project's",
        "(docs/design.md): where a peer gives another answer, the page says what it gave and, where the",
        "rule is a convention rather than arithmetic, says that too.",
        "",
        "| peer | version | dtype | what runs | pass | fail | outside | not expressible | seconds |",
        "|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for peer in peers:
        counts = {k: sum(v["verdict"] == k for v in peer["verdicts"]) for k in VERDICTS}
        lines.append(
            f"| {peer['name']} | {peer['version']} | {peer['dtype']} | {peer['about']} | {counts['pass']}"
            f" | {counts['fail']} | {counts['outside']} | {counts['not expressible']}"
            f" | {peer['seconds']:.1f} |"
        )
    lines += [
        "",
        "*outside*: a case whose inputs or scores the peer's dtype cannot hold, where the contract",
        "defines no answer. *not expressible*: a case with an option the peer has no parameter for",
        "(below, with the reasons). The invalid-input cases are not run: the peers take typed tensors,",
        "so the adapter would refuse a ragged array or a string before the peer saw it.",
        "",
        *group_lines(peers, cases),
        "## Rule by rule",
        "",
        "A failing case is counted once, under the most specific rule whose tags it carries.",
        "",
        *_peer_table_head("rule", peers),
    ]
    by_peer = [{v["caseId"]: v for v in peer["verdicts"]} for peer in peers]
    details: list[list[str]] = [[] for _ in peers]
    for rule in rules:
        ids = rule_cases(rule, cases)
        cells = []
        for n, verdicts in enumerate(by_peer):
            word, failed = rule_verdict(rule, rules, cases, verdicts)
            if word == "breaks":
                first = failed[0]
                cells.append(f"breaks ({len(failed)}): `{first['caseId']}`")
                note = CONVENTIONS.get(rule.id)
                text = f"- **{rule.text}** ({len(failed)} of {len(ids)} cases): `{first['caseId']}`:"
                text += f" {_short(first['problem'])}"
                details[n].append(text + (f". *{note[0].upper()}{note[1:]}.*" if note else ""))
            else:
                cells.append(word)
        lines.append(f"| {rule.text} | {len(ids)} | " + " | ".join(cells) + " |")
    # A failing case that carries the tags of no rule above (an empty head dim, say) still counts.
    named = {i for rule in rules for i in rule_cases(rule, cases)}
    cells = []
    for n, verdicts in enumerate(by_peer):
        others = [v for v in verdicts.values() if v["verdict"] == "fail" and v["caseId"] not in named]
        cells.append(f"breaks ({len(others)}): `{others[0]['caseId']}`" if others else "keeps")
        details[n] += [
            f"- **a case no rule above names**: `{v['caseId']}`: {_short(v['problem'])}" for v in others
        ]
    lines.append(
        "| any other case | "
        + str(len([c for c in cases if not c.expects_error and c.id not in named]))
        + " | "
        + " | ".join(cells)
        + " |"
    )
    for peer, found in zip(peers, details, strict=True):
        lines += ["", f"## {peer['name']} ({peer['dtype']}): the rules it breaks", ""]
        lines += found or ["None: every rule with a case in its dtype is kept."]
    lines += [
        "",
        f"Node {results['node']}. Each peer runs in a child process of its own, restarted after a",
        "case that ends it (a native crash is reported as such). The ONNX graph is one Attention",
        "node (opset 23, or 24 for nonpad_kv_seqlen) or one GroupQueryAttention node (com.microsoft)",
        "for a window, sink logits or a causal query offset, built by typescript/conformance/peers.ts;",
        "tfjs has no attention operator,",
        "so its column is the textbook composition of tfjs's matMul, softmax and where.",
        "onnxruntime-node has no float16 column: its binding refuses every float16 tensor from",
        "JavaScript (`not enough space: expected 24, got 0` for 12 values), whatever the case.",
        "onnxruntime-web's WebGPU backend has no column either: in headless Chromium (SwiftShader",
        'adapter) onnxruntime-web 1.30.0 has no WebGPU kernel for the Attention operator ("webgpu',
        'kernel not found in registries for Op type: Attention") and places the node on its CPU',
        "provider, so the column would be the WebAssembly one again.",
        "",
    ]
    return "\n".join(lines)


def command_conformance_page(results_path: Path, out: Path, cases: list[FixtureCase]) -> int:
    results = json.loads(Path(results_path).read_text(encoding="utf-8"))
    write_atomic(out, conformance_page(results, cases))
    print(f"wrote {out}")
    return 0
