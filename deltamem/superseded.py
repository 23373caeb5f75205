"""What later facts outdated: what `Memory.context` (and so `answer`) does not read.

The 1.5B answerer follows a question's words to an old statement whatever it is told
of it: with "resigned from Westfield School" among the facts and the old turn "I
teach maths at Westfield School" beside it, "Where does Jun work?" is answered
"Westfield School"; with the turn marked as no longer true, the same; with it left
out, "a small bakery in town" (docs/journal/benchmarks.md, fourteenth pass). So what a later
fact outdated is left out of what it reads; `search`, the bank and each memory's
history keep it. Three kinds:

* by provenance (`outdated`): an excerpt is a raw turn, and the facts derived from
  it carry that turn. Where a later session's fact outdated one of them (`outdates`:
  ended what it named, swapped or reversed a value; not a richer or reworded fact),
  the sentences of the session's excerpts that name the outdated value go ("My
  monthly income is 15600 USD." once it is 18,000; the assistant's "How do you like
  Northwind Bank?" once that job ended), or the whole turn where no value can be
  found (a reversed or deleted fact);
* by an ending among the hits (`ended_among`): an item said before a retrieved fact
  that ends what it names ("works at Northwind Bank, learning Portuguese ..."
  before "left Northwind Bank": a packed fact the update did not replace);
* by a taking back among the hits (`taken_back_among`): an item said before a
  retrieved fact that says it no longer holds ("no longer drinks coffee", "the
  wedding is on June 14th, not in May", "quit smoking").
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from deltamem.manager.resolve import ended_values, exact_values, outdated_values, outdates
from deltamem.rules import DEFAULT, RuleSettings
from deltamem.store.base import Store
from deltamem.text import stems_of
from deltamem.types import SearchHit

# what a fact says no longer holds: "no longer drinks coffee", "the wedding is on
# June 14th, not in May", "lives in Lyon and not in Paris"
_TAKEN_BACK = re.compile(
    r"(?:\bno\s+longer|,\s*not|\band\s+not)\s+(?P<what>[^,.;!?]+?)(?=[,.;!?]|\s+(?:but|and|because|as)\b|$)",
    re.IGNORECASE,
)

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# an activity ended: "quit smoking", "gave up running", "stopped playing football"
_QUIT_DOING = re.compile(
    r"\b(?:quit|gave\s+up|stopped|has\s+stopped)\s+(?P<what>\w+ing(?:\s+(?!in\b|on\b|at\b)\w+)?)",
    re.IGNORECASE,
)


@dataclass
class Outdated:
    """What of a session later sessions outdated: the turns whose facts were outdated
    without a value to find in the words (reversed, deleted), the turns whose facts
    named values that no longer hold, and those values (one group a fact)."""

    whole: set[int] = field(default_factory=set)
    turns: set[int] = field(default_factory=set)
    values: list[set[str]] = field(default_factory=list)

    def read(self, turns: list[int], text: str) -> str | None:
        """What of an excerpt of the session is still to be read: its sentences less
        those naming every value of an outdated fact ("My monthly income is 15600
        USD." once it is 18,000; the assistant's "How do you like working at
        Northwind Bank?" once that job ended). None where nothing is left, or its
        turn's fact was outdated and the words that said it cannot be found."""
        if set(turns) & self.whole:
            return None
        if not self.values:
            return text
        sentences = _SENTENCE.split(text.strip())
        kept = [t for t in sentences if not any(g <= exact_values(t) for g in self.values)]
        if not kept or (set(turns) & self.turns and len(kept) == len(sentences)):
            return None
        return text if len(kept) == len(sentences) else " ".join(kept)


def outdated(store: Store, user_id: str, session_id: str, agent_id: str | None) -> Outdated:
    """What of a session's facts a later session outdated, or someone deleted."""
    written: dict[str, tuple[str, list[int]]] = {}
    for op in store.session_operations(user_id, session_id, agent_id):
        if op.op in ("add", "update") and op.memory_id and op.content:
            written[op.memory_id] = (op.content, op.turns)
    out = Outdated()
    if not written:
        return out
    now = {m.id: m for m in store.get_many(list(written))}
    for memory_id, (said, turns) in written.items():
        current = now.get(memory_id)
        if current is None:
            out.whole.update(turns)  # deleted: the turn's fact was taken back
        elif current.session_id != session_id and outdates(said, current.content):
            if values := outdated_values(said, current.content):
                out.turns.update(turns)
                out.values.append(values)
            else:
                out.whole.update(turns)  # reversed: no value to find in the words
    return out


def ended_among(hits: list[SearchHit]) -> list[tuple[datetime, set[str]]]:
    """When each fact among `hits` that ends a named thing was said, and the values
    of what it ends ("left Northwind Bank": {"northwind", "bank"})."""
    out = []
    for hit in hits:
        if hit.kind == "fact" and (values := ended_values(hit.memory.content, None)):
            out.append((hit.memory.timestamp, values))
    return out


@dataclass(frozen=True)
class TakenBack:
    """A fact among the hits that says something no longer holds."""

    said: datetime
    what: frozenset[str]  # the stems of what no longer holds ("drink", "coffe")
    topic: frozenset[str]  # the fact's other stems ("wed", "june" for a moved date)


def taken_back_among(hits: list[SearchHit]) -> list[TakenBack]:
    """What the facts among `hits` say no longer holds."""
    out = []
    for hit in hits:
        if hit.kind != "fact":
            continue
        text = hit.memory.content
        for m in _TAKEN_BACK.finditer(text):
            what = frozenset(stems_of(m.group("what")))
            if what:
                out.append(TakenBack(hit.memory.timestamp, what, frozenset(stems_of(text)) - what))
        for m in _QUIT_DOING.finditer(text):
            # the activity is its own topic: "smokes ten a day" before "quit smoking"
            what = frozenset(stems_of(m.group("what")))
            if what:
                out.append(TakenBack(hit.memory.timestamp, what, what))
    return out


def _taken_back_before(hit: SearchHit, taken: list[TakenBack]) -> bool:
    """An item said before a fact that takes back what it states: it holds every
    word of what was taken back and shares a word of the fact's topic ("planned for
    May 14th" and "our wedding" before "the wedding is on June 14th, not in May")."""
    if _TAKEN_BACK.search(hit.memory.content) or _QUIT_DOING.search(hit.memory.content):
        return False
    stems: set[str] | None = None
    for t in taken:
        if hit.memory.timestamp < t.said:
            stems = stems_of(hit.memory.content) if stems is None else stems
            if t.what <= stems and stems & t.topic:
                return True
    return False


def _ended_before(hit: SearchHit, ended: list[tuple[datetime, set[str]]]) -> bool:
    """An item said before a fact that ends something it names (itself no ending)."""
    if hit.kind == "fact" and ended_values(hit.memory.content, None):
        return False
    named: set[str] | None = None
    for when, values in ended:
        if hit.memory.timestamp < when:
            named = exact_values(hit.memory.content) if named is None else named
            if values <= named:
                return True
    return False


def without_superseded(
    store: Store, hits: list[SearchHit], rules: RuleSettings = DEFAULT
) -> list[SearchHit]:
    """`hits` less what later facts outdated (the module's three kinds, each a rule
    that `rules` can switch off), in their order; an excerpt that lost sentences is
    a copy with the rest."""
    ended = ended_among(hits) if rules.on("ENDED_AMONG_HITS") else []
    taken = taken_back_among(hits) if rules.on("TAKEN_BACK_AMONG_HITS") else []
    by_provenance = rules.on("OUTDATED_EXCERPT")
    cache: dict[tuple[str, str | None, str], Outdated] = {}
    kept: list[SearchHit] = []
    for hit in hits:
        m = hit.memory
        if by_provenance and hit.kind == "episode" and m.session_id:
            key = (m.user_id, m.agent_id, m.session_id)
            if key not in cache:
                cache[key] = outdated(store, m.user_id, m.session_id, m.agent_id)
            still = cache[key].read(m.turns, m.content)
            if still is None:
                continue
            if still != m.content:
                hit = hit.model_copy(update={"memory": m.model_copy(update={"content": still})})
        if ended and _ended_before(hit, ended):
            continue
        if taken and _taken_back_before(hit, taken):
            continue
        kept.append(hit)
    return kept
