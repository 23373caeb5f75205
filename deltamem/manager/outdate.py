"""What a new fact says no longer holds, found when it is written (rules
ENDED_BY_LATER and TAKEN_BACK_BY_LATER).

A fact that ends a named thing ("left Northwind Bank") or takes something back ("no
longer drinks coffee", "quit smoking") outdates the older memories that state it,
also those the decision step does not replace: a packed "works at Northwind Bank,
learning Portuguese" that the ending is too unlike to update. Such a memory gets
`invalid_at` (the new fact's session time) and `superseded_by` (the new fact) in the
same transaction as the fact: it leaves search and answers, and its history keeps it.
Decided once, at write time, and stored; nothing is worked out again on a read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from deltamem.manager.resolve import _values, ended_values
from deltamem.rules import DEFAULT, RuleSettings, endings
from deltamem.store.base import PlannedWrite, Store
from deltamem.types import MemoryItem, SessionRecord

DEPTH = 10  # memories read, by keywords and by embedding, for what a fact outdates


@dataclass(frozen=True)
class TakenBack:
    what: frozenset[str]  # the stems of what no longer holds ("drink", "coffe")
    topic: frozenset[str]  # the fact's other stems ("wed", "june" for a moved date)
    language: str = "en"  # whose stems these are
    # the words to search the store by: the stems in English (the keyword index stems
    # them alike), else the words as said
    search: tuple[str, ...] = ()


def taken_back(fact: str) -> list[TakenBack]:
    """What `fact` says no longer holds, in each language it may be in."""
    out = []
    for lang in endings.languages(fact):
        for pattern in endings.TAKEN_BACK[lang]:
            for said in endings.matched(pattern, fact, "what"):
                what = frozenset(endings.stems_in(said, lang))
                if what:
                    topic = frozenset(endings.stems_in(fact, lang)) - what
                    out.append(TakenBack(what, topic, lang, _search(said, what, lang)))
        for pattern in endings.QUIT_DOING[lang]:
            for said in endings.matched(pattern, fact, "what"):
                # the activity is its own topic: "smokes ten a day" before "quit smoking"
                what = frozenset(endings.stems_in(said, lang))
                if what:
                    out.append(TakenBack(what, what, lang, _search(said, what, lang)))
    return out


def _search(said: str, what: frozenset[str], lang: str) -> tuple[str, ...]:
    return tuple(sorted(what)) if lang == "en" else tuple(endings.content_words(said, lang))


def takes_back(fact: str) -> bool:
    return any(
        p.search(fact)
        for lang in endings.languages(fact)
        for p in endings.TAKEN_BACK[lang] + endings.QUIT_DOING[lang]
    )


def _states(memory: str, taken: TakenBack) -> bool:
    """Whether `memory` states what `taken` takes back, on its topic."""
    lang = taken.language
    stems = endings.stems_in(memory, lang)
    return endings.holds(taken.what, stems, lang) and endings.shares(taken.topic, stems, lang)


def search_terms(fact: str, name: str | None) -> list[str]:
    """Words to find the memories `fact` may outdate by: the values it ends and what
    it takes back (empty: it outdates nothing)."""
    words = sorted(ended_values(fact, name))
    for t in taken_back(fact):
        words += t.search
    return words


def outdated_by(
    fact: str,
    memories: list[MemoryItem],
    name: str | None,
    when: datetime,
    rules: RuleSettings = DEFAULT,
) -> tuple[list[str], str | None]:
    """The ids among `memories` (said before `when`, still current) that `fact` says
    no longer hold, and the code of the rule that found them."""
    older = [m for m in memories if m.invalid_at is None and m.timestamp < when]
    ended = ended_values(fact, name) if rules.on("ENDED_BY_LATER") else set()
    if ended:
        ids = [
            m.id
            for m in older
            if ended <= _values(m.content, name) and not ended_values(m.content, name)
        ]
        if ids:
            return ids, "ENDED_BY_LATER"
    taken = taken_back(fact) if rules.on("TAKEN_BACK_BY_LATER") else []
    if taken:
        ids = []
        for m in older:
            if takes_back(m.content):
                continue
            if any(_states(m.content, t) for t in taken):
                ids.append(m.id)
        if ids:
            return ids, "TAKEN_BACK_BY_LATER"
    return [], None


def mark_outdated(
    store: Store,
    write: PlannedWrite,
    session: SessionRecord,
    writes: list[PlannedWrite],
    name: str | None,
    rules: RuleSettings = DEFAULT,
) -> PlannedWrite:
    """`write`, carrying the stored memories it says no longer hold; an add that
    outdates any gets its id now, which they name as `superseded_by`. `writes`: the
    session's writes so far (a memory one of them updates or outdates is left to it)."""
    terms = search_terms(write.content, name)
    if not terms:
        return write
    user, agent = session.user_id, session.agent_id
    found = [i for i, _ in store.keyword_search(user, terms, DEPTH, agent)]
    found += [i for i, _ in store.dense_search(user, write.embedding, DEPTH, agent)]
    taken = {w.memory_id for w in writes} | {i for w in writes for i in w.outdates}
    memories = store.get_many([i for i in dict.fromkeys(found) if i not in taken])
    ids, rule = outdated_by(write.content, memories, name, session.timestamp, rules)
    if ids:
        write.memory_id = write.memory_id or uuid.uuid4().hex
        write.outdates, write.outdates_rule = ids, rule
    return write
