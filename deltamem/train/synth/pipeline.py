"""The synthesis pipeline (SPEC §6; DeltaMem §3.2 and App. A; HaluMem §4).

Per persona seed:
1. profile and initial memory state S0 (its own "first conversation" session,
   so a memory system that starts empty can learn S0 from dialogue);
2. chronological events in batches, each with state deltas (career / health /
   relationship / preference; new, expand, adjust, shift, partial deletion, a
   change quoting the exact prior fact);
3. one anchor memory followed across related events (inter-event evolution:
   emotional, meaning or self-belief updates), then per event the memory
   operations (add / update / none with keywords: the deltas, memory filling, a
   few repeats) and distractors;
4. per event a dialogue in which the user brings up every fact first, with a
   fact → turn map; then questions of HaluMem's six types with their evidence.

Every reply is checked (`checks.py`) before it is kept; a refused one is asked
again up to `attempts` times, then the step is dropped with its reason. A
session is kept only with its operations and dialogue; the state moves on only
through kept sessions. Every step's outcome is cached (`cache.py`), so a run
resumes where it stopped.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from deltamem.bench.runner import Progress, tick
from deltamem.llm.base import LLM, ChatMessage, LLMError
from deltamem.train.synth import render
from deltamem.train.synth.cache import Cache, Entry
from deltamem.train.synth.checks import (
    Refused,
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
    Profile,
    ProfileReply,
    Question,
    QuestionsReply,
    anchor_schema,
    dialogue_schema,
    events_schema,
    ops_schema,
    questions_schema,
)
from deltamem.train.synth.seeds import persona_id

Parse = Callable[[dict[str, Any]], tuple[dict[str, Any], list[str]]]
INTRO_TITLE = "First conversation"
REFUSALS = "refusals.jsonl"


class SynthError(RuntimeError):
    """The run cannot start (e.g. OUT holds an earlier run and --resume was not given)."""


@dataclass
class SynthConfig:
    events: int = 25  # per persona
    batch: int = 5  # events asked for in one call
    attempts: int = 3  # generations of one step before it is dropped
    initial_facts: int = 8
    fill: int = 2  # extra adds per event (memory filling)
    nones: int = 1  # memories repeated without change, per event
    distractors: int = 1  # per event
    questions: int = 2  # per session (0: none)
    anchor_steps: int = 4  # most events one anchor memory runs through
    span_days: int = 540
    temperature: float = 0.7
    max_tokens: dict[str, int] = field(
        default_factory=lambda: {
            "profile": 1500,
            "events": 2500,
            "anchor": 1200,
            "ops": 1500,
            "dialogue": 3500,
            "questions": 1200,
        }
    )


@dataclass
class SessionResult:
    index: int  # 0: the first conversation (S0); i: event i
    date: dt.date
    title: str
    ops: list[Op]
    distractors: list[Distractor]
    turns: list[DialogueTurn]
    coverage: dict[str, int]  # fact id (F1 = ops[0]) -> 1-based turn
    distractor_turns: dict[str, int]  # distractor id (D1 = distractors[0]) -> turn
    questions: list[Question]
    state_before: list[str]
    state_after: list[str]
    types: dict[str, str]  # memory text -> type, for every memory so far


@dataclass
class PersonaResult:
    id: str
    seed: str
    profile: Profile | None = None
    sessions: list[SessionResult] = field(default_factory=list)
    planned: int = 0  # sessions planned: the first conversation and each event
    drops: list[tuple[str, str]] = field(default_factory=list)  # (step key, reason)


def _flat(text: object, n: int = 300) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def apply_ops(state: Sequence[str], ops: Sequence[Op]) -> list[str]:
    """S_{t+1} from S_t: an update replaces the entry it quotes (the new text goes
    last, as `records.py` orders a state), an add appends, `none` changes nothing."""
    out = list(state)
    for op in ops:
        if op.op == "update":
            out.remove(op.replaces)
            out.append(op.memory)
        elif op.op == "add":
            out.append(op.memory)
    return out


class Synthesizer:
    def __init__(
        self,
        llm: LLM,
        out: Path,
        config: SynthConfig | None = None,
        *,
        resume: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.llm, self.out = llm, out
        self.config = config or SynthConfig()
        self.resume, self.progress = resume, progress
        self.cache_dir = out / "cache"

    def run(self, seeds: Sequence[str]) -> list[PersonaResult]:
        if not self.resume and self.cache_dir.exists() and any(self.cache_dir.iterdir()):
            raise SynthError(
                f"{self.out} holds an earlier synthesis; pass --resume to continue it "
                "or choose another --out"
            )
        self.out.mkdir(parents=True, exist_ok=True)
        results = []
        for i, seed in enumerate(seeds):
            results.append(self.persona(persona_id(i, seed), seed))
            tick(self.progress, "personas")
        return results

    # --- one step: generate, check, regenerate, keep or drop -----------------------------
    def _step(
        self,
        cache: Cache,
        key: str,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        parse: Parse,
    ) -> Entry:
        entry = cache.get(key)
        if entry is None:
            entry = self._generate(key, messages, schema, parse)
            cache.put(entry)
            self._log(cache.path.stem, entry)
        return entry

    def _generate(
        self, key: str, messages: list[ChatMessage], schema: dict[str, Any], parse: Parse
    ) -> Entry:
        step = key.split(":", 1)[0]
        refusals: list[str] = []

        def check(raw: dict[str, Any]) -> None:
            try:
                parse(raw)
            except ValidationError as exc:
                refusals.append("bad JSON shape: " + _flat(exc))
                raise
            except Refused as exc:
                refusals.append(_flat(exc))
                raise

        t0 = time.perf_counter()
        for _ in range(self.config.attempts):
            seen = len(refusals)
            try:
                raw = self.llm.complete_json(
                    messages,
                    schema,
                    purpose=f"synth.{step}",
                    max_tokens=self.config.max_tokens.get(step, 2000),
                    temperature=self.config.temperature,
                    check=check,
                )
            except LLMError as exc:
                if len(refusals) == seen:  # no JSON object, a timeout, a transport error
                    refusals.append(_flat(exc))
                continue
            value, pruned = parse(raw)
            return Entry(key, True, value, refusals, pruned, seconds=time.perf_counter() - t0)
        last = refusals[-1] if refusals else "no reply"
        reason = f"refused {len(refusals)} time(s); last: {last}"
        return Entry(key, False, None, refusals, [], reason, time.perf_counter() - t0)

    def _log(self, persona: str, entry: Entry) -> None:
        rows = [("refused", r) for r in entry.refusals] + [("pruned", p) for p in entry.pruned]
        if not entry.ok:
            rows.append(("dropped", entry.reason or ""))
        if not rows:
            return
        with (self.out / REFUSALS).open("a", encoding="utf-8") as fh:
            for kind, reason in rows:
                row = {"persona": persona, "step": entry.key, "kind": kind, "reason": reason}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    # --- one persona ------------------------------------------------------------------------
    def persona(self, pid: str, seed: str) -> PersonaResult:
        return _PersonaRun(self, pid, seed).run()


class _PersonaRun:
    """The walk through one persona's steps, holding its memory state."""

    def __init__(self, synth: Synthesizer, pid: str, seed: str) -> None:
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
        entry = self.s._step(self.cache, key, messages, schema, parse)
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
            lambda raw: (_dump(check_profile(ProfileReply.model_validate(raw))), []),
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
                    AnchorReply.model_validate(raw), n_events=len(events), first_name=first
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
            lambda raw: _dump_pruned(
                check_ops(OpsReply.model_validate(raw), state=state, first_name=first)
            ),
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
        turns = turn_range(len(facts) + len(dists))
        known = list(self.state)

        def parse(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
            reply = DialogueReply.model_validate(raw)
            coverage, placed, pruned = check_dialogue(
                reply, facts=facts, distractors=dists, known=known, turns=turns
            )
            turns_json = [t.model_dump() for t in reply.turns]
            return {"turns": turns_json, "coverage": coverage, "distractors": placed}, pruned

        got = self.step(
            f"dialogue:{i}",
            render.dialogue_prompt(
                self.profile,
                date=date,
                title=title,
                narrative=narrative,
                facts=facts,
                distractors=dists,
                turns=turns,
            ),
            dialogue_schema([f.id for f in facts], [d.id for d in dists], turns[1]),
            parse,
        )
        if got is None:
            return False
        before = self.state
        self.state = apply_ops(before, ops)
        self.former += [o.replaces for o in ops if o.op == "update"]
        for o in ops:
            self.types.setdefault(o.memory, o.type)
        placed: dict[str, int] = got["distractors"]
        self.result.sessions.append(
            SessionResult(
                index=i,
                date=date,
                title=title,
                ops=ops,
                distractors=[d for j, d in enumerate(distractors, 1) if f"D{j}" in placed],
                turns=[DialogueTurn.model_validate(t) for t in got["turns"]],
                coverage=dict(got["coverage"]),
                distractor_turns={
                    f"D{n}": placed[old]
                    for n, old in enumerate((k for k in sorted(placed, key=_num)), 1)
                },
                questions=self.questions(i, date, title),
                state_before=before,
                state_after=list(self.state),
                types=dict(self.types),
            )
        )
        return True

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


def _num(ident: str) -> int:
    return int(ident[1:])


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


def _dump_pruned(pair: tuple[OpsReply, list[str]]) -> tuple[dict[str, Any], list[str]]:
    return pair[0].model_dump(mode="json"), pair[1]
