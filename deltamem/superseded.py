"""Excerpts that later facts superseded: what the answerer is not shown.

An excerpt is a raw turn; the facts the manager derived from it carry that turn as
their provenance. When a later session changed such a fact ("works as a data
analyst at Northwind Bank" ended by "left Northwind Bank", an income 15,600 ->
18,000), the turn says something that is no longer true. The 1.5B answerer follows
the question's words to that turn whatever it is told: with "resigned from
Westfield School" among the facts and the old turn "I teach maths at Westfield
School" beside it, "Where does Jun work?" is answered "Westfield School"; shown
with a note that it is no longer true, the same; left out, "a small bakery in
town" (docs/benchmarks.md, fourteenth pass). So such an excerpt is left out of
what the answerer reads; the fact that replaced it, and the memory's history,
keep what was said. Only a later fact that outdates it counts (`outdates`: it ends
what the turn named, or swaps or reverses a value): one that only made it richer
or said it otherwise ("likes films" -> "likes horror films") does not.
"""

from __future__ import annotations

from deltamem.manager.resolve import outdates
from deltamem.store.base import Store
from deltamem.types import SearchHit


def stale_turns(store: Store, user_id: str, session_id: str, agent_id: str | None) -> set[int]:
    """The turns of a session whose facts a later session outdated, or someone
    deleted."""
    written: dict[str, tuple[str, list[int]]] = {}
    for op in store.session_operations(user_id, session_id, agent_id):
        if op.op in ("add", "update") and op.memory_id and op.content:
            written[op.memory_id] = (op.content, op.turns)
    if not written:
        return set()
    now = {m.id: m for m in store.get_many(list(written))}
    stale: set[int] = set()
    for memory_id, (said, turns) in written.items():
        current = now.get(memory_id)
        if current is None:
            stale.update(turns)  # deleted: the turn's fact was taken back
        elif current.session_id != session_id and outdates(said, current.content):
            stale.update(turns)
    return stale


def without_superseded(store: Store, hits: list[SearchHit]) -> list[SearchHit]:
    """`hits` less the excerpts whose turn a later fact superseded (`stale_turns`)."""
    cache: dict[tuple[str, str | None, str], set[int]] = {}
    kept: list[SearchHit] = []
    for hit in hits:
        m = hit.memory
        if hit.kind == "episode" and m.session_id:
            key = (m.user_id, m.agent_id, m.session_id)
            if key not in cache:
                cache[key] = stale_turns(store, m.user_id, m.session_id, m.agent_id)
            if set(m.turns) & cache[key]:
                continue
        kept.append(hit)
    return kept
