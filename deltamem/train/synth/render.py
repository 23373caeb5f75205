"""The synthesis prompts: templates in prompts/*.txt, filled from the pipeline's
state. Every function returns the chat messages of one call."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from string import Template

from deltamem.llm.base import ChatMessage
from deltamem.text import clip
from deltamem.train.synth.checks import Required
from deltamem.train.synth.schemas import Change, Event, Profile

PROMPTS = Path(__file__).parent / "prompts"


@cache
def template(name: str) -> Template:
    return Template((PROMPTS / name).read_text(encoding="utf-8"))


def _messages(prompt: str, /, **fields: object) -> list[ChatMessage]:
    return [
        {"role": "system", "content": template("system.txt").substitute()},
        {"role": "user", "content": template(prompt).substitute(**fields).strip()},
    ]


def profile_text(p: Profile) -> str:
    parts = [
        f"{p.name}, {p.age}, {p.gender}".rstrip(", "),
        f"lives in {p.location}" if p.location else "",
        f"works as {p.occupation}" if p.occupation else "",
        f"education: {p.education}" if p.education else "",
        f"personality: {p.personality}" if p.personality else "",
    ]
    head = "; ".join(x for x in parts if x)
    return f"{head}.\n{p.summary}".strip()


def lines(items: Sequence[str], empty: str = "(nothing yet)") -> str:
    return "\n".join(f"- {x}" for x in items) if items else empty


def _change_line(c: Change) -> str:
    if c.change == "new":
        return f"- {c.area}, new: {c.after}"
    return f"- {c.area}, {c.change}: {c.before!r} becomes {c.after!r}"


def profile_prompt(seed: str, n_facts: int) -> list[ChatMessage]:
    return _messages("profile.txt", seed=seed, n_facts=n_facts)


def events_prompt(
    profile: Profile,
    state: Sequence[str],
    earlier: Sequence[Event],
    *,
    after: dt.date,
    count: int,
    span_days: int,
) -> list[ChatMessage]:
    past = [f"{e.date}: {e.title}" for e in earlier]
    return _messages(
        "events.txt",
        name=profile.name,
        profile=profile_text(profile),
        state=lines(state),
        earlier=lines(past, "(none: these are the first)"),
        after=after.isoformat(),
        count=count,
        span_days=span_days,
    )


def anchor_prompt(profile: Profile, events: Sequence[Event], max_steps: int) -> list[ChatMessage]:
    numbered = "\n".join(
        f"{n}. {e.date}: {e.title}. {e.narrative}" for n, e in enumerate(events, 1)
    )
    return _messages(
        "anchor.txt",
        name=profile.name,
        profile=profile_text(profile),
        events=numbered,
        max_steps=max_steps,
    )


def ops_prompt(
    profile: Profile,
    state: Sequence[str],
    event: Event,
    *,
    anchor: str | None,
    fill: int,
    nones: int,
    distractors: int,
) -> list[ChatMessage]:
    planned = "\n".join(_change_line(c) for c in event.changes) or "(none)"
    note = (
        f"This memory is already written for the event; do not repeat it: {anchor}\n"
        if anchor
        else ""
    )
    return _messages(
        "operations.txt",
        name=profile.name,
        profile=profile_text(profile),
        state=lines(state, "(empty)"),
        date=event.date.isoformat(),
        title=event.title,
        narrative=event.narrative,
        changes=planned,
        anchor=note,
        fill=fill,
        nones=nones if state else 0,
        distractors=distractors,
    )


def _fact_line(f: Required) -> str:
    kws = "; ".join(f.keywords)
    if f.kind == "update":
        return f"{f.id}: {f.text} [{kws}] (this changes: {f.before})"
    if f.kind == "none":
        return f"{f.id}: {f.text} [{kws}] (already known; mention it again)"
    return f"{f.id}: {f.text} [{kws}]"


def dialogue_prompt(
    profile: Profile,
    *,
    date: dt.date,
    title: str,
    narrative: str,
    facts: Sequence[Required],
    distractors: Sequence[Required],
    turns: tuple[int, int],
) -> list[ChatMessage]:
    if distractors:
        block = (
            "Things the assistant brings up that are NOT true (each has an id; keywords in "
            "brackets):\n"
            + "\n".join(f"{d.id}: {d.text} [{'; '.join(d.keywords)}]" for d in distractors)
            + "\n"
        )
        rule = (
            "- The assistant mentions each of those untrue things once, as a guess or a "
            "suggestion, using its keywords; the user lets it pass and never repeats or "
            "confirms it.\n"
        )
        dmap = ', and in "distractors" which turn\'s assistant message mentions each untrue thing'
        example = ', "distractors": [{"id": "D1", "turn": 2}]'
    else:
        block = rule = dmap = example = ""
    return _messages(
        "dialogue.txt",
        name=profile.name,
        profile=profile_text(profile),
        date=date.isoformat(),
        lo=turns[0],
        hi=turns[1],
        title=title,
        narrative=narrative,
        facts="\n".join(_fact_line(f) for f in facts),
        distractor_block=block,
        distractor_rule=rule,
        distractor_map=dmap,
        distractor_example=example,
    )


def turn_prompt(
    profile: Profile,
    *,
    date: dt.date,
    title: str,
    narrative: str,
    fact: Required,
    distractor: Required | None,
    so_far: Sequence[tuple[str, str]],
) -> list[ChatMessage]:
    """One exchange of a dialogue written a fact at a time: the user's message that
    says `fact`, after the last exchanges `so_far` (user, assistant)."""
    name = profile.first_name
    recent = "".join(f"{name}: {clip(u, 300)}\nAssistant: {clip(a, 300)}\n" for u, a in so_far)
    change = ""
    if fact.kind == "update" and fact.before:
        change = f"This changes what {name} said before: {fact.before}\n"
    elif fact.kind == "none":
        change = f"{name} has told the assistant this before and mentions it again.\n"
    rule = ""
    if distractor is not None:
        rule = (
            f"- In its reply the assistant also guesses something that is NOT true: "
            f"{distractor.text} It uses these words: {'; '.join(distractor.keywords)}. "
            f"{name} does not say or confirm it.\n"
        )
    return _messages(
        "turn.txt",
        name=name,
        profile=profile_text(profile),
        date=date.isoformat(),
        title=title,
        narrative=narrative,
        so_far=f"\nThe conversation so far (its last exchanges):\n{recent}" if recent else "",
        fact=fact.text,
        change=change,
        keywords="; ".join(fact.keywords),
        distractor_rule=rule,
    )


def questions_prompt(
    profile: Profile,
    *,
    state: Sequence[str],
    former: Sequence[str],
    date: dt.date,
    title: str,
    count: int,
) -> list[ChatMessage]:
    memories = [*state, *(f"(earlier) {m}" for m in former)]
    return _messages(
        "questions.txt",
        name=profile.name,
        memories=lines(memories),
        date=date.isoformat(),
        title=title,
        count=count,
    )
