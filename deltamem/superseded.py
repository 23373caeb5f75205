"""What later facts outdated, among the excerpts `Memory.context` (and so `answer`)
reads (rule OUTDATED_EXCERPT).

The 1.5B answerer follows a question's words to an old statement whatever it is told
of it: with "resigned from Westfield School" among the facts and the old turn "I
teach maths at Westfield School" beside it, "Where does Jun work?" is answered
"Westfield School"; with the turn marked as no longer true, the same; with it left
out, "a small bakery in town" (docs/journal/benchmarks.md, fourteenth pass). So an
excerpt whose fact was outdated is left out of what it reads; `search`, the bank and
each memory's history keep it.

An excerpt is a raw turn, and the facts derived from it carry that turn
(provenance). Whether such a fact still holds is stored: a later session updated it
(the update's old and new content), outdated it (`invalid_at`, written when the
later fact was: deltamem/manager/outdate.py), its expiry passed (`expires_at`,
deltamem/expiry.py), or someone (or the expiry sweep) deleted it. Facts themselves
need no filter here: an outdated or expired memory is out of search already.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from deltamem.manager.resolve import exact_values, outdated_values, outdates
from deltamem.porter import stem
from deltamem.rules import DEFAULT, RuleSettings
from deltamem.store.base import Store
from deltamem.text import people_named_first, stems_of
from deltamem.types import SearchHit

_SENTENCE = re.compile(r"(?<=[.!?])\s+")
# of a fact without exact values, the share of its content words a sentence must hold
# to be the one that said it
_WORDS_SAID = 0.5


@dataclass(frozen=True)
class Said:
    """How to find the sentence that said a fact: its exact values (names, places,
    numbers), all of which that sentence names; else its content words (stems), half
    of which it holds. The person's name is neither."""

    values: frozenset[str]
    words: frozenset[str]

    @classmethod
    def of(cls, values: set[str], fact: str, people: set[str]) -> Said | None:
        if values:
            return cls(frozenset(values), frozenset())
        words = stems_of(fact) - {stem(p) for p in people}
        return cls(frozenset(), frozenset(words)) if words else None

    def in_sentence(self, values: set[str], words: set[str]) -> bool:
        if self.values:
            return self.values <= values
        return len(self.words & words) >= _WORDS_SAID * len(self.words)


@dataclass
class Outdated:
    """What of a session later sessions outdated: the turns whose facts were deleted
    (they go whole), the turns whose facts no longer hold and how to find the
    sentences that said them, and how to find those of each turn's facts that still
    hold."""

    whole: set[int] = field(default_factory=set)
    turns: set[int] = field(default_factory=set)
    values: list[Said] = field(default_factory=list)
    # a sentence that says a fact still holding stays ("I play cello and drink coffee
    # every morning" once the coffee is given up): raw search would show it
    holding: dict[int, list[Said]] = field(default_factory=dict)

    def read(self, turns: list[int], text: str) -> str | None:
        """What of an excerpt of the session is still to be read: its sentences less
        those that said an outdated fact ("My monthly income is 15600 USD." once it is
        18,000; the assistant's "How do you like working at Northwind Bank?" once that
        job ended), and less every sentence where the turn's fact was deleted or the
        words that said it cannot be found; but a sentence that says a fact of the
        turn still holding stays. None where nothing is left."""
        whole = bool(set(turns) & self.whole)
        if not whole and not self.values:
            return text
        sentences = _SENTENCE.split(text.strip())
        holding = [g for turn in turns for g in self.holding.get(turn, [])]
        found = [(exact_values(t), stems_of(t)) for t in sentences]
        old = [any(g.in_sentence(*f) for g in self.values) for f in found]
        holds = [any(g.in_sentence(*f) for g in holding) for f in found]
        lost = whole or (bool(set(turns) & self.turns) and not any(old))
        kept = [t for t, o, h in zip(sentences, old, holds, strict=True) if h or not (lost or o)]
        if not kept:
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
    # the person a fact names is no value its turn must say: "I quit coffee" is the
    # sentence of "Lena Vogel drinks coffee", although it does not say "Lena Vogel"
    people = people_named_first([said for said, _ in written.values()])
    for memory_id, (said, turns) in written.items():
        current = now.get(memory_id)
        if current is None:
            out.whole.update(turns)  # deleted: the turn's fact was taken back
            continue
        if current.invalid_at is not None or current.expired():
            # outdated by a later fact, or its expiry passed
            gone = Said.of(exact_values(said) - people, said, people)
        elif current.session_id != session_id and outdates(said, current.content):
            # updated: the values it no longer has (none where it was reversed)
            gone = Said.of(outdated_values(said, current.content) - people, said, people)
        else:
            # it still holds: its sentences stay
            if held := Said.of(exact_values(said) - people, said, people):
                for turn in turns:
                    out.holding.setdefault(turn, []).append(held)
            continue
        if gone is None:
            out.whole.update(turns)  # nothing to find it by
        else:
            out.turns.update(turns)
            out.values.append(gone)
    return out


OutdatedCache = dict[tuple[str, str | None, str], Outdated]  # by (user, agent, session)


def without_superseded(
    store: Store,
    hits: list[SearchHit],
    rules: RuleSettings = DEFAULT,
    cache: OutdatedCache | None = None,
) -> list[SearchHit]:
    """`hits` less the excerpts whose facts later sessions outdated (rule
    OUTDATED_EXCERPT, which `rules` can switch off), in their order; an excerpt that
    lost sentences is a copy with the rest. `cache` keeps what each session's
    outdated facts are across calls over the same store state (one `context`)."""
    if not rules.on("OUTDATED_EXCERPT"):
        return list(hits)
    cache = {} if cache is None else cache
    kept: list[SearchHit] = []
    for hit in hits:
        m = hit.memory
        if hit.kind == "episode" and m.session_id:
            key = (m.user_id, m.agent_id, m.session_id)
            if key not in cache:
                cache[key] = outdated(store, m.user_id, m.session_id, m.agent_id)
            still = cache[key].read(m.turns, m.content)
            if still is None:
                continue
            if still != m.content:
                hit = hit.model_copy(update={"memory": m.model_copy(update={"content": still})})
        kept.append(hit)
    return kept
