"""A user's data as a whole in the SQLite store (`deltamem.store.users`): read out
for an export, written back as it was by an import, forgotten for good. A mixin of
`SQLiteStore`, which owns the connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from deltamem.store.base import StoreError
from deltamem.store.common import check_embedding, expiry_text
from deltamem.store.rows import SQLITE_ROWS, stored_agent
from deltamem.store.users import USER_TABLES, ImportedMemory, UserData
from deltamem.store.vectors import VectorCache
from deltamem.types import Episode, HistoryEntry, Operation, SessionStatus, utcnow

# besides USER_TABLES (memories and episodes go with their FTS5 rows, through
# `_remove_rows` and `_remove_episodes`)
_VERSION_TABLES = ("bank_versions", "episode_versions")


class SQLiteUsers(UserData):
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        dim: int
        path: str
        _db: sqlite3.Connection
        _lock: Any
        _vectors: VectorCache
        _episode_vectors: VectorCache
        _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _read: Callable[..., list[sqlite3.Row]]
        _blob: Callable[[Any], bytes]
        _bump: Callable[[sqlite3.Connection, str], None]
        _log_history: Callable[..., None]
        _remove_rows: Callable[[sqlite3.Connection, list[int]], None]
        _remove_episodes: Callable[[sqlite3.Connection, str, list], None]

    def user_history(self, user_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE user_id=? ORDER BY id", (user_id,))
        return [SQLITE_ROWS.history(r) for r in rows]

    def user_episodes(self, user_id: str) -> list[Episode]:
        rows = self._read("SELECT * FROM episodes WHERE user_id=? ORDER BY rowid", (user_id,))
        return [SQLITE_ROWS.episode(r) for r in rows]

    def import_memories(self, memories: list[ImportedMemory]) -> int:
        users: set[str] = set()
        written = 0
        with self._tx() as db:
            for m in memories:
                known = db.execute(
                    """SELECT user_id FROM memories WHERE id=?
                       UNION ALL SELECT user_id FROM history WHERE memory_id=? LIMIT 1""",
                    (m.memory_id, m.memory_id),
                ).fetchone()
                if known is not None:
                    if known["user_id"] != m.user_id:
                        raise StoreError(f"memory {m.memory_id!r} belongs to another user")
                    continue
                if m.item is not None:
                    self._insert_as_was(db, m)
                for h in m.history:
                    self._log_history(
                        db,
                        m.memory_id,
                        m.user_id,
                        h.op,
                        h.old_content,
                        h.new_content,
                        h.session_id,
                        h.actor,
                        h.at.isoformat(),
                    )
                users.add(m.user_id)
                written += 1
            for user in sorted(users):
                self._bump(db, user)
        return written

    def _insert_as_was(self, db: sqlite3.Connection, m: ImportedMemory) -> None:
        item = m.item
        if item is None or m.embedding is None:
            raise StoreError(f"memory {m.memory_id!r} has no embedding to import with")
        check_embedding(m.embedding, self.dim)
        cur = db.execute(
            """INSERT INTO memories (id, user_id, agent_id, content, ts, timestamp, memory_type,
               keywords, session_id, turns, created_at, updated_at, version, embedding,
               invalid_at, superseded_by, expires_at)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                m.memory_id,
                m.user_id,
                stored_agent(item.agent_id),
                item.content,
                item.timestamp.timestamp(),
                item.timestamp.isoformat(),
                item.memory_type or "",
                json.dumps(item.keywords),
                item.session_id,
                json.dumps(item.turns),
                item.created_at.isoformat(),
                item.updated_at.isoformat(),
                item.version,
                self._blob(m.embedding),
                item.invalid_at.isoformat() if item.invalid_at else None,
                item.superseded_by,
                expiry_text(item.expires_at),
            ),
        )
        db.execute(
            "INSERT INTO memories_fts (rowid, content, keywords) VALUES (?,?,?)",
            (cur.lastrowid, item.content, " ".join(item.keywords)),
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
            ops = json.dumps([o.model_dump(mode="json") for o in operations])
        applied_at = utcnow().isoformat() if status == "applied" else None
        with self._tx() as db:
            cur = db.execute(
                """UPDATE sessions SET status=?, error=?, attempts=?, operations=?, deferred=0,
                   applied_at=? WHERE user_id=? AND agent_id=? AND session_id=?
                   AND status='pending' AND deferred=1""",
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
            """SELECT CASE WHEN status='pending' AND deferred=1 THEN 'deferred' ELSE status END
               AS state, count(*) AS n FROM sessions GROUP BY 1"""
        )
        counts = dict.fromkeys(("pending", "deferred", "failed", "applied"), 0)
        counts.update({r["state"]: int(r["n"]) for r in rows})
        return counts

    def forget_user(self, user_id: str) -> dict[str, int]:
        """As `UserData.forget_user`. The deleted rows' bytes are overwritten
        (secure_delete), the keyword indexes are merged so that their segments keep
        no term of the user's, and the WAL is checkpointed: the user's text is gone
        from the file, not only from the tables."""
        removed: dict[str, int] = {}
        with self._lock:
            secure = self._db.execute("PRAGMA secure_delete").fetchone()[0]
            self._db.execute("PRAGMA secure_delete=ON")
            try:
                with self._tx() as db:
                    rows = db.execute(
                        "SELECT rowid FROM memories WHERE user_id=?", (user_id,)
                    ).fetchall()
                    self._remove_rows(db, [r["rowid"] for r in rows])
                    removed["memories"] = len(rows)
                    removed["episodes"] = db.execute(
                        "SELECT count(*) FROM episodes WHERE user_id=?", (user_id,)
                    ).fetchone()[0]
                    self._remove_episodes(db, "user_id=?", [user_id])
                    for table, kind in USER_TABLES.items():
                        cur = db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
                        removed[kind] = cur.rowcount
                    for table in _VERSION_TABLES:
                        db.execute(f"DELETE FROM {table} WHERE user_id=?", (user_id,))
                    if removed["memories"]:
                        db.execute("INSERT INTO memories_fts (memories_fts) VALUES ('optimize')")
                    if removed["episodes"]:
                        db.execute("INSERT INTO episodes_fts (episodes_fts) VALUES ('optimize')")
            finally:
                self._db.execute(f"PRAGMA secure_delete={int(secure)}")
            if self.path != ":memory:":
                # other connections may still read old pages: then the WAL is
                # truncated at their next checkpoint, not now
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._vectors.drop(user_id)
        self._episode_vectors.drop(user_id)
        return removed
