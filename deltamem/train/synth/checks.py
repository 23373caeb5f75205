"""The checks every generated piece passes before it is kept.

A check either refuses a reply (raises `Refused` with the reason: the reply is
generated again, a bounded number of times) or prunes a part of it that can go
without the rest (an event's change that quotes a fact nobody stated, a
distractor the dialogue does not carry, a question whose evidence is no memory):
the part is dropped and the reason returned for the log.

Keywords are matched as whole tokens, case-insensitively, as the reward matches
them (`distance.keyword_in`), so a fact the checks accept is one whose keywords
the state distance can find.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

from deltamem.train.distance import keyword_in
from deltamem.train.synth.schemas import (
    AnchorReply,
    DialogueReply,
    DialogueTurn,
    Event,
    EventsReply,
    OpsReply,
    ProfileReply,
    Question,
    QuestionsReply,
)

MIN_KEYWORDS, MAX_KEYWORDS = 2, 4
# the turn prompt's rules, which a 1.5B model sometimes writes as the reply itself
_RULE_WORDS = ("adds nothing about", "listens, asks or encourages", "exactly as written")
# a user who tells their assistant about their life says "I" or "my"
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|we|our|us)\b", re.I)
MAX_WORDS = 40  # a memory is one atomic sentence (~15 words asked; an anchor runs longer)


class Refused(ValueError):
    """A generation the checks refuse; the message says why."""


def norm(text: str) -> str:
    """The form two quotes of one fact share: spacing, case and a final full stop
    do not matter."""
    return " ".join(text.split()).rstrip(".").strip().casefold()


def find_in(text: str, pool: Sequence[str]) -> str | None:
    """The entry of `pool` that `text` quotes, or None."""
    key = norm(text)
    return next((p for p in pool if norm(p) == key), None)


def _short(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def check_memory(text: str, keywords: Sequence[str], first_name: str | None, what: str) -> None:
    """A memory sentence: short, names the person (when `first_name` is given) and
    holds each of its 2-4 keywords."""
    if len(text.split()) > MAX_WORDS:
        raise Refused(f"{what} has {len(text.split())} words; a memory is one short sentence")
    if first_name and not keyword_in(first_name, text):
        raise Refused(f"{what} does not name {first_name}: {_short(text)!r}")
    if not MIN_KEYWORDS <= len(keywords) <= MAX_KEYWORDS:
        raise Refused(f"{what} has {len(keywords)} keywords, not {MIN_KEYWORDS}-{MAX_KEYWORDS}")
    if first_name and any(keyword_in(first_name, k) for k in keywords):
        raise Refused(f"{what}: a keyword is the person's name, which every memory holds")
    missing = [k for k in keywords if not keyword_in(k, text)]
    if missing:
        raise Refused(f"{what}: keyword(s) {', '.join(map(repr, missing))} not in its text")


# --- step 1 ---------------------------------------------------------------------------------
def check_profile(reply: ProfileReply) -> ProfileReply:
    if len(reply.profile.name.split()) < 2:
        raise Refused(f"the profile's name {reply.profile.name!r} is not a full name")
    first = reply.profile.first_name
    seen: set[str] = set()
    for i, fact in enumerate(reply.facts, 1):
        check_memory(fact.content, fact.keywords, first, f"initial fact {i}")
        if norm(fact.content) in seen:
            raise Refused(f"initial fact {i} repeats an earlier one")
        seen.add(norm(fact.content))
    return reply


# --- step 2 ---------------------------------------------------------------------------------
def check_events(
    reply: EventsReply, *, after: dt.date, facts: Sequence[str], count: int, first_number: int = 1
) -> tuple[list[Event], list[str], list[str]]:
    """The first `count` events, in strictly increasing date order after `after`
    (refused otherwise); each change that is not `new` must quote, exactly, a fact
    of the planned state (`facts`: the initial facts and the later changes' texts).
    Returns (events with their bad changes pruned, reasons, the planned state after)."""
    if len(reply.events) < count:
        raise Refused(f"asked for {count} events, got {len(reply.events)}")
    events = [e.model_copy(deep=True) for e in reply.events[:count]]
    previous = after
    for n, event in enumerate(events, first_number):
        if event.date <= previous:
            raise Refused(
                f"event {n} ({event.date}) is not after {previous}: events must be chronological"
            )
        previous = event.date
    pool = list(facts)
    pruned: list[str] = []
    for n, event in enumerate(events, first_number):
        kept = []
        for change in event.changes:
            if change.change != "new":
                hit = find_in(change.before, pool)
                if hit is None:
                    pruned.append(
                        f"event {n} ({_short(event.title, 40)}): a {change.change} change quotes "
                        f"{_short(change.before)!r}, which is not in the state"
                    )
                    continue
                pool.remove(hit)
                change.before = hit
            else:
                change.before = ""
            pool.append(change.after)
            kept.append(change)
        event.changes = kept
    return events, pruned, pool


# --- step 3 ---------------------------------------------------------------------------------
def check_anchor(reply: AnchorReply, *, n_events: int, first_name: str) -> AnchorReply:
    last = 0
    for step in reply.thread:
        if not last < step.event <= n_events:
            raise Refused(
                f"the anchor's events must increase within 1-{n_events}; got {step.event} "
                f"after {last}"
            )
        last = step.event
        check_memory(step.memory, step.keywords, first_name, f"the anchor memory of event {last}")
    return reply


def check_ops(
    reply: OpsReply, *, state: Sequence[str], first_name: str
) -> tuple[OpsReply, list[str]]:
    """Operations on `state`: an update quotes the entry it replaces, a `none`
    repeats an entry, an add is new; no entry is replaced twice. Distractors that
    are no usable fact are pruned. Quotes come back as the state's own text."""
    reply = reply.model_copy(deep=True)
    replaced: set[str] = set()
    written: set[str] = set()
    for i, op in enumerate(reply.operations, 1):
        what = f"operation {i} ({op.op})"
        check_memory(op.memory, op.keywords, first_name, what)
        if norm(op.memory) in written:
            raise Refused(f"{what} repeats an earlier operation")
        written.add(norm(op.memory))
        if op.op == "update":
            hit = find_in(op.replaces, state)
            if hit is None:
                raise Refused(
                    f"{what} quotes {_short(op.replaces)!r} as the fact it changes, "
                    "which is not in the current state"
                )
            if hit in replaced:
                raise Refused(f"{what} changes a fact another operation already changes")
            if norm(op.memory) == norm(hit):
                raise Refused(f"{what} does not change the fact it quotes")
            replaced.add(hit)
            op.replaces = hit
        elif op.op == "none":
            hit = find_in(op.memory, state)
            if hit is None:
                raise Refused(f"{what} must repeat a memory of the state exactly")
            op.memory, op.replaces = hit, ""
        else:
            if find_in(op.memory, state) is not None:
                raise Refused(f"{what} adds a memory the state already holds")
            op.replaces = ""
    if not any(op.op != "none" for op in reply.operations):
        raise Refused("no add or update: the event changes nothing")
    pruned: list[str] = []
    kept = []
    for j, d in enumerate(reply.distractors, 1):
        try:
            check_memory(d.memory, d.keywords, None, f"distractor {j}")
            if find_in(d.memory, state) is not None or norm(d.memory) in written:
                raise Refused(f"distractor {j} is a true memory")
        except Refused as exc:
            pruned.append(str(exc))
            continue
        kept.append(d)
    reply.distractors = kept
    return reply, pruned


# --- step 4 ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Required:
    """A fact a dialogue must carry: `id` as the prompt and the map name it."""

    id: str
    text: str
    keywords: tuple[str, ...]
    kind: str  # add | update | none | distractor
    before: str | None = None  # an update's prior fact


def turn_range(n_facts: int) -> tuple[int, int]:
    """How many turns a dialogue of `n_facts` facts may have: room for one or two
    facts a turn, and a few turns of talk around them."""
    lo = max(3, (n_facts + 1) // 2)
    return lo, lo + 4


def _first_mention(keyword: str, turns: Sequence[DialogueTurn]) -> tuple[int, str] | None:
    for n, turn in enumerate(turns, 1):
        if keyword_in(keyword, turn.user):
            return n, "user"
        if keyword_in(keyword, turn.assistant):
            return n, "assistant"
    return None


def check_dialogue(
    reply: DialogueReply,
    *,
    facts: Sequence[Required],
    distractors: Sequence[Required],
    known: Sequence[str],
    turns: tuple[int, int],
) -> tuple[dict[str, int], dict[str, int], list[str]]:
    """A dialogue in which the user brings up every fact: each fact's keywords are
    in the user's utterance of the turn the map names, and a keyword that is new
    to the state (`known`) is not said by the assistant before the user says it
    (a `none` fact, already known, may be recalled by the assistant first).
    Distractors must be said by the assistant in their mapped turn and never by
    the user (keywords of their own only); one that is not is pruned.
    Returns (fact id -> turn, distractor id -> turn, pruning reasons)."""
    lo, hi = turns
    n = len(reply.turns)
    if not lo <= n <= hi:
        raise Refused(f"the dialogue has {n} turns; asked for {lo}-{hi}")
    for i, t in enumerate(reply.turns, 1):
        if not t.user.strip() or not t.assistant.strip():
            raise Refused(f"turn {i} has an empty utterance")
    placed: dict[str, int] = {}
    for p in reply.facts:
        placed.setdefault(p.id, p.turn)
    coverage: dict[str, int] = {}
    for f in facts:
        turn = placed.get(f.id)
        if turn is None:
            raise Refused(f"{f.id} is not in the coverage map")
        if not 1 <= turn <= n:
            raise Refused(f"{f.id} is mapped to turn {turn}; the dialogue has {n}")
        said = reply.turns[turn - 1].user
        missing = [k for k in f.keywords if not keyword_in(k, said)]
        if missing:
            raise Refused(
                f"{f.id} ({_short(f.text, 60)!r}): keyword(s) {', '.join(map(repr, missing))} "
                f"not in the user's utterance of turn {turn}"
            )
        coverage[f.id] = turn
        if f.kind == "none":
            continue
        for k in f.keywords:
            if any(keyword_in(k, s) for s in known):
                continue
            first = _first_mention(k, reply.turns)
            if first is not None and first[1] == "assistant":
                raise Refused(
                    f"{f.id}: the assistant says {k!r} in turn {first[0]} before the user does"
                )
    return coverage, *_check_distractors(reply, distractors, [*known, *(f.text for f in facts)])


def check_turn(turn: DialogueTurn, *, fact: Required, later: Sequence[str]) -> None:
    """One exchange of a dialogue written a fact at a time: the user's message says
    every keyword of `fact`, and the assistant says none of `later` (the keywords,
    new to the state, of the facts the user has yet to bring up)."""
    if not turn.user.strip() or not turn.assistant.strip():
        raise Refused("the exchange has an empty utterance")
    missing = [k for k in fact.keywords if not keyword_in(k, turn.user)]
    if missing:
        raise Refused(
            f"{fact.id} ({_short(fact.text, 60)!r}): keyword(s) {', '.join(map(repr, missing))} "
            "not in the user's message"
        )
    if not _FIRST_PERSON.search(turn.user.replace("’", "'")):
        raise Refused("the user's message is not in the first person (the fact copied)")
    echo = [r for r in _RULE_WORDS if r in turn.user.lower() or r in turn.assistant.lower()]
    if echo:
        raise Refused(f"the exchange copies the prompt's rules ({echo[0]!r})")
    early = [k for k in later if keyword_in(k, turn.assistant)]
    if early:
        raise Refused(
            f"the assistant says {', '.join(map(repr, early))} before the user brings it up"
        )


def _check_distractors(
    reply: DialogueReply, distractors: Sequence[Required], true_texts: Sequence[str]
) -> tuple[dict[str, int], list[str]]:
    placed: dict[str, int] = {}
    for p in reply.distractors:
        placed.setdefault(p.id, p.turn)
    kept: dict[str, int] = {}
    pruned: list[str] = []
    for d in distractors:
        turn = placed.get(d.id)
        if turn is None or not 1 <= turn <= len(reply.turns):
            pruned.append(f"{d.id} is not placed in a turn of the dialogue")
            continue
        said = reply.turns[turn - 1].assistant
        missing = [k for k in d.keywords if not keyword_in(k, said)]
        if missing:
            pruned.append(
                f"{d.id}: keyword(s) {', '.join(map(repr, missing))} not in the assistant's "
                f"utterance of turn {turn}"
            )
            continue
        own = [k for k in d.keywords if not any(keyword_in(k, t) for t in true_texts)]
        if not own:
            pruned.append(f"{d.id} has no keyword of its own (all belong to true facts)")
            continue
        by_user = [k for k in own if any(keyword_in(k, t.user) for t in reply.turns)]
        if by_user:
            pruned.append(f"{d.id}: the user says {', '.join(map(repr, by_user))}")
            continue
        kept[d.id] = turn
    return kept, pruned


# --- questions --------------------------------------------------------------------------------
def check_questions(
    reply: QuestionsReply, *, memories: Sequence[str]
) -> tuple[list[Question], list[str]]:
    """Questions whose evidence quotes memories (`memories`: every version so far);
    a Memory Boundary question asks what was never said and has no evidence, every
    other type has some. A question that fails is pruned."""
    kept: list[Question] = []
    pruned: list[str] = []
    for i, q in enumerate(reply.questions, 1):
        what = f"question {i} ({q.type})"
        if q.type == "Memory Boundary":
            if q.evidence:
                pruned.append(f"{what} has evidence, but asks what was never said")
                continue
            kept.append(q)
            continue
        if not q.evidence:
            pruned.append(f"{what} has no evidence")
            continue
        quoted = [find_in(e, memories) for e in q.evidence]
        bad = [e for e, hit in zip(q.evidence, quoted, strict=True) if hit is None]
        if bad:
            pruned.append(f"{what}: evidence {_short(bad[0])!r} is no memory")
            continue
        evidence = list(dict.fromkeys(h for h in quoted if h is not None))
        kept.append(q.model_copy(update={"evidence": evidence}))
    return kept, pruned
