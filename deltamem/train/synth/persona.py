"""One persona's walk through the steps (see pipeline.py), holding its memory state:
what the state is before each event, which anchor version is live, which memory
versions were replaced (question evidence may quote them)."""

from __future__ import annotations

import datetime as dt
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel

from deltamem.bench.progress import Progress, tick
from deltamem.llm.base import ChatMessage
from deltamem.train.synth import render
from deltamem.train.synth.cache import Cache, Entry
from deltamem.train.synth.checks import (
    Required,
    check_anchor,
    check_dialogue,
    check_events,
    check_ops,
    check_profile,
    check_questions,
    find_in,
    turn_range,
)
from deltamem.train.synth.data import (
    Parse,
    PersonaResult,
    SessionResult,
    SynthConfig,
    apply_ops,
)
from deltamem.train.synth.repair import mend_anchor, mend_ops, mend_profile
from deltamem.train.synth.schemas import (
    PROFILE_SCHEMA,
    AnchorReply,
    AnchorStep,
    DialogueReply,
    DialogueTurn,
    Distractor,
    Event,
    EventsReply,
    Op,
    OpsReply,
    ProfileReply,
    Question,
    QuestionsReply,
    anchor_schema,
    dialogue_schema,
    events_schema,
    ops_schema,
    questions_schema,
)
from deltamem.train.synth.turns import dialogue_by_turns


class Steps(Protocol):
    """What a persona's walk needs of the pipeline (`pipeline.Synthesizer`): its
    settings, where caches go, progress, and one step (generate, check,
    regenerate, keep or drop)."""

    config: SynthConfig
    cache_dir: Path
    progress: Progress | None

    def step(
        self,
        cache: Cache,
        key: str,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        parse: Parse,
    ) -> Entry: ...


INTRO_TITLE = "First conversation"


class PersonaRun:
    """The walk through one persona's steps, holding its memory state."""

    def __init__(self, synth: Steps, pid: str, seed: str) -> None:
        self.s, self.cfg = synth, synth.config
        self.cache = Cache(synth.cache_dir / f"{pid}.jsonl")
        self.result = PersonaResult(pid, seed, planned=1 + self.cfg.events)
        self.state: list[str] = []
        self.former: list[str] = []  # versions replaced by updates
        self.types: dict[str, str] = {}
        self.anchor_live: str | None = None  # the anchor memory's version in the state

    def step(
        self, key: str, messages: list[ChatMessage], schema: dict[str, Any], parse: Parse
    ) -> dict[str, Any] | None:
        entry = self.s.step(self.cache, key, messages, schema, parse)
        if not entry.ok:
            self.result.drops.append((key, entry.reason or ""))
        return entry.value if entry.ok else None

    def skip(self, n: int, key: str, reason: str) -> None:
        for _ in range(n):
            tick(self.s.progress, "sessions")
        if n:
            self.result.drops.append((key, reason))

    def run(self) -> PersonaResult:
        got = self.step(
            "profile",
            render.profile_prompt(self.result.seed, self.cfg.initial_facts),
            PROFILE_SCHEMA,
            lambda raw: (_dump(check_profile(mend_profile(ProfileReply.model_validate(raw)))), []),
        )
        if got is None:
            self.skip(self.result.planned, "profile", "no profile")
            return self.result
        reply = ProfileReply.model_validate(got)
        self.profile = self.result.profile = reply.profile
        intro = [
            Op(
                op="add",
                type="relationship" if f.area == "relationship" else "persona",
                memory=f.content,
                keywords=f.keywords,
            )
            for f in reply.facts
        ]
        narrative = (
            f"{self.profile.name} starts using a personal AI assistant and tells it about "
            "their work, health, the people in their life and what they like."
        )
        self.session(0, reply.start_date, INTRO_TITLE, narrative, intro, [])
        events = self.events(reply.start_date, [f.content for f in reply.facts])
        anchor = self.anchor(events) if len(events) >= 2 else {}
        for i, event in enumerate(events, 1):
            self.event(i, event, anchor.get(i))
        return self.result

    def events(self, start: dt.date, facts: list[str]) -> list[Event]:
        events: list[Event] = []
        pool, after = list(facts), start
        while len(events) < self.cfg.events:
            b = len(events) // self.cfg.batch
            count = min(self.cfg.batch, self.cfg.events - len(events))
            first = len(events) + 1

            def parse(
                raw: dict[str, Any],
                pool: list[str] = pool,
                after: dt.date = after,
                count: int = count,
                first: int = first,
            ) -> tuple[dict[str, Any], list[str]]:
                kept, pruned, _ = check_events(
                    EventsReply.model_validate(raw),
                    after=after,
                    facts=pool,
                    count=count,
                    first_number=first,
                )
                return EventsReply(events=kept).model_dump(mode="json"), pruned

            prompt = render.events_prompt(
                self.profile, pool, events, after=after, count=count, span_days=self.cfg.span_days
            )
            got = self.step(f"events:{b}", prompt, events_schema(count), parse)
            if got is None:
                missing = self.cfg.events - len(events)
                self.skip(missing, f"events:{b}", f"{missing} event(s) never generated")
                break
            batch = EventsReply.model_validate(got).events
            _, _, pool = check_events(
                EventsReply(events=batch),
                after=after,
                facts=pool,
                count=len(batch),
                first_number=first,
            )
            events += batch
            after = batch[-1].date
        return events

    def anchor(self, events: list[Event]) -> dict[int, AnchorStep]:
        first = self.profile.first_name
        got = self.step(
            "anchor",
            render.anchor_prompt(self.profile, events, self.cfg.anchor_steps),
            anchor_schema(len(events)),
            lambda raw: (
                check_anchor(
                    mend_anchor(AnchorReply.model_validate(raw), first),
                    n_events=len(events),
                    first_name=first,
                ).model_dump(mode="json"),
                [],
            ),
        )
        if got is None:
            return {}
        return {s.event: s for s in AnchorReply.model_validate(got).thread}

    def event(self, i: int, event: Event, anchor: AnchorStep | None) -> None:
        state, first = list(self.state), self.profile.first_name
        got = self.step(
            f"ops:{i}",
            render.ops_prompt(
                self.profile,
                state,
                event,
                anchor=anchor.memory if anchor else None,
                fill=self.cfg.fill,
                nones=self.cfg.nones,
                distractors=self.cfg.distractors,
            ),
            ops_schema(state),
            lambda raw: _checked_ops(raw, state, first),
        )
        if got is None:
            tick(self.s.progress, "sessions")
            return
        reply = OpsReply.model_validate(got)
        ops = list(reply.operations)
        written = [*state, *(o.memory for o in ops)]
        if anchor is not None and find_in(anchor.memory, written) is None:
            changed = {o.replaces for o in ops if o.op == "update"}
            prev = self.anchor_live
            prev = prev if prev in state and prev not in changed else None
            ops.append(
                Op(
                    op="update" if prev else "add",
                    type="event",
                    memory=anchor.memory,
                    replaces=prev or "",
                    keywords=anchor.keywords,
                )
            )
        kept = self.session(i, event.date, event.title, event.narrative, ops, reply.distractors)
        if kept and anchor is not None and anchor.memory in self.state:
            self.anchor_live = anchor.memory

    def session(
        self,
        i: int,
        date: dt.date,
        title: str,
        narrative: str,
        ops: list[Op],
        distractors: list[Distractor],
    ) -> bool:
        """The dialogue (and questions) of a session; whether it was kept."""
        tick(self.s.progress, "sessions")
        facts = [
            Required(f"F{j}", o.memory, tuple(o.keywords), o.op, o.replaces or None)
            for j, o in enumerate(ops, 1)
        ]
        dists = [
            Required(f"D{j}", d.memory, tuple(d.keywords), "distractor")
            for j, d in enumerate(distractors, 1)
        ]
        write = (
            partial(dialogue_by_turns, self.step, i, self.profile)
            if self.cfg.dialogue == "turns"
            else partial(self.whole_dialogue, i)
        )
        got = write(
            date=date,
            title=title,
            narrative=narrative,
            facts=facts,
            distractors=dists,
            known=list(self.state),
        )
        if got is None:
            return False
        before = self.state
        self.state = apply_ops(before, ops)
        self.former += [o.replaces for o in ops if o.op == "update"]
        for o in ops:
            self.types.setdefault(o.memory, o.type)
        placed: dict[str, int] = got["distractors"]
        kept = [(f"D{j}", d) for j, d in enumerate(distractors, 1) if f"D{j}" in placed]
        self.result.sessions.append(
            SessionResult(
                index=i,
                date=date,
                title=title,
                ops=ops,
                # renumbered: D1 is the first distractor kept
                distractors=[d for _, d in kept],
                turns=[DialogueTurn.model_validate(t) for t in got["turns"]],
                coverage=dict(got["coverage"]),
                distractor_turns={f"D{n}": placed[old] for n, (old, _) in enumerate(kept, 1)},
                questions=self.questions(i, date, title),
                state_before=before,
                state_after=list(self.state),
                types=dict(self.types),
            )
        )
        return True

    def whole_dialogue(
        self,
        i: int,
        *,
        date: dt.date,
        title: str,
        narrative: str,
        facts: list[Required],
        distractors: list[Required],
        known: list[str],
    ) -> dict[str, Any] | None:
        """A session's dialogue in one call (`SynthConfig.dialogue="whole"`), as
        `dialogue_by_turns` returns it."""
        turns = turn_range(len(facts) + len(distractors))

        def parse(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
            reply = DialogueReply.model_validate(raw)
            coverage, placed, pruned = check_dialogue(
                reply, facts=facts, distractors=distractors, known=known, turns=turns
            )
            turns_json = [t.model_dump() for t in reply.turns]
            return {"turns": turns_json, "coverage": coverage, "distractors": placed}, pruned

        return self.step(
            f"dialogue:{i}",
            render.dialogue_prompt(
                self.profile,
                date=date,
                title=title,
                narrative=narrative,
                facts=facts,
                distractors=distractors,
                turns=turns,
            ),
            dialogue_schema([f.id for f in facts], [d.id for d in distractors], turns[1]),
            parse,
        )

    def questions(self, i: int, date: dt.date, title: str) -> list[Question]:
        if self.cfg.questions <= 0:
            return []
        memories = [*self.state, *self.former]

        def parse(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
            kept, pruned = check_questions(QuestionsReply.model_validate(raw), memories=memories)
            return QuestionsReply(questions=kept).model_dump(mode="json"), pruned

        got = self.step(
            f"questions:{i}",
            render.questions_prompt(
                self.profile,
                state=self.state,
                former=self.former,
                date=date,
                title=title,
                count=self.cfg.questions,
            ),
            questions_schema(memories, self.cfg.questions),
            parse,
        )
        return QuestionsReply.model_validate(got).questions if got else []


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _checked_ops(
    raw: dict[str, Any], state: list[str], first: str
) -> tuple[dict[str, Any], list[str]]:
    mended, notes = mend_ops(OpsReply.model_validate(raw), first)
    reply, pruned = check_ops(mended, state=state, first_name=first)
    return reply.model_dump(mode="json"), notes + pruned
