"""A user's data as a whole in the PostgreSQL store (`deltamem.store.users`): read
out for an export, written back as it was by an import, forgotten for good. A
mixin of `PostgresStore`, which owns the connection."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import Jsonb

from deltamem.store.base import StoreError
from deltamem.store.common import check_embedding
from deltamem.store.pg_sql import SESSION_KEY, bump_search_version, fold, holds_nul, vector_literal
from deltamem.store.rows import POSTGRES_ROWS, stored_agent
from deltamem.store.users import USER_TABLES, ImportedMemory, UserData
from deltamem.store.vectors import VectorCache
from deltamem.types import Episode, HistoryEntry, Operation, SessionStatus, utcnow

Row = dict[str, Any]

_EPISODE_COLS = "id, user_id, agent_id, session_id, turn, role, name, content, timestamp"


class PostgresUsers(UserData):
    if TYPE_CHECKING:  # provided by PostgresStore
        dim: int
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]
        _log_history: Callable[..., None]
        _cache: Callable[[str], VectorCache]

    def user_history(self, user_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE user_id=%s ORDER BY id", (user_id,))
        return [POSTGRES_ROWS.history(r) for r in rows]

    def user_episodes(self, user_id: str) -> list[Episode]:
        rows = self._read(
            f"SELECT {_EPISODE_COLS} FROM episodes WHERE user_id=%s ORDER BY seq", (user_id,)
        )
        return [POSTGRES_ROWS.episode(r) for r in rows]

    def import_memories(self, memories: list[ImportedMemory]) -> int:
        users: set[str] = set()
        written = 0
        with self._tx() as cur:
            for m in memories:
                known = cur.execute(
                    """SELECT user_id FROM memories WHERE id=%s
                       UNION ALL SELECT user_id FROM history WHERE memory_id=%s LIMIT 1""",
                    (m.memory_id, m.memory_id),
                ).fetchone()
                if known is not None:
                    if known["user_id"] != m.user_id:
                        raise StoreError(f"memory {m.memory_id!r} belongs to another user")
                    continue
                if m.item is not None:
                    self._insert_as_was(cur, m)
                for h in m.history:
                    self._log_history(
                        cur,
                        m.memory_id,
                        m.user_id,
                        h.op,
                        h.old_content,
                        h.new_content,
                        h.session_id,
                        h.actor,
                        h.at,
                    )
                users.add(m.user_id)
                written += 1
            for user in sorted(users):
                bump_search_version(cur, user, "memories")
        return written

    def _insert_as_was(self, cur: psycopg.Cursor[Row], m: ImportedMemory) -> None:
        item = m.item
        if item is None or m.embedding is None:
            raise StoreError(f"memory {m.memory_id!r} has no embedding to import with")
        check_embedding(m.embedding, self.dim, finite=True)
        cur.execute(
            """INSERT INTO memories (id, user_id, agent_id, content, ts, timestamp, memory_type,
               keywords, session_id, turns, created_at, updated_at, version, embedding, fts_text,
               invalid_at, superseded_by, expires_at)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::vector,%s,%s,%s,%s)""",
            (
                m.memory_id,
                m.user_id,
                stored_agent(item.agent_id),
                item.content,
                item.timestamp.timestamp(),
                item.timestamp.isoformat(),
                item.memory_type or "",
                Jsonb(item.keywords),
                item.session_id,
                Jsonb(item.turns),
                item.created_at,
                item.updated_at,
                item.version,
                vector_literal(m.embedding),
                fold(" ".join([item.content, *item.keywords])),
                item.invalid_at.isoformat() if item.invalid_at else None,
                item.superseded_by,
                item.expires_at,
            ),
        )

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
        if status == "deferred":
            return False
        ops = None
        if operations is not None:
            ops = Jsonb([o.model_dump(mode="json") for o in operations])
        applied_at = utcnow() if status == "applied" else None
        with self._tx() as cur:
            cur.execute(
                f"""UPDATE sessions SET status=%s, error=%s, attempts=%s, operations=%s,
                    deferred=false, applied_at=%s
                    WHERE {SESSION_KEY} AND status='pending' AND deferred""",
                (
                    status,
                    error,
                    attempts,
                    ops,
                    applied_at,
                    user_id,
                    stored_agent(agent_id),
                    session_id,
                ),
            )
            return cur.rowcount == 1

    def session_counts(self) -> dict[str, int]:
        rows = self._read(
            """SELECT CASE WHEN status='pending' AND deferred THEN 'deferred' ELSE status END
               AS state, count(*) AS n FROM sessions GROUP BY 1"""
        )
        counts = dict.fromkeys(("pending", "deferred", "failed", "applied"), 0)
        counts.update({r["state"]: int(r["n"]) for r in rows})
        return counts

    def forget_user(self, user_id: str) -> dict[str, int]:
        """As `UserData.forget_user`. The rows are deleted in one transaction; their
        dead tuples (and index entries) are reclaimed by (auto)vacuum, as for any
        delete in PostgreSQL."""
        tables = {"memories": "memories", "episodes": "episodes", **USER_TABLES}
        removed = dict.fromkeys(tables.values(), 0)
        if holds_nul([user_id]):
            return removed
        with self._tx() as cur:
            for table, kind in tables.items():
                cur.execute(f"DELETE FROM {table} WHERE user_id=%s", (user_id,))
                removed[kind] = cur.rowcount
            cur.execute("DELETE FROM search_versions WHERE user_id=%s", (user_id,))
        for table in ("memories", "episodes"):
            self._cache(table).drop(user_id)
        return removed
