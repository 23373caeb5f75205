"""The memory bank of the SQLite store: applying a session's writes, deleting and
resetting, each change recorded in the memories' history, and reading memories
back. Every write bumps the user's bank version, which tells each process's
cached bank (`sqlite_search.py`) to reload. A mixin of `SQLiteStore`, which owns
the connection."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from deltamem.store.base import AMBIGUOUS_SHOWN, PlannedWrite, StoreError, UnknownMemory
from deltamem.store.common import (
    HISTORY_COLUMNS,
    added,
    check_embedding,
    check_unapplied,
    expiry_text,
    history_row,
    invalidated,
    prefix_end,
    read_session_writes,
    updated,
    written_values,
)
from deltamem.store.rows import SQLITE_ROWS, stored_agent
from deltamem.store.sqlite_sql import FIRST_VERSION, count_rows, filter_sql
from deltamem.types import HistoryEntry, MemoryItem, Operation, SearchFilters, SessionRecord, utcnow


class SQLiteMemories:
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        dim: int
        _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _read: Callable[..., list[sqlite3.Row]]
        _remove_episodes: Callable[[sqlite3.Connection, str, list], None]

    # --- writes ------------------------------------------------------------------
    def apply_session(
        self, session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        now = utcnow().isoformat()
        applied: list[Operation] = []
        agent = stored_agent(session.agent_id)
        with self._tx() as db:
            state = db.execute(
                """SELECT status, content_hash FROM sessions
                   WHERE user_id=? AND agent_id=? AND session_id=?""",
                (session.user_id, agent, session.session_id),
            ).fetchone()
            check_unapplied(state, session)
            for w in writes:
                check_embedding(w.embedding, self.dim)
                if w.op == "add":
                    applied.append(self._insert(db, session, w, now))
                elif w.op == "update":
                    applied.append(self._update(db, session, w, now))
                else:
                    raise StoreError(f"cannot apply operation {w.op!r}")
                by = applied[-1].memory_id
                for target in w.outdates:
                    if op := self._invalidate(db, session, target, by, w.outdates_rule, now):
                        applied.append(op)
            ops = applied + noops
            if writes:
                self._bump(db, session.user_id)
            db.execute(
                """UPDATE sessions SET status='applied', error=NULL, operations=?, applied_at=?,
                   attempts=attempts+1, deferred=0
                   WHERE user_id=? AND agent_id=? AND session_id=?""",
                (
                    json.dumps([o.model_dump(mode="json") for o in ops]),
                    now,
                    session.user_id,
                    agent,
                    session.session_id,
                ),
            )
        return ops

    @staticmethod
    def _bump(db: sqlite3.Connection, user_id: str) -> None:
        db.execute(
            f"""INSERT INTO bank_versions (user_id, version) VALUES (?, {FIRST_VERSION})
               ON CONFLICT (user_id) DO UPDATE SET version = version + 1""",
            (user_id,),
        )

    @staticmethod
    def _blob(vec: np.ndarray) -> bytes:
        return np.asarray(vec, dtype=np.float32).tobytes()

    @staticmethod
    def _log_history(db: sqlite3.Connection, *values: Any) -> None:
        """One history row, its values in the order of HISTORY_COLUMNS."""
        db.execute(
            f"INSERT INTO history ({HISTORY_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
            values,
        )

    @staticmethod
    def _reindex_keywords(
        db: sqlite3.Connection, rowid: int, content: str, keywords: list[str]
    ) -> None:
        """Replace a memory's row of the FTS5 index with its new text."""
        db.execute("DELETE FROM memories_fts WHERE rowid=?", (rowid,))
        db.execute(
            "INSERT INTO memories_fts (rowid, content, keywords) VALUES (?,?,?)",
            (rowid, content, " ".join(keywords)),
        )

    def _insert(
        self, db: sqlite3.Connection, session: SessionRecord, w: PlannedWrite, now: str
    ) -> Operation:
        mid = w.memory_id or uuid.uuid4().hex
        if w.memory_id and db.execute("SELECT 1 FROM memories WHERE id=?", (mid,)).fetchone():
            raise StoreError(f"a memory {mid!r} exists already")
        cur = db.execute(
            """INSERT INTO memories (id, user_id, agent_id, content, ts, timestamp, memory_type,
               keywords, session_id, turns, created_at, updated_at, embedding, expires_at)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                mid,
                session.user_id,
                stored_agent(session.agent_id),
                *written_values(session, w, json.dumps),
                now,
                now,
                self._blob(w.embedding),
                expiry_text(w.expires_at),
            ),
        )
        db.execute(
            "INSERT INTO memories_fts (rowid, content, keywords) VALUES (?,?,?)",
            (cur.lastrowid, w.content, " ".join(w.keywords)),
        )
        op = added(mid, w)
        self._log_history(db, *history_row(op, session, now))
        return op

    def _update(
        self, db: sqlite3.Connection, session: SessionRecord, w: PlannedWrite, now: str
    ) -> Operation:
        row = db.execute(
            "SELECT rowid, content, memory_type FROM memories WHERE id=? AND user_id=?",
            (w.memory_id, session.user_id),
        ).fetchone()
        if row is None:
            raise UnknownMemory(f"update of unknown memory {w.memory_id!r}")
        rowid = row["rowid"]
        w.memory_type = w.memory_type or row["memory_type"] or None
        db.execute(
            """UPDATE memories SET content=?, ts=?, timestamp=?, memory_type=?, keywords=?,
               session_id=?, turns=?, updated_at=?, version=version+1, embedding=?,
               expires_at=COALESCE(?, expires_at) WHERE rowid=?""",
            (
                *written_values(session, w, json.dumps),
                now,
                self._blob(w.embedding),
                expiry_text(w.expires_at),
                rowid,
            ),
        )
        self._reindex_keywords(db, rowid, w.content, w.keywords)
        op = updated(w, row["content"])
        self._log_history(db, *history_row(op, session, now))
        return op

    def _invalidate(
        self,
        db: sqlite3.Connection,
        session: SessionRecord,
        memory_id: str,
        by: str | None,
        rule: str | None,
        now: str,
    ) -> Operation | None:
        """Mark a stored memory of the session's user as no longer holding (once)."""
        row = db.execute(
            "SELECT content FROM memories WHERE id=? AND user_id=? AND invalid_at IS NULL",
            (memory_id, session.user_id),
        ).fetchone()
        if row is None or memory_id == by:
            return None
        db.execute(
            "UPDATE memories SET invalid_at=?, superseded_by=?, updated_at=? WHERE id=?",
            (session.timestamp.isoformat(), by, now, memory_id),
        )
        op = invalidated(memory_id, row["content"], by, rule)
        self._log_history(db, *history_row(op, session, now))
        return op

    def _remove_rows(self, db: sqlite3.Connection, rowids: list[int]) -> None:
        for chunk in range(0, len(rowids), 500):
            part = rowids[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            db.execute(f"DELETE FROM memories_fts WHERE rowid IN ({marks})", part)
            db.execute(f"DELETE FROM memories WHERE rowid IN ({marks})", part)

    def delete(self, memory_id: str, actor: str = "api") -> bool:
        with self._tx() as db:
            row = db.execute(
                "SELECT rowid, user_id, content FROM memories WHERE id=?", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._remove_rows(db, [row["rowid"]])
            self._bump(db, row["user_id"])
            self._log_history(
                db,
                memory_id,
                row["user_id"],
                "delete",
                row["content"],
                None,
                None,
                actor,
                utcnow().isoformat(),
            )
            return True

    def set_expiry(self, memory_id: str, expires_at: datetime | None) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE memories SET expires_at=?, updated_at=? WHERE id=?",
                (expiry_text(expires_at), utcnow().isoformat(), memory_id),
            )
            return cur.rowcount > 0

    def sweep_expired(
        self, now: datetime, user_id: str | None = None, actor: str = "expiry"
    ) -> list[MemoryItem]:
        where, params = "expires_at IS NOT NULL AND expires_at <= ?", [expiry_text(now)]
        if user_id is not None:
            where += " AND user_id=?"
            params.append(user_id)
        with self._tx() as db:
            rows = db.execute(f"SELECT rowid, * FROM memories WHERE {where}", params).fetchall()
            gone = [SQLITE_ROWS.memory(r) for r in rows]
            self._remove_rows(db, [r["rowid"] for r in rows])
            at = utcnow().isoformat()
            for m in gone:
                self._log_history(db, m.id, m.user_id, "delete", m.content, None, None, actor, at)
            for user in sorted({m.user_id for m in gone}):
                self._bump(db, user)
        return gone

    def reset(self, user_id: str, agent_id: str | None = None, keep_log: bool = False) -> int:
        scope, params = "user_id=?", [user_id]
        if agent_id is not None:
            scope += " AND agent_id=?"
            params.append(agent_id)
        with self._tx() as db:
            rows = db.execute(f"SELECT rowid, id FROM memories WHERE {scope}", params).fetchall()
            self._remove_rows(db, [r["rowid"] for r in rows])
            self._bump(db, user_id)
            if agent_id is None:
                db.execute("DELETE FROM history WHERE user_id=?", (user_id,))
            else:
                ids = [r["id"] for r in rows]
                for i in range(0, len(ids), 500):
                    part = ids[i : i + 500]
                    db.execute(
                        f"DELETE FROM history WHERE memory_id IN ({','.join('?' * len(part))})",
                        part,
                    )
            if keep_log:
                db.execute(
                    f"UPDATE sessions SET status='pending', operations=NULL, applied_at=NULL, "
                    f"error=NULL WHERE {scope}",
                    params,
                )
            else:
                db.execute(f"DELETE FROM sessions WHERE {scope}", params)
                self._remove_episodes(db, scope, params)
                # the raw replies quote the user: forgotten with them
                db.execute(f"DELETE FROM llm_calls WHERE {scope}", params)
            return len(rows)

    # --- reads ---------------------------------------------------------------------
    def get(self, memory_id: str) -> MemoryItem | None:
        rows = self._read("SELECT * FROM memories WHERE id=?", (memory_id,))
        return SQLITE_ROWS.memory(rows[0]) if rows else None

    def get_many(self, memory_ids: list[str]) -> list[MemoryItem]:
        if not memory_ids:
            return []
        found: dict[str, MemoryItem] = {}
        for i in range(0, len(memory_ids), 500):
            part = memory_ids[i : i + 500]
            rows = self._read(
                f"SELECT * FROM memories WHERE id IN ({','.join('?' * len(part))})", part
            )
            found.update({r["id"]: SQLITE_ROWS.memory(r) for r in rows})
        return [found[i] for i in memory_ids if i in found]

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
            extra += " AND (expires_at IS NULL OR expires_at > ?)"
            params.append(expiry_text(utcnow()))
        sql = f"SELECT * FROM memories WHERE user_id=?{extra} ORDER BY ts, rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [SQLITE_ROWS.memory(r) for r in self._read(sql, [user_id, *params])]

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE memory_id=? ORDER BY id", (memory_id,))
        return [SQLITE_ROWS.history(r) for r in rows]

    def memory_ids_with_prefix(
        self,
        prefix: str,
        user_id: str | None = None,
        limit: int = AMBIGUOUS_SHOWN,
        *,
        deleted: bool = True,
    ) -> list[str]:
        # a range on the id, so that the indexes on memories.id and history.memory_id
        # find them (LIKE folds ASCII case and reads '%' and '_' as wildcards)
        end = prefix_end(prefix)
        where, params = "{col} >= ?", [prefix]
        if end is not None:
            where += " AND {col} < ?"
            params.append(end)
        if user_id is not None:
            where += " AND user_id = ?"
            params.append(user_id)
        sql, args = f"SELECT id FROM memories WHERE {where.format(col='id')}", list(params)
        if deleted:
            sql += f" UNION SELECT memory_id FROM history WHERE {where.format(col='memory_id')}"
            args += params
        rows = self._read(f"{sql} ORDER BY 1 LIMIT ?", [*args, int(limit)])
        return [r[0] for r in rows]

    def session_writes(self, session_id: str, user_id: str | None = None) -> dict[str, str]:
        return read_session_writes(self._read, "?", session_id, user_id)

    def count(self, user_id: str, agent_id: str | None = None) -> int:
        return count_rows(self._read, "memories", user_id, agent_id)
