"""The memory bank of the PostgreSQL store: applying a session's writes, deleting
and resetting, each change recorded in the memories' history, and reading
memories back. Every write bumps the user's search version in its transaction,
which tells each process's cached bank (`postgres_search.py`) to reload. A mixin
of `PostgresStore`, which owns the connection."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.types.json import Jsonb

from deltamem.store.base import AMBIGUOUS_SHOWN, PlannedWrite, StoreError, UnknownMemory
from deltamem.store.common import (
    HISTORY_COLUMNS,
    added,
    check_embedding,
    check_unapplied,
    history_row,
    invalidated,
    read_session_writes,
    updated,
    written_values,
)
from deltamem.store.pg_sql import (
    SESSION_KEY,
    bump_search_version,
    filter_sql,
    fold,
    holds_nul,
    vector_literal,
)
from deltamem.store.rows import POSTGRES_ROWS, stored_agent
from deltamem.types import HistoryEntry, MemoryItem, Operation, SearchFilters, SessionRecord, utcnow

Row = dict[str, Any]

_MEMORY_COLS = (
    "id, user_id, agent_id, content, timestamp, memory_type, keywords, session_id, turns, "
    "created_at, updated_at, version, invalid_at, superseded_by, expires_at"
)


def _fts_text(w: PlannedWrite) -> str:
    return fold(" ".join([w.content, *w.keywords]))


class PostgresMemories:
    if TYPE_CHECKING:  # provided by PostgresStore
        dim: int
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]

    # --- writes ------------------------------------------------------------------
    def apply_session(
        self, session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        now = utcnow()
        key = (session.user_id, stored_agent(session.agent_id), session.session_id)
        applied: list[Operation] = []
        with self._tx() as cur:
            # The row lock makes a concurrent apply of the same session wait, then refuse.
            state = cur.execute(
                f"SELECT status, content_hash FROM sessions WHERE {SESSION_KEY} FOR UPDATE", key
            ).fetchone()
            check_unapplied(state, session)
            for w in writes:
                check_embedding(w.embedding, self.dim, finite=True)
                if w.op == "add":
                    applied.append(self._insert(cur, session, w, now))
                elif w.op == "update":
                    applied.append(self._update(cur, session, w, now))
                else:
                    raise StoreError(f"cannot apply operation {w.op!r}")
                by = applied[-1].memory_id
                for target in w.outdates:
                    if op := self._invalidate(cur, session, target, by, w.outdates_rule, now):
                        applied.append(op)
            ops = applied + noops
            cur.execute(
                f"""UPDATE sessions SET status='applied', error=NULL, operations=%s,
                    applied_at=%s, attempts=attempts+1, deferred=false WHERE {SESSION_KEY}""",
                (Jsonb([o.model_dump(mode="json") for o in ops]), now, *key),
            )
            if writes:
                bump_search_version(cur, session.user_id, "memories")
        return ops

    @staticmethod
    def _log_history(cur: psycopg.Cursor[Row], *values: Any) -> None:
        """One history row, its values in the order of HISTORY_COLUMNS."""
        cur.execute(
            f"INSERT INTO history ({HISTORY_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
            values,
        )

    def _insert(
        self, cur: psycopg.Cursor[Row], session: SessionRecord, w: PlannedWrite, now: datetime
    ) -> Operation:
        mid = w.memory_id or uuid.uuid4().hex
        if w.memory_id:
            cur.execute("SELECT 1 FROM memories WHERE id=%s", (mid,))
            if cur.fetchone():
                raise StoreError(f"a memory {mid!r} exists already")
        cur.execute(
            """INSERT INTO memories (id, user_id, agent_id, content, ts, timestamp, memory_type,
               keywords, session_id, turns, created_at, updated_at, embedding, fts_text,
               expires_at)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::vector,%s,%s)""",
            (
                mid,
                session.user_id,
                stored_agent(session.agent_id),
                *written_values(session, w, Jsonb),
                now,
                now,
                vector_literal(w.embedding),
                _fts_text(w),
                w.expires_at,
            ),
        )
        op = added(mid, w)
        self._log_history(cur, *history_row(op, session, now))
        return op

    def _update(
        self, cur: psycopg.Cursor[Row], session: SessionRecord, w: PlannedWrite, now: datetime
    ) -> Operation:
        row = cur.execute(
            "SELECT content, memory_type FROM memories WHERE id=%s AND user_id=%s FOR UPDATE",
            (w.memory_id, session.user_id),
        ).fetchone()
        if row is None:
            raise UnknownMemory(f"update of unknown memory {w.memory_id!r}")
        w.memory_type = w.memory_type or row["memory_type"] or None
        cur.execute(
            """UPDATE memories SET content=%s, ts=%s, timestamp=%s, memory_type=%s, keywords=%s,
               session_id=%s, turns=%s, updated_at=%s, version=version+1, embedding=%s::vector,
               fts_text=%s, expires_at=COALESCE(%s, expires_at) WHERE id=%s""",
            (
                *written_values(session, w, Jsonb),
                now,
                vector_literal(w.embedding),
                _fts_text(w),
                w.expires_at,
                w.memory_id,
            ),
        )
        op = updated(w, row["content"])
        self._log_history(cur, *history_row(op, session, now))
        return op

    def _invalidate(
        self,
        cur: psycopg.Cursor[Row],
        session: SessionRecord,
        memory_id: str,
        by: str | None,
        rule: str | None,
        now: datetime,
    ) -> Operation | None:
        """Mark a stored memory of the session's user as no longer holding (once)."""
        row = cur.execute(
            """SELECT content FROM memories WHERE id=%s AND user_id=%s AND invalid_at IS NULL
               FOR UPDATE""",
            (memory_id, session.user_id),
        ).fetchone()
        if row is None or memory_id == by:
            return None
        cur.execute(
            "UPDATE memories SET invalid_at=%s, superseded_by=%s, updated_at=%s WHERE id=%s",
            (session.timestamp.isoformat(), by, now, memory_id),
        )
        op = invalidated(memory_id, row["content"], by, rule)
        self._log_history(cur, *history_row(op, session, now))
        return op

    def delete(self, memory_id: str, actor: str = "api") -> bool:
        if holds_nul([memory_id]):
            return False
        with self._tx() as cur:
            row = cur.execute(
                "DELETE FROM memories WHERE id=%s RETURNING user_id, content", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._log_history(
                cur,
                memory_id,
                row["user_id"],
                "delete",
                row["content"],
                None,
                None,
                actor,
                utcnow(),
            )
            bump_search_version(cur, row["user_id"], "memories")
            return True

    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> bool:
        if holds_nul([memory_id]):
            return False
        with self._tx() as cur:
            cur.execute(
                "UPDATE memories SET expires_at=%s, updated_at=%s WHERE id=%s",
                (expires_at, utcnow(), memory_id),
            )
            return cur.rowcount > 0

    def sweep_expired(
        self, now: datetime, user_id: str | None = None, actor: str = "expiry"
    ) -> list[MemoryItem]:
        if holds_nul([user_id]):
            return []
        where = "expires_at IS NOT NULL AND expires_at <= %s"
        params: list[Any] = [now]
        if user_id is not None:
            where += " AND user_id=%s"
            params.append(user_id)
        with self._tx() as cur:
            rows = cur.execute(
                f"DELETE FROM memories WHERE {where} RETURNING {_MEMORY_COLS}", params
            ).fetchall()
            gone = [POSTGRES_ROWS.memory(r) for r in rows]
            at = utcnow()
            for m in gone:
                self._log_history(cur, m.id, m.user_id, "delete", m.content, None, None, actor, at)
            for user in sorted({m.user_id for m in gone}):
                bump_search_version(cur, user, "memories")
        return gone

    def reset(self, user_id: str, agent_id: str | None = None, keep_log: bool = False) -> int:
        if holds_nul([user_id, agent_id]):
            return 0
        scope, params = "user_id=%s", [user_id]
        if agent_id is not None:
            scope += " AND agent_id=%s"
            params.append(agent_id)
        with self._tx() as cur:
            ids = [
                r["id"]
                for r in cur.execute(
                    f"DELETE FROM memories WHERE {scope} RETURNING id", params
                ).fetchall()
            ]
            if agent_id is None:
                cur.execute("DELETE FROM history WHERE user_id=%s", (user_id,))
            else:
                cur.execute("DELETE FROM history WHERE memory_id = ANY(%s)", (ids,))
            if keep_log:
                cur.execute(
                    f"""UPDATE sessions SET status='pending', operations=NULL, applied_at=NULL,
                        error=NULL WHERE {scope}""",
                    params,
                )
            else:
                cur.execute(f"DELETE FROM sessions WHERE {scope}", params)
                cur.execute(f"DELETE FROM episodes WHERE {scope}", params)
                # the raw replies quote the user: forgotten with them
                cur.execute(f"DELETE FROM llm_calls WHERE {scope}", params)
            bump_search_version(cur, user_id, "memories", *([] if keep_log else ["episodes"]))
            return len(ids)

    # --- reads ---------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryItem | None:
        rows = self._read(f"SELECT {_MEMORY_COLS} FROM memories WHERE id=%s", (memory_id,))
        return POSTGRES_ROWS.memory(rows[0]) if rows else None

    def get_many(self, memory_ids: list[str]) -> list[MemoryItem]:
        if not memory_ids:
            return []
        rows = self._read(
            f"SELECT {_MEMORY_COLS} FROM memories WHERE id = ANY(%s)", (list(memory_ids),)
        )
        found = {r["id"]: POSTGRES_ROWS.memory(r) for r in rows}
        return [found[i] for i in memory_ids if i in found]

    @staticmethod
    def _limit(n: int | None) -> int | None:
        """SQLite's LIMIT: a negative one means none (LIMIT NULL here)."""
        return None if n is None or n < 0 else int(n)

    def list_memories(
        self,
        user_id: str,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        limit: int | None = None,
    ) -> list[MemoryItem]:
        extra, params = filter_sql(agent_id, filters)
        if filters is None or not filters.outdated:
            extra += " AND invalid_at IS NULL"
        if filters is None or not filters.expired:
            extra += " AND (expires_at IS NULL OR expires_at > %s)"
            params.append(utcnow())
        rows = self._read(
            f"""SELECT {_MEMORY_COLS} FROM memories WHERE user_id=%s{extra}
                ORDER BY ts, seq LIMIT %s""",
            [user_id, *params, self._limit(limit)],
        )
        return [POSTGRES_ROWS.memory(r) for r in rows]

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE memory_id=%s ORDER BY id", (memory_id,))
        return [POSTGRES_ROWS.history(r) for r in rows]

    def memory_ids_with_prefix(
        self,
        prefix: str,
        user_id: str | None = None,
        limit: int = AMBIGUOUS_SHOWN,
        *,
        deleted: bool = True,
    ) -> list[str]:
        # starts_with compares exactly (LIKE would read '%' and '_' as wildcards);
        # sorted by code point, as SQLite sorts them, whatever the database's collation
        where, params = "starts_with({col}, %s)", [prefix]
        if user_id is not None:
            where += " AND user_id = %s"
            params.append(user_id)
        sql, args = f"SELECT id FROM memories WHERE {where.format(col='id')}", list(params)
        if deleted:
            sql += f" UNION SELECT memory_id FROM history WHERE {where.format(col='memory_id')}"
            args += params
        rows = self._read(
            f'SELECT id FROM ({sql}) AS found ORDER BY id COLLATE "C" LIMIT %s',
            [*args, int(limit)],
        )
        return [r["id"] for r in rows]

    def session_writes(self, session_id: str, user_id: str | None = None) -> dict[str, str]:
        return read_session_writes(self._read, "%s", session_id, user_id)

    def count(self, user_id: str, agent_id: str | None = None) -> int:
        extra, params = filter_sql(agent_id, None)
        rows = self._read(
            f"SELECT count(*) AS n FROM memories WHERE user_id=%s{extra}", [user_id, *params]
        )
        return int(rows[0]["n"])
