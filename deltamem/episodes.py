"""The episode tier: a session's turns as searchable episodes, built without an LLM.

Facts are what the manager understood; episodes are what was said. Both are
searched and shown to the answerer, so a fact the manager missed (or wrote
wrong) can still be found in the words of the user, dated by its session.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable

from deltamem.embed.base import Embedder
from deltamem.store.base import PlannedEpisode, Store
from deltamem.types import Episode, SearchHit, SessionRecord

log = logging.getLogger("deltamem")

EPISODE_PREFIX = "ep_"
# what the embedder reads of a long turn (MiniLM sees ~256 word pieces anyway)
EMBED_CHARS = 2000


def episode_id(user_id: str, agent_id: str | None, session_id: str, turn: int) -> str:
    """Stable across re-logging and replay, distinct from memory ids (uuid hex)."""
    key = "\x1f".join([user_id, agent_id or "", session_id, str(turn)])
    return EPISODE_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:29]


def is_episode_id(item_id: str) -> bool:
    return item_id.startswith(EPISODE_PREFIX)


def session_episodes(rec: SessionRecord) -> list[Episode]:
    """The session's user and assistant turns (system prompts are not episodes)."""
    out = []
    for i, m in enumerate(rec.messages):
        if m.role == "system":
            continue
        # PostgreSQL text cannot hold NUL; the log keeps the message exactly as sent
        content = m.content.replace("\x00", "\ufffd")
        out.append(
            Episode(
                id=episode_id(rec.user_id, rec.agent_id, rec.session_id, i),
                user_id=rec.user_id,
                agent_id=rec.agent_id,
                session_id=rec.session_id,
                turn=i,
                role=m.role,
                name=m.name,
                content=content,
                timestamp=m.timestamp or rec.timestamp,
            )
        )
    return out


def plan_episodes(rec: SessionRecord, embedder: Embedder) -> list[PlannedEpisode]:
    return embed_episodes(session_episodes(rec), embedder)


def embed_episodes(episodes: list[Episode], embedder: Embedder) -> list[PlannedEpisode]:
    """The episodes with their vectors: each embedded as its speaker and words."""
    if not episodes:
        return []
    vectors = embedder.embed([f"{e.speaker}: {e.content}"[:EMBED_CHARS] for e in episodes])
    return [PlannedEpisode(e, v) for e, v in zip(episodes, vectors, strict=True)]


def index_logged_sessions(
    store: Store,
    embedder: Embedder,
    batch: int = 100,
    stop: Callable[[], bool] | None = None,
) -> int:
    """Index the turns of every logged session that has none yet (logged without
    them, e.g. by the REST API, or in a store written before the episode tier);
    each session in its own transaction, so an interrupted pass (a kill -9
    included) resumes where it stopped. `stop` is asked between sessions. A session
    that cannot be indexed (the embedder fails on it, or is down) is logged and
    left for the next pass: it holds back neither the others nor the caller.
    Returns the sessions indexed."""
    done = 0
    failed: set[tuple[str, str | None, str]] = set()
    while True:
        pending = [
            r
            for r in store.unindexed_sessions(limit=batch + len(failed))
            if (r.user_id, r.agent_id, r.session_id) not in failed
        ]
        if not pending:
            return done
        for rec in pending:
            if stop is not None and stop():
                return done
            try:
                store.index_episodes(rec, plan_episodes(rec, embedder))
            except Exception as exc:
                failed.add((rec.user_id, rec.agent_id, rec.session_id))
                log.warning(
                    "session %r of %r not indexed now: %s", rec.session_id, rec.user_id, exc
                )
                continue
            done += 1


def fact_turns(store: Store, facts: list[SearchHit], shown: list[SearchHit]) -> list[SearchHit]:
    """The turns the `facts` were written from (provenance), as episode hits in the
    facts' order, less those among `shown` (by id, or the same words from the same
    speaker). A fact leads the answerer to the words behind it: where the fact was
    written wrong, the turn still says what was said."""
    ids: list[str] = []
    score: dict[str, float] = {}
    for hit in facts:
        m = hit.memory
        if m.session_id is None:
            continue
        for turn in m.turns:
            i = episode_id(m.user_id, m.agent_id, m.session_id, turn)
            if i not in score:
                ids.append(i)
                score[i] = hit.score
    seen_ids = {h.memory.id for h in shown}
    said = {(h.speaker, h.memory.content) for h in shown}
    found = {e.id: e for e in store.get_episodes([i for i in ids if i not in seen_ids])}
    out: list[SearchHit] = []
    for i in ids:
        ep = found.get(i)
        if ep is None or (ep.speaker, ep.content) in said:
            continue
        said.add((ep.speaker, ep.content))
        out.append(SearchHit.of_episode(ep, score[i]))
    return out
