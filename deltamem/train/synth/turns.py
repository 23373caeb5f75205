"""A session's dialogue written a fact at a time (`SynthConfig.dialogue="turns"`).

Asked for a whole conversation that carries five facts, the embedded 1.5B model
writes small talk in which the facts' keywords are never said (docs/journal/benchmarks.md,
`deltamem synth`). Here each fact gets its own call: the user's message that says
it and the assistant's reply, after the last two exchanges. A distractor goes into
the reply of the exchange with the same number. Each exchange is checked on its
own (`check_turn`: the fact's keywords, in the user's first person) and the
dialogue so far as a whole (`check_dialogue`), so the
result passes the same checks as a dialogue written in one call.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

from deltamem.llm.base import ChatMessage
from deltamem.train.distance import keyword_in
from deltamem.train.synth import render
from deltamem.train.synth.checks import Required, check_dialogue, check_turn
from deltamem.train.synth.data import Parse
from deltamem.train.synth.repair import mend_turn
from deltamem.train.synth.schemas import (
    TURN_SCHEMA,
    DialogueReply,
    DialogueTurn,
    Placement,
    Profile,
)

# (key, messages, schema, parse) -> the kept value, or None when the step was dropped
StepFn = Callable[[str, list[ChatMessage], dict[str, Any], Parse], dict[str, Any] | None]
CONTEXT_TURNS = 2  # earlier exchanges shown to the next one


def dialogue_by_turns(
    step: StepFn,
    session: int,
    profile: Profile,
    *,
    date: dt.date,
    title: str,
    narrative: str,
    facts: Sequence[Required],
    distractors: Sequence[Required],
    known: Sequence[str],
) -> dict[str, Any] | None:
    """{"turns", "coverage", "distractors"} as the one-call dialogue step keeps them,
    or None when an exchange was dropped (the session is then not kept)."""
    fresh = {
        f.id: [k for k in f.keywords if not any(keyword_in(k, s) for s in known)]
        for f in facts
        if f.kind != "none"
    }
    turns: list[DialogueTurn] = []
    last: dict[str, Any] = {}
    for j, fact in enumerate(facts):
        later = [k for g in facts[j + 1 :] for k in fresh.get(g.id, [])]
        aside = distractors[j] if j < len(distractors) else None
        final = j == len(facts) - 1

        def parse(
            raw: dict[str, Any],
            j: int = j,
            fact: Required = fact,
            later: list[str] = later,
            final: bool = final,
        ) -> tuple[dict[str, Any], list[str]]:
            turn = mend_turn(DialogueTurn.model_validate(raw), profile.name)
            check_turn(turn, fact=fact, later=later)
            so_far = [*turns, turn]
            reply = DialogueReply(
                turns=so_far,
                facts=[Placement(id=f.id, turn=n) for n, f in enumerate(facts[: j + 1], 1)],
                distractors=[
                    Placement(id=d.id, turn=n) for n, d in enumerate(distractors[: j + 1], 1)
                ],
            )
            n = len(so_far)
            coverage, placed, pruned = check_dialogue(
                reply, facts=facts[: j + 1], distractors=distractors, known=known, turns=(n, n)
            )
            value = {**turn.model_dump(), "coverage": coverage, "distractors": placed}
            # a distractor pruned now is pruned again at every later exchange: log it once
            return value, pruned if final else []

        got = step(
            f"turn:{session}:{j + 1}",
            render.turn_prompt(
                profile,
                date=date,
                title=title,
                narrative=narrative,
                fact=fact,
                distractor=aside,
                so_far=[(t.user, t.assistant) for t in turns[-CONTEXT_TURNS:]],
            ),
            TURN_SCHEMA,
            parse,
        )
        if got is None:
            return None
        turns.append(DialogueTurn(user=got["user"], assistant=got["assistant"]))
        last = got
    if not turns:
        return None
    return {
        "turns": [t.model_dump() for t in turns],
        "coverage": last["coverage"],
        "distractors": last["distractors"],
    }
