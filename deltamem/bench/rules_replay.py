"""`deltamem bench rules`: each fact rule measured, without a model call.

Two sources, either or both:

* the labelled cases (`deltamem/rules/cases.jsonl`): facts with the turn they were
  written from, each marked keep or refuse (and by which rule). Per rule: how often
  it fires on them, its precision (of its firings, how many refuse a fact that must
  be refused), and the must-refuse cases it is named for that it misses. A case
  that is kept wrongly or refused wrongly is listed.
* a finished run of `deltamem` (`deltamem bench halumem|locomo ... OUT`): the
  extractor's logged replies (OUT/llm_calls.jsonl) are fed back, in order, for the
  user turns of the sessions its store logged (OUT/systems/deltamem/deltamem.db),
  and every written fact goes through every fact rule (`check(..., trace=True)`).
  Per rule: how many facts it refuses (the first refusal decides), how many it
  would refuse (fires at all), and the ablation line: how many facts would be kept
  with that one rule off.

Where the run is a HaluMem run, `deltamem.bench.rules_state` turns the replayed facts
into each rule's ablation line in memory-state F1 (the bank against the gold points).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deltamem.embed import Embedder
from deltamem.llm.jsonrepair import close_truncated
from deltamem.manager.dates import dated
from deltamem.manager.extract import (
    introduced_name,
    name_in,
    news,
    reply_facts,
    turn_prompt,
)
from deltamem.rules import DEFAULT, RULES, RuleSettings, check, rules_for
from deltamem.text import stems_of

CASES = Path(__file__).resolve().parents[1] / "rules" / "cases.jsonl"


@dataclass
class CaseScore:
    fires: Counter[str] = field(default_factory=Counter)  # cases the rule fired on
    right: Counter[str] = field(default_factory=Counter)  # ... that must be refused
    named: Counter[str] = field(default_factory=Counter)  # must-refuse cases naming it
    missed: Counter[str] = field(default_factory=Counter)  # ... it did not refuse
    wrong: list[dict[str, Any]] = field(default_factory=list)  # cases decided wrongly
    cases: int = 0


def score_cases(path: Path = CASES) -> CaseScore:
    out = CaseScore()
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        out.cases += 1
        verdict = check(case["fact"], case["subject"], case["said"], case.get("before"), trace=True)
        refuse = case["expect"] == "refuse"
        for code in verdict.fired:
            out.fires[code] += 1
            out.right[code] += refuse
        if refuse and case.get("rule"):
            out.named[case["rule"]] += 1
            out.missed[case["rule"]] += case["rule"] not in verdict.fired
        if verdict.kept == refuse:
            out.wrong.append(
                {
                    "id": case["id"],
                    "expect": case["expect"],
                    "fact": case["fact"],
                    "got": verdict.refused.code if verdict.refused else "kept",
                }
            )
    return out


@dataclass
class RunScore:
    written: int = 0  # facts the extractor wrote
    kept: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # by the deciding rule
    fires: Counter[str] = field(default_factory=Counter)  # every rule that fired
    let_through: Counter[str] = field(default_factory=Counter)  # kept with the rule off
    rewrites: Counter[str] = field(default_factory=Counter)
    sessions: int = 0
    examples: dict[str, list[str]] = field(default_factory=dict)  # refused facts, a few a rule
    # every written fact with its turn and verdict (for labelling by hand)
    facts: list[dict[str, Any]] = field(default_factory=list)


def _parsed(reply: str) -> dict[str, Any]:
    try:
        value = json.loads(reply)
    except json.JSONDecodeError:
        value = close_truncated(reply)
    return value if isinstance(value, dict) else {"facts": []}


def logged_replies(run: Path) -> list[str]:
    """The extractor's successful replies, oldest first."""
    rows = (json.loads(x) for x in (run / "llm_calls.jsonl").read_text().splitlines() if x)
    return [r["reply"] for r in rows if r.get("purpose") == "extract" and r.get("ok", True)]


def replay_run(run: Path, examples: int = 3, embedder: Embedder | None = None) -> RunScore:
    from deltamem.embed import make_embedder
    from deltamem.memory import open_store

    store = open_store(run / "systems" / "deltamem" / "deltamem.db", embedder or make_embedder())
    replies = iter(logged_replies(run))
    out = RunScore()
    names: dict[str, str | None] = {}
    try:
        for session in store.list_sessions():
            out.sessions += 1
            msgs = session.messages
            own = [m.content for m in msgs if m.role == "user"]
            name = name_in(own) or introduced_name(own) or names.get(session.user_id)
            said_before: set[str] = set()
            for i, msg in enumerate(msgs):
                if msg.role != "user":
                    continue
                reply = next(replies, None)
                if reply is None:
                    raise ValueError(f"{run}: fewer logged extraction replies than user turns")
                asked = turn_prompt(session, i, name)
                kept_here: list[str] = []
                for written in reply_facts(_parsed(reply), asked.subject):
                    fact = dated(written, asked.dates)
                    _score(out, fact, asked, said_before, kept_here, examples, session.session_id)
                said_before |= stems_of(asked.said)
                if name is None and msg.name is None:
                    name = name_in(kept_here) or name
            names[session.user_id] = name
    finally:
        store.close()
    return out


def _verdict(
    fact: str, asked: Any, said_before: set[str], settings: RuleSettings
) -> tuple[str | None, list[str], list[str]]:
    """One fact through the fact rules and NOTHING_NEW under `settings`: the fact as
    kept (None: refused), every rule that fired, and the rewrites."""
    before = asked.before.content if asked.before else None
    verdict = check(
        fact,
        asked.subject,
        asked.said,
        before,
        settings=settings,
        language=asked.language,
        trace=True,
    )
    fired = list(verdict.fired)
    if (
        verdict.kept
        and settings.on("NOTHING_NEW")
        and not news(verdict.fact, asked.subject, said_before)
    ):
        fired.append("NOTHING_NEW")
    rewrites = [r.code for r in verdict.rewrites]
    return (None if fired else verdict.fact), fired, rewrites


def _score(
    out: RunScore,
    fact: str,
    asked: Any,
    said_before: set[str],
    kept_here: list[str],
    examples: int,
    session_id: str,
) -> None:
    kept_as, fired, rewrites = _verdict(fact, asked, said_before, DEFAULT)
    # the fact with each rule that touched it switched off (an untouched rule changes
    # nothing): exact, since a rewrite changes what the later rules read
    if_off = {
        code: _verdict(fact, asked, said_before, DEFAULT.without(code))[0]
        for code in dict.fromkeys([*fired, *rewrites])
    }
    out.written += 1
    out.facts.append(
        {
            "session": session_id,
            "fact": kept_as or fact,
            "written": fact,
            "subject": asked.subject,
            "said": asked.said,
            "before": asked.before.content if asked.before else None,
            "language": asked.language,
            "refused": fired[0] if fired else None,
            "fired": fired,
            "kept_as": kept_as,
            "kept_if_off": if_off,
        }
    )
    for code in rewrites:
        out.rewrites[code] += 1
    for code in fired:
        out.fires[code] += 1
    if kept_as is not None:
        out.kept += 1
        kept_here.append(kept_as)
        return
    first = fired[0]
    out.refused[first] += 1
    shown = out.examples.setdefault(first, [])
    if len(shown) < examples:
        shown.append(f"{fact}  <=  {asked.said[:160]}")
    out.let_through[first] += if_off[first] is not None


def rules_table(cases: CaseScore, runs: dict[str, RunScore]) -> str:
    """Markdown: per rule, its stage, languages, labelled-case figures and each run's
    fire rate and ablation line."""
    head = "| rule | languages | cases: fires / right / precision | named: missed |"
    sep = "|---|---|---|---|"
    for name in runs:
        head += f" {name}: refuses / fires / let through if off |"
        sep += "---|"
    lines = [head, sep]
    for rule in [*rules_for("fact"), RULES["NOTHING_NEW"]]:
        code = rule.code
        langs = ",".join(sorted(rule.languages)) if rule.languages else "any"
        fires, right = cases.fires[code], cases.right[code]
        precision = f"{right / fires:.2f}" if fires else "–"
        named = f"{cases.missed[code]} of {cases.named[code]}" if cases.named[code] else "–"
        row = f"| `{code}` | {langs} | {fires} / {right} / {precision} | {named} |"
        for score in runs.values():
            share = score.refused[code] / max(1, score.written)
            row += (
                f" {score.refused[code]} ({share:.1%}) / {score.fires[code]} / "
                f"{score.let_through[code]}"
            )
            if rule.effect == "rewrite":
                row += f"; rewrites {score.rewrites[code]}"
            row += " |"
        lines.append(row)
    return "\n".join(lines)
