"""A user's data as a whole: read out for an export, written back by an import, and
forgotten; and the session log counted by status, for the service's metrics. Both
stores implement this port beside `Store` (`sqlite_users.py`, `postgres_users.py`);
the library side is `deltamem.porting`.

An import writes what an export read, as it was: a memory keeps its id, times,
version and provenance, and its history keeps its entries (who, when, which
session), which no write path of `Store` can do (each records a new change now).
Sessions and episodes go through `Store.log_session`, as any session does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from deltamem.store.base import StoreError
from deltamem.types import Episode, HistoryEntry, MemoryItem, Operation, SessionStatus

# the tables, besides memories and episodes, whose rows name a user in a `user_id`
# column, and the kind `forget_user` reports their rows as; tests/test_forget.py
# checks every table of each schema, so that a table added later is not missed
USER_TABLES = {
    "sessions": "sessions",
    "history": "history",
    "llm_calls": "calls",
    "user_leases": "leases",
}


@dataclass
class ImportedMemory:
    """One memory of an import: the live memory with its new embedding (None for a
    deleted memory, of which only the history is kept) and its history, oldest first."""

    memory_id: str
    user_id: str
    item: MemoryItem | None
    embedding: np.ndarray | None
    history: list[HistoryEntry] = field(default_factory=list)


class UserData(ABC):
    """What export, import and forget need of a store beyond the `Store` port."""

    @abstractmethod
    def user_history(self, user_id: str) -> list[HistoryEntry]:
        """Every history entry of the user's memories, deleted ones included, oldest
        first."""

    @abstractmethod
    def user_episodes(self, user_id: str) -> list[Episode]:
        """The user's episodes (every agent), in the order they were indexed."""

    @abstractmethod
    def import_memories(self, memories: list[ImportedMemory]) -> int:
        """Write the memories as given, in one transaction; a memory whose id the store
        knows already (live, or deleted with its history kept) is left as it is, so
        that importing twice changes nothing. StoreError if such an id belongs to
        another user. Returns how many were written."""

    @abstractmethod
    def restore_session(
        self,
        user_id: str,
        session_id: str,
        agent_id: str | None,
        *,
        status: SessionStatus,
        error: str | None,
        attempts: int,
        operations: list[Operation] | None,
    ) -> bool:
        """Give a session that an import logged "deferred" (out of the queue) the state
        it had where it was exported. Only a session still deferred changes (one a
        worker has applied since is left alone); True if it did."""

    @abstractmethod
    def session_counts(self) -> dict[str, int]:
        """How many sessions of the log (every user) are in each status: pending (the
        queue), deferred, failed (parked), applied. One aggregate query, for the
        service's metrics."""

    @abstractmethod
    def forget_user(self, user_id: str) -> dict[str, int]:
        """Remove everything the store holds of the user, from every table, in one
        transaction: sessions, memories, history, episodes, their keyword index rows,
        model calls, leases, bank versions, and the user's banks cached in this
        process. Returns the rows removed by kind: sessions, memories, history,
        episodes, calls, leases."""


def users_of(store: object) -> UserData:
    """The store's `UserData` side; StoreError for a store without one."""
    if not isinstance(store, UserData):
        raise StoreError(f"{type(store).__name__} cannot export, import or forget a user")
    return store
