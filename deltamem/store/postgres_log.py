"""The session log of the PostgreSQL store: each session durably logged before
extraction, its state as workers apply or park it, the per-user leases that let
one worker at a time apply a user's sessions (expiring on the database's clock,
which every machine shares), and the log of model calls. A mixin of
`PostgresStore`, which owns the connection."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg

from deltamem.llm.base import CallRecord
from deltamem.store.base import PlannedEpisode, StoreError
from deltamem.store.common import CALL_COLUMNS, call_values, conflict
from deltamem.store.pg_sql import SESSION_KEY, bump_search_version
from deltamem.store.rows import POSTGRES_ROWS, stored_agent
from deltamem.types import Operation, SessionRecord, SessionStatus, utcnow

Row = dict[str, Any]

_NOW = "extract(epoch FROM clock_timestamp())"
# a deferred session (added with infer=False) is a pending row with `deferred` set
_STATUS_WHERE = {
    "pending": "status='pending' AND NOT deferred",
    "deferred": "status='pending' AND deferred",
}


class PostgresSessionLog:
    if TYPE_CHECKING:  # provided by PostgresStore
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]
        _insert_episodes: Callable[[psycopg.Cursor[Row], list[PlannedEpisode]], int]

    def log_session(
        self, rec: SessionRecord, episodes: list[PlannedEpisode] | None = None
    ) -> tuple[SessionRecord, bool]:
        key = (rec.user_id, stored_agent(rec.agent_id), rec.session_id)
        # Messages stay JSON text, not jsonb: jsonb refuses \u0000, which a message may hold.
        messages = json.dumps([m.model_dump(mode="json") for m in rec.messages])
        with self._tx() as cur:
            # ON CONFLICT waits for a concurrent writer of the same session, then yields.
            row = cur.execute(
                """INSERT INTO sessions (user_id, agent_id, session_id, ts, timestamp, messages,
                   content_hash, created_at, indexed, deferred, expires_at)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)
                   ON CONFLICT (user_id, agent_id, session_id) DO NOTHING RETURNING seq""",
                (
                    *key,
                    rec.timestamp.timestamp(),
                    rec.timestamp.isoformat(),
                    messages,
                    rec.content_hash,
                    utcnow(),
                    episodes is not None,
                    rec.status == "deferred",
                    rec.expires_at,
                ),
            ).fetchone()
            if row is not None:
                if episodes and self._insert_episodes(cur, episodes):
                    bump_search_version(cur, rec.user_id, "episodes")
                status = "deferred" if rec.status == "deferred" else "pending"
                return rec.model_copy(update={"seq": row["seq"], "status": status}), True
            row = cur.execute(f"SELECT * FROM sessions WHERE {SESSION_KEY}", key).fetchone()
            if row is None:  # removed by a concurrent reset between the two statements
                raise StoreError(f"session {rec.session_id!r} changed while logging; retry")
            if row["content_hash"] != rec.content_hash:
                raise conflict(rec)
            return POSTGRES_ROWS.session(row), False

    def get_session(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        rows = self._read(
            f"SELECT * FROM sessions WHERE {SESSION_KEY}",
            (user_id, stored_agent(agent_id), session_id),
        )
        return POSTGRES_ROWS.session(rows[0]) if rows else None

    def list_sessions(
        self,
        user_id: str | None = None,
        status: SessionStatus | None = None,
        limit: int | None = None,
    ) -> list[SessionRecord]:
        where, params = ["TRUE"], []
        if user_id is not None:
            where.append("user_id=%s")
            params.append(user_id)
        if status is not None:
            where.append(_STATUS_WHERE.get(status, "status=%s"))
            params.extend([] if status in _STATUS_WHERE else [status])
        sql = f"SELECT * FROM sessions WHERE {' AND '.join(where)} ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [POSTGRES_ROWS.session(r) for r in self._read(sql, params)]

    def mark_failed(self, user_id: str, session_id: str, agent_id: str | None, error: str) -> None:
        with self._tx() as cur:
            cur.execute(
                f"""UPDATE sessions SET status='failed', error=%s, attempts=attempts+1,
                    deferred=false WHERE {SESSION_KEY} AND status<>'applied'""",
                (error[:2000], user_id, stored_agent(agent_id), session_id),
            )

    def requeue_session(self, user_id: str, session_id: str, agent_id: str | None = None) -> bool:
        with self._tx() as cur:
            cur.execute(
                f"""UPDATE sessions SET status='pending', attempts=0, deferred=false
                    WHERE {SESSION_KEY} AND (status='failed' OR (status='pending' AND deferred))""",
                (user_id, stored_agent(agent_id), session_id),
            )
            return cur.rowcount == 1

    def cancel_session(
        self, user_id: str, session_id: str, agent_id: str | None = None, seq: int | None = None
    ) -> SessionStatus | None:
        key = (user_id, stored_agent(agent_id), session_id)
        with self._tx() as cur:
            row = cur.execute(
                f"SELECT status, deferred, seq FROM sessions WHERE {SESSION_KEY} FOR UPDATE", key
            ).fetchone()
            status: SessionStatus | None = None
            if row is not None:
                deferred = row["status"] == "pending" and row["deferred"]
                status = "deferred" if deferred else row["status"]
                if seq is not None and row["seq"] != seq:
                    return status
            if status is not None and status != "applied":
                cur.execute(f"DELETE FROM sessions WHERE {SESSION_KEY}", key)
                if cur.execute(f"DELETE FROM episodes WHERE {SESSION_KEY}", key).rowcount:
                    bump_search_version(cur, user_id, "episodes")
            if status != "applied":
                cur.execute(f"DELETE FROM llm_calls WHERE {SESSION_KEY}", key)
            return status

    def session_operations(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        rows = self._read(
            f"SELECT operations FROM sessions WHERE {SESSION_KEY}",
            (user_id, stored_agent(agent_id), session_id),
        )
        if not rows or rows[0]["operations"] is None:
            return []
        return [Operation.model_validate(o) for o in rows[0]["operations"]]

    # --- user leases (expiry on the database's clock) -----------------------------------
    def acquire_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        with self._tx() as cur:
            row = cur.execute(
                f"""INSERT INTO user_leases (user_id, owner, expires_at)
                    VALUES (%s, %s, {_NOW} + %s)
                    ON CONFLICT (user_id) DO UPDATE
                    SET owner=EXCLUDED.owner, expires_at=EXCLUDED.expires_at
                    WHERE user_leases.owner=EXCLUDED.owner OR user_leases.expires_at < {_NOW}
                    RETURNING owner""",
                (user_id, owner, float(ttl)),
            ).fetchone()
            return row is not None

    def renew_lease(self, user_id: str, owner: str, ttl: float) -> bool:
        with self._tx() as cur:
            cur.execute(
                f"UPDATE user_leases SET expires_at={_NOW} + %s WHERE user_id=%s AND owner=%s",
                (float(ttl), user_id, owner),
            )
            return cur.rowcount == 1

    def release_lease(self, user_id: str, owner: str) -> None:
        with self._tx() as cur:
            cur.execute("DELETE FROM user_leases WHERE user_id=%s AND owner=%s", (user_id, owner))

    def list_leases(self) -> list[tuple[str, str]]:
        rows = self._read(f"SELECT user_id, owner FROM user_leases WHERE expires_at >= {_NOW}")
        return [(r["user_id"], r["owner"]) for r in rows]

    # --- call log ----------------------------------------------------------------
    def log_call(self, rec: CallRecord) -> None:
        with self._tx() as cur:
            cur.execute(
                f"""INSERT INTO llm_calls ({CALL_COLUMNS})
                    VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)""",
                call_values(rec, at=rec.at, ok=bool(rec.ok)),
            )
