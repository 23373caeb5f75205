"""Row ↔ model mapping shared by the SQLite and PostgreSQL stores.

Both stores have the same tables with the same columns; they differ only in how
two kinds of column come back from the driver, which a `RowFormat` names:

- lists (memories.keywords, memories.turns): JSON text on SQLite, jsonb (already a
  list) on PostgreSQL;
- instants (created_at, updated_at, history.at): ISO 8601 text on SQLite,
  timestamptz (a datetime, in the session's zone) on PostgreSQL, read as UTC.

Everything else (`timestamp` as the ISO text it was given, `messages` as JSON
text, empty agent_id and memory_type meaning none) is stored alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from deltamem.types import Episode, HistoryEntry, MemoryItem, Message, SessionRecord


class Row(Protocol):
    """A row by column name: sqlite3.Row, or psycopg's dict_row."""

    def __getitem__(self, key: str, /) -> Any: ...


def stored_agent(agent_id: str | None) -> str:
    """The agent_id column of a write: '' for none (read back as None)."""
    return agent_id or ""


def episode_values(ep: Episode) -> tuple[Any, ...]:
    """An episode's columns id … timestamp, in the order both stores write them
    (each adds its own embedding encoding after them)."""
    return (
        ep.id,
        ep.user_id,
        stored_agent(ep.agent_id),
        ep.session_id,
        ep.turn,
        ep.role,
        ep.name,
        ep.content,
        ep.timestamp.timestamp(),
        ep.timestamp.isoformat(),
    )


def _as_is(value: Any) -> Any:
    return value


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


@dataclass(frozen=True)
class RowFormat:
    lists: Callable[[Any], Any]  # a stored list column -> the list
    instant: Callable[[Any], datetime]  # a stored instant column -> datetime

    def memory(self, r: Row) -> MemoryItem:
        return MemoryItem(
            id=r["id"],
            user_id=r["user_id"],
            agent_id=r["agent_id"] or None,
            content=r["content"],
            timestamp=datetime.fromisoformat(r["timestamp"]),
            memory_type=r["memory_type"] or None,
            keywords=self.lists(r["keywords"]),
            session_id=r["session_id"],
            turns=self.lists(r["turns"]),
            created_at=self.instant(r["created_at"]),
            updated_at=self.instant(r["updated_at"]),
            version=r["version"],
            invalid_at=datetime.fromisoformat(r["invalid_at"]) if r["invalid_at"] else None,
            superseded_by=r["superseded_by"],
            expires_at=self.instant(r["expires_at"]) if r["expires_at"] else None,
        )

    def history(self, r: Row) -> HistoryEntry:
        return HistoryEntry(
            memory_id=r["memory_id"],
            op=r["op"],
            old_content=r["old_content"],
            new_content=r["new_content"],
            session_id=r["session_id"],
            actor=r["actor"],
            at=self.instant(r["at"]),
            user_id=r["user_id"],
        )

    def session(self, r: Row) -> SessionRecord:
        return SessionRecord(
            user_id=r["user_id"],
            agent_id=r["agent_id"] or None,
            session_id=r["session_id"],
            timestamp=datetime.fromisoformat(r["timestamp"]),
            messages=[Message.model_validate(m) for m in json.loads(r["messages"])],
            content_hash=r["content_hash"],
            # a logged session kept from the queue until asked for (add(infer=False))
            status="deferred" if r["status"] == "pending" and r["deferred"] else r["status"],
            error=r["error"],
            attempts=r["attempts"],
            seq=r["seq"],
            expires_at=self.instant(r["expires_at"]) if r["expires_at"] else None,
        )

    @staticmethod
    def episode(r: Row) -> Episode:
        return Episode(
            id=r["id"],
            user_id=r["user_id"],
            agent_id=r["agent_id"] or None,
            session_id=r["session_id"],
            turn=r["turn"],
            role=r["role"],
            name=r["name"],
            content=r["content"],
            timestamp=datetime.fromisoformat(r["timestamp"]),
        )


SQLITE_ROWS = RowFormat(lists=json.loads, instant=datetime.fromisoformat)
POSTGRES_ROWS = RowFormat(lists=_as_is, instant=_utc)
