"""The session log of the SQLite store: each session durably logged before
extraction, its state as workers apply or park it, the per-user leases that let
one worker at a time apply a user's sessions, and the log of model calls. A mixin
of `SQLiteStore`, which owns the connection."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from deltamem.llm.base import CallRecord
from deltamem.store.base import PlannedEpisode
from deltamem.store.common import CALL_COLUMNS, call_values, conflict, expiry_text
from deltamem.store.rows import SQLITE_ROWS, stored_agent
from deltamem.types import Operation, SessionRecord, SessionStatus, utcnow

# a deferred session (added with infer=False) is a pending row with `deferred` set
_STATUS_WHERE = {
    "pending": "status='pending' AND deferred=0",
    "deferred": "status='pending' AND deferred=1",
}


class SQLiteSessionLog:
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _read: Callable[..., list[sqlite3.Row]]
        _insert_episodes: Callable[[sqlite3.Connection, list[PlannedEpisode]], int]
        _remove_episodes: Callable[[sqlite3.Connection, str, list[str]], None]

    def log_session(
        self, rec: SessionRecord, episodes: list[PlannedEpisode] | None = None
    ) -> tuple[SessionRecord, bool]:
        with self._tx() as db:
            row = db.execute(
                "SELECT * FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
                (rec.user_id, stored_agent(rec.agent_id), rec.session_id),
            ).fetchone()
            if row is not None:
                if row["content_hash"] != rec.content_hash:
                    raise conflict(rec)
                return SQLITE_ROWS.session(row), False
            messages = json.dumps([m.model_dump(mode="json") for m in rec.messages])
            cur = db.execute(
                """INSERT INTO sessions (user_id, agent_id, session_id, ts, timestamp, messages,
                   content_hash, created_at, indexed, deferred, expires_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    rec.user_id,
                    stored_agent(rec.agent_id),
                    rec.session_id,
                    rec.timestamp.timestamp(),
                    rec.timestamp.isoformat(),
                    messages,
                    rec.content_hash,
                    utcnow().isoformat(),
                    int(episodes is not None),
                    int(rec.status == "deferred"),
                    expiry_text(rec.expires_at),
                ),
            )
            if episodes:
                self._insert_episodes(db, episodes)
            status = "deferred" if rec.status == "deferred" else "pending"
            return rec.model_copy(update={"seq": cur.lastrowid, "status": status}), True

    def get_session(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        rows = self._read(
            "SELECT * FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
            (user_id, stored_agent(agent_id), session_id),
        )
        return SQLITE_ROWS.session(rows[0]) if rows else None

    def list_sessions(
        self,
        user_id: str | None = None,
        status: SessionStatus | None = None,
        limit: int | None = None,
    ) -> list[SessionRecord]:
        where, params = [], []
        if user_id is not None:
            where.append("user_id=?")
            params.append(user_id)
        if status is not None:
            where.append(_STATUS_WHERE.get(status, "status=?"))
            params.extend([] if status in _STATUS_WHERE else [status])
        sql = "SELECT * FROM sessions" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY seq" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [SQLITE_ROWS.session(r) for r in self._read(sql, params)]

    def mark_failed(self, user_id: str, session_id: str, agent_id: str | None, error: str) -> None:
        with self._tx() as db:
            db.execute(
                """UPDATE sessions SET status='failed', error=?, attempts=attempts+1, deferred=0
                   WHERE user_id=? AND agent_id=? AND session_id=? AND status!='applied'""",
                (error[:2000], user_id, stored_agent(agent_id), session_id),
            )

    def requeue_session(self, user_id: str, session_id: str, agent_id: str | None = None) -> bool:
        with self._tx() as db:
            cur = db.execute(
                """UPDATE sessions SET status='pending', attempts=0, deferred=0
                   WHERE user_id=? AND agent_id=? AND session_id=?
                   AND (status='failed' OR (status='pending' AND deferred=1))""",
                (user_id, stored_agent(agent_id), session_id),
            )
            return cur.rowcount == 1

    def cancel_session(
        self, user_id: str, session_id: str, agent_id: str | None = None, seq: int | None = None
    ) -> SessionStatus | None:
        key = [user_id, stored_agent(agent_id), session_id]
        where = "user_id=? AND agent_id=? AND session_id=?"
        with self._tx() as db:
            row = db.execute(f"SELECT * FROM sessions WHERE {where}", key).fetchone()
            status = None if row is None else SQLITE_ROWS.session(row).status
            if row is not None and seq is not None and row["seq"] != seq:
                return status
            if status is not None and status != "applied":
                db.execute(f"DELETE FROM sessions WHERE {where}", key)
                self._remove_episodes(db, where, key)
            if status != "applied":
                db.execute(f"DELETE FROM llm_calls WHERE {where}", key)
            return status

    def session_operations(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        rows = self._read(
            "SELECT operations FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
            (user_id, stored_agent(agent_id), session_id),
        )
        if not rows or rows[0]["operations"] is None:
            return []
        return [Operation.model_validate(o) for o in json.loads(rows[0]["operations"])]

    # --- user leases (one machine: the processes share its clock) --------------------
    def acquire_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        now = time.time()
        with self._tx() as db:
            db.execute(
                """INSERT INTO user_leases (user_id, owner, expires_at) VALUES (?,?,?)
                   ON CONFLICT (user_id) DO UPDATE
                   SET owner=excluded.owner, expires_at=excluded.expires_at
                   WHERE user_leases.owner=excluded.owner OR user_leases.expires_at < ?""",
                (user_id, owner, now + ttl, now),
            )
            row = db.execute("SELECT owner FROM user_leases WHERE user_id=?", (user_id,)).fetchone()
            return row is not None and row["owner"] == owner

    def renew_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        with self._tx() as db:
            cur = db.execute(
                "UPDATE user_leases SET expires_at=? WHERE user_id=? AND owner=?",
                (time.time() + ttl, user_id, owner),
            )
            return cur.rowcount == 1

    def release_lease(self, user_id: str, owner: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM user_leases WHERE user_id=? AND owner=?", (user_id, owner))

    def list_leases(self) -> list[tuple[str, str]]:
        rows = self._read(
            "SELECT user_id, owner FROM user_leases WHERE expires_at >= ?", (time.time(),)
        )
        return [(r["user_id"], r["owner"]) for r in rows]

    # --- call log ----------------------------------------------------------------
    def log_call(self, rec: CallRecord) -> None:
        with self._tx() as db:
            db.execute(
                f"INSERT INTO llm_calls ({CALL_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                call_values(rec, at=rec.at.isoformat(), ok=int(rec.ok)),
            )
