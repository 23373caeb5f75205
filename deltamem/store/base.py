"""The store port: session log, memory bank, history, vectors, keyword index, call log.

Every backend (SQLite embedded, PostgreSQL) implements this interface and passes
the same test suite (tests/test_store.py). Scope is (user_id, agent_id); an
agent_id of None means "any agent" when reading and "no agent" when writing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from deltamem.llm.base import CallRecord
from deltamem.types import (
    Episode,
    HistoryEntry,
    MemoryItem,
    MemoryType,
    Operation,
    SearchFilters,
    SessionRecord,
    SessionStatus,
)


class StoreError(RuntimeError):
    pass


class SessionConflict(StoreError):
    """A session id that is already logged with different content. `user_id` and
    `session_id` name the session as the store holds it (where known), so that a
    service can reword the message with the ids its caller gave."""

    def __init__(
        self, message: str, *, user_id: str | None = None, session_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.user_id, self.session_id = user_id, session_id


class UnknownMemory(StoreError):
    pass


class AmbiguousMemoryId(StoreError):
    """A memory id prefix that starts the ids of several memories; `candidates`
    holds the first of them (sorted)."""

    def __init__(self, prefix: str, candidates: list[str], more: bool = False) -> None:
        listed = ", ".join(candidates) + (", ..." if more else "")
        super().__init__(
            f"memory id {prefix!r} is ambiguous: it starts {listed}; give more characters"
        )
        self.prefix, self.candidates, self.more = prefix, candidates, more


# how many candidates an ambiguous memory id prefix lists
AMBIGUOUS_SHOWN = 10


@dataclass
class PlannedWrite:
    """A validated add or update, ready to be written with its embedding."""

    op: str  # "add" | "update"
    content: str
    embedding: np.ndarray
    # the target of an update; for an add, the id the new memory gets (default: a fresh
    # uuid), for a caller that names its memories (the LangGraph store's keys)
    memory_id: str | None = None
    memory_type: MemoryType | None = None
    keywords: list[str] = field(default_factory=list)
    turns: list[int] = field(default_factory=list)
    # stored memories this write says no longer hold ("left Northwind Bank" ends "works
    # at Northwind Bank"): each gets invalid_at (the session's time) and superseded_by
    # (this write's memory), and the rule that found it (deltamem.rules)
    outdates: list[str] = field(default_factory=list)
    outdates_rule: str | None = None
    # when the memory stops being served (deltamem/expiry.py); for an update, None
    # keeps the memory's expiry as it is
    expires_at: datetime | None = None


@dataclass
class TierRanking:
    """One tier's two rankings for a search, each (id, score) best first."""

    dense: list[tuple[str, float]] = field(default_factory=list)
    keywords: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class PlannedEpisode:
    """A turn of a session to index as an episode, with its embedding."""

    episode: Episode
    embedding: np.ndarray


class Store(ABC):
    dim: int

    # --- session log -------------------------------------------------------------
    @abstractmethod
    def log_session(
        self, rec: SessionRecord, episodes: list[PlannedEpisode] | None = None
    ) -> tuple[SessionRecord, bool]:
        """Durably store a session before extraction. Returns (stored record, created).

        `episodes` (its turns, embedded) are indexed in the same transaction, so the
        log and the episode index never disagree; without them the session is left
        unindexed for `index_episodes`. Logging the same session again is a no-op
        that returns the stored record (nothing is indexed twice); the same id with
        different content raises SessionConflict.
        """

    # --- episodes: the session log's turns, searchable beside the facts ------------
    @abstractmethod
    def unindexed_sessions(self, limit: int = 100) -> list[SessionRecord]:
        """Logged sessions whose turns are not indexed yet (a store from before the
        episode index, or a session logged without episodes), in log order."""

    @abstractmethod
    def index_episodes(self, rec: SessionRecord, episodes: list[PlannedEpisode]) -> int:
        """Index a logged session's turns and mark it indexed, in one transaction.
        Idempotent: turns already indexed are skipped. Returns how many were added."""

    @abstractmethod
    def get_episodes(self, episode_ids: list[str]) -> list[Episode]:
        """Episodes among the ids, in the order given."""

    @abstractmethod
    def episode_dense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        """(episode id, cosine similarity), best first. Episodes have no memory type:
        a `memory_type` filter matches none."""

    @abstractmethod
    def episode_keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        """(episode id, relevance), best first; any term may match."""

    @abstractmethod
    def count_episodes(self, user_id: str, agent_id: str | None = None) -> int: ...

    @abstractmethod
    def get_session(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> SessionRecord | None: ...

    @abstractmethod
    def list_sessions(
        self,
        user_id: str | None = None,
        status: SessionStatus | None = None,
        limit: int | None = None,
    ) -> list[SessionRecord]:
        """Sessions in log order (arrival), optionally narrowed, the first `limit`.
        "pending" is the queue; "deferred" sessions (logged with infer=False) are not
        in it."""

    @abstractmethod
    def mark_failed(
        self, user_id: str, session_id: str, agent_id: str | None, error: str
    ) -> None: ...

    @abstractmethod
    def requeue_session(self, user_id: str, session_id: str, agent_id: str | None = None) -> bool:
        """Put a parked (failed) or deferred (infer=False) session in the queue with
        fresh tries: status pending, attempts 0, its last error kept until it applies.
        True if it was failed or deferred; a pending or applied session is left as
        it is."""

    @abstractmethod
    def cancel_session(
        self, user_id: str, session_id: str, agent_id: str | None = None, seq: int | None = None
    ) -> SessionStatus | None:
        """Withdraw a session that is not applied (pending, deferred or failed), in one
        transaction: its log row, its episodes and the model calls its tries made are
        removed, so a worker planning it meanwhile has its apply refused. Returns the
        status it had ("applied": nothing was removed; None: no such session, whose
        calls are removed all the same: a cancelled try may log one after its row
        went). With `seq`, only that log entry: one logged since under the same id
        is left alone, its calls too."""

    @abstractmethod
    def session_operations(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        """The operations recorded when the session was applied."""

    # --- user leases (several workers on one log) ----------------------------------
    @abstractmethod
    def acquire_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        """Take the user's lease for `ttl` seconds if it is free, expired or already
        `owner`'s. True if `owner` now holds it."""

    @abstractmethod
    def renew_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        """Extend `owner`'s lease by `ttl` seconds from now; False if it was lost."""

    @abstractmethod
    def release_lease(self, user_id: str, owner: str) -> None:
        """Give the lease up (only if `owner` still holds it)."""

    @abstractmethod
    def list_leases(self) -> list[tuple[str, str]]:
        """(user id, owner) of every lease not yet expired."""

    # --- writes ----------------------------------------------------------------
    @abstractmethod
    def apply_session(
        self, session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        """In one transaction: write adds/updates (with history, vectors, keyword index),
        record the session's operations and mark it applied. All or nothing."""

    @abstractmethod
    def delete(self, memory_id: str, actor: str = "api") -> bool: ...

    @abstractmethod
    def edit(
        self,
        memory_id: str,
        content: str,
        embedding: np.ndarray,
        keywords: list[str],
        actor: str = "person",
    ) -> Operation | None:
        """Change a memory's content by hand, in one transaction: the memory (content,
        embedding, keyword index, version + 1, updated_at) and an `update` in its history
        by `actor`, with no session. The memory keeps its event time, type and where it
        came from (session, turns). None if there is no such memory."""

    @abstractmethod
    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> bool:
        """Set (None: clear) when a memory stops being served; its content and history
        are unchanged. False if there is no such memory."""

    @abstractmethod
    def sweep_expired(
        self, now: datetime, user_id: str | None = None, actor: str = "expiry"
    ) -> list[MemoryItem]:
        """Delete for good the memories whose expiry is at or before `now` (the user's
        only, if given), in one transaction, each with a `delete` in its history by
        `actor`, as `delete` does. Returns them as they were."""

    @abstractmethod
    def reset(self, user_id: str, agent_id: str | None = None, keep_log: bool = False) -> int:
        """Remove a user's memories (and, unless keep_log, their session log and its
        episodes)."""

    # --- reads -------------------------------------------------------------------
    @abstractmethod
    def get(self, memory_id: str) -> MemoryItem | None: ...

    @abstractmethod
    def get_many(self, memory_ids: list[str]) -> list[MemoryItem]:
        """Live memories among the ids, in the order given."""

    @abstractmethod
    def list_memories(
        self,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        """Live memories of a scope, oldest event first."""

    @abstractmethod
    def history(self, memory_id: str) -> list[HistoryEntry]: ...

    @abstractmethod
    def memory_ids_with_prefix(
        self,
        prefix: str,
        user_id: str | None = None,
        limit: int = AMBIGUOUS_SHOWN,
        *,
        deleted: bool = True,
    ) -> list[str]:
        """The ids that start with `prefix` (compared exactly, no case folding) of
        live memories and, with `deleted`, of deleted ones (their history is kept),
        the user's only if given; sorted by code point, the first `limit`."""

    def resolve_memory_id(
        self, prefix: str, user_id: str | None = None, *, deleted: bool = True
    ) -> str:
        """The full id of the one memory (live, or with `deleted` one whose history is
        kept) whose id is `prefix` or starts with it, as git resolves a short commit
        id; an id equal to `prefix` wins over longer ones. UnknownMemory if there is
        none, AmbiguousMemoryId (naming the candidates) if there are several."""
        found = self.memory_ids_with_prefix(prefix, user_id, AMBIGUOUS_SHOWN + 1, deleted=deleted)
        if prefix in found:
            return prefix
        if len(found) == 1:
            return found[0]
        if not found:
            whose = f" of user {user_id!r}" if user_id is not None else ""
            raise UnknownMemory(f"no memory{whose} whose id starts with {prefix!r}")
        raise AmbiguousMemoryId(prefix, found[:AMBIGUOUS_SHOWN], more=len(found) > AMBIGUOUS_SHOWN)

    def session_memories(self, session_id: str, user_id: str | None = None) -> list[MemoryItem]:
        """Each live memory the session added or updated, with the content that session
        wrote (a later session may have changed it since)."""
        written = self.session_writes(session_id, user_id)
        return [
            m.model_copy(update={"content": written[m.id]}) for m in self.get_many(list(written))
        ]

    @abstractmethod
    def session_writes(self, session_id: str, user_id: str | None = None) -> dict[str, str]:
        """memory id -> the last content the session wrote to it, in history order."""

    @abstractmethod
    def dense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        """(memory id, cosine similarity), best first."""

    @abstractmethod
    def keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        """(memory id, relevance), best first; any term may match."""

    def tier_rankings(
        self,
        user_id: str,
        vector: np.ndarray,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        *,
        facts: bool = True,
        episodes: bool = True,
    ) -> tuple[TierRanking, TierRanking]:
        """The dense and keyword rankings (k deep) of the facts and of the episodes
        a search needs, as the four search methods give them; a tier not asked for
        is left empty. A backend may answer them together (PostgreSQL: one
        statement instead of four)."""
        fact, episode = TierRanking(), TierRanking()
        if facts:
            fact.dense = self.dense_search(user_id, vector, k, agent_id, filters)
            fact.keywords = self.keyword_search(user_id, terms, k, agent_id, filters)
        if episodes:
            episode.dense = self.episode_dense_search(user_id, vector, k, agent_id, filters)
            episode.keywords = self.episode_keyword_search(user_id, terms, k, agent_id, filters)
        return fact, episode

    @abstractmethod
    def count(self, user_id: str, agent_id: str | None = None) -> int: ...

    @abstractmethod
    def list_users(self, prefix: str = "") -> list[str]:
        """Ids of the users with a logged session or a memory, those that start with
        `prefix`, sorted."""

    # --- call log ----------------------------------------------------------------
    @abstractmethod
    def log_call(self, rec: CallRecord) -> None:
        """Log one model call; a call made for a session (`rec.session_id` set) can be
        read back with `session_calls`. A user's calls are forgotten with the user
        (`reset` without keep_log)."""

    @abstractmethod
    def session_calls(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        """The model calls logged for a session (every try of it), oldest first."""

    @abstractmethod
    def close(self) -> None: ...
