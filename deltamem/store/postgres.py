"""Shared store: PostgreSQL with pgvector, for several workers or machines on one memory.

Same tables and semantics as the SQLite store (tests/test_store.py runs on both).
Vectors sit on the memory row (`vector(dim)`, cosine distance `<=>`). There is no
HNSW index on purpose: a scope's KNN goes through the btree on (user_id, agent_id,
ts) and sorts that user's rows by exact distance, since an approximate index filters
after the search and loses almost all per-user recall. Keywords use a tsvector
generated from content and keywords (diacritics folded, as FTS5 does), with a GIN
index; the query is an OR of one `phraseto_tsquery` per term, each term a bound
parameter, so user text is never parsed as query syntax. Search ranks a user's rows
held in process memory under a per-user version that every write bumps
(postgres_search.py, pg_bank.py): the same ids, scores and order as those SQL
queries give, which `cached_search=False` runs on every search instead.

One connection (autocommit, guarded by a lock, reopened if it breaks); every write
is one explicit transaction. Schema migrations are SQL files in
deltamem/store/migrations_pg/, applied under an advisory lock and recorded in
`schema_version`.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from typing import Any

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from deltamem.llm.base import CallRecord
from deltamem.store.base import (
    PlannedEpisode,
    PlannedWrite,
    SessionConflict,
    Store,
    StoreError,
    UnknownMemory,
)
from deltamem.store.pg_sql import bump_search_version, filter_sql, fold, vector_literal
from deltamem.store.postgres_episodes import PostgresEpisodes
from deltamem.store.postgres_inspect import PostgresInspection
from deltamem.store.postgres_search import PostgresSearch
from deltamem.store.rows import POSTGRES_ROWS
from deltamem.types import (
    HistoryEntry,
    MemoryItem,
    Operation,
    SearchFilters,
    SessionRecord,
    SessionStatus,
    utcnow,
)

Row = dict[str, Any]

_MIGRATION_LOCK = 0x64656C74616D656D  # "deltamem": serialises first connects
_MAX_DIM = 16_000  # pgvector's limit for `vector`
_MEMORY_COLS = (
    "id, user_id, agent_id, content, timestamp, memory_type, keywords, session_id, turns, "
    "created_at, updated_at, version"
)
_NOW = "extract(epoch FROM clock_timestamp())"
_SCOPE = "user_id=%s AND agent_id=%s AND session_id=%s"
# a deferred session (added with infer=False) is a pending row with `deferred` set
_STATUS_WHERE = {
    "pending": "status='pending' AND NOT deferred",
    "deferred": "status='pending' AND deferred",
}


def _agent(agent_id: str | None) -> str:
    return agent_id or ""


def _fts_text(w: PlannedWrite) -> str:
    return fold(" ".join([w.content, *w.keywords]))


def _holds_nul(params: Sequence[Any]) -> bool:
    """Whether a text parameter (or one in a list) holds a NUL. PostgreSQL text cannot
    store one (psycopg refuses to send it: DataError), so no stored value equals such
    a parameter: a lookup by it finds nothing, as it does on SQLite, instead of
    failing. Ids cannot hold one (deltamem/ids.py); this covers library callers."""
    for p in params:
        if isinstance(p, str) and "\x00" in p:
            return True
        if isinstance(p, (list, tuple)) and any(isinstance(q, str) and "\x00" in q for q in p):
            return True
    return False


class PostgresStore(PostgresSearch, PostgresEpisodes, PostgresInspection, Store):
    def __init__(
        self, dsn: str, dim: int = 384, embedder_name: str = "", *, cached_search: bool = True
    ) -> None:
        """`cached_search=False` ranks every search in SQL (pgvector's exact KNN and
        ts_rank_cd over the user's rows), the ranking the cached banks reproduce
        (postgres_search.py); kept to test them against."""
        self.dsn = dsn
        self.dim = dim
        self.cached_search = cached_search
        self._lock = threading.RLock()
        self._db: psycopg.Connection[Row] | None = None
        self._closed = False
        try:
            self._migrate(embedder_name)
        except psycopg.Error as exc:
            self.close()
            raise StoreError(f"cannot set up the deltamem schema in PostgreSQL: {exc}") from exc
        except BaseException:
            self.close()
            raise

    # --- connection and schema -------------------------------------------------
    def _conn(self) -> psycopg.Connection[Row]:
        if self._closed:
            raise StoreError("the PostgreSQL store is closed")
        if self._db is None or self._db.closed or self._db.broken:
            try:
                self._db = psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)
                self._db.execute("SET TIME ZONE 'UTC'")
            except psycopg.Error as exc:
                raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        return self._db

    @contextmanager
    def _tx(self) -> Iterator[psycopg.Cursor[Row]]:
        """One transaction, rolled back whole on any error."""
        with self._lock:
            conn = self._conn()
            with conn.transaction(), conn.cursor() as cur:
                yield cur

    def _read(self, sql: str, params: Sequence[Any] | None = None) -> list[Row]:
        """One statement outside any transaction; retried once on a fresh connection
        if the old one was dropped (a read is safe to repeat)."""
        if params is not None and _holds_nul(params):
            return []  # see _holds_nul: no stored row can match
        with self._lock:
            conn = self._conn()
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
            return self._conn().execute(sql, params).fetchall()

    def _migrate(self, embedder_name: str) -> None:
        scripts = sorted(
            (
                p
                for p in resources.files("deltamem.store.migrations_pg").iterdir()
                if p.name.endswith(".sql")
            ),
            key=lambda p: p.name,
        )
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute(
                """CREATE TABLE IF NOT EXISTS schema_version (
                       version    integer PRIMARY KEY,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            row = cur.execute("SELECT coalesce(max(version), 0) AS v FROM schema_version")
            version = row.fetchone()["v"]  # type: ignore[index]
            for script in scripts:
                n = int(script.name.split("_", 1)[0])
                if n > version:
                    cur.execute(script.read_text())  # no parameters: a multi-statement script
                    cur.execute("INSERT INTO schema_version (version) VALUES (%s)", (n,))
            got = cur.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
            if got is None:
                if not 0 < self.dim <= _MAX_DIM:
                    raise StoreError(f"embedding dimension {self.dim} is out of range")
                cur.execute(
                    "INSERT INTO meta VALUES ('dim', %s), ('embedder', %s)",
                    (str(self.dim), embedder_name),
                )
                for table in ("memories", "episodes"):
                    cur.execute(
                        f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({self.dim:d})"
                    )
            elif int(got["value"]) != self.dim:
                raise StoreError(
                    f"this database holds {got['value']}-d embeddings but the embedder gives "
                    f"{self.dim}-d; use the embedder the store was created with or a new database"
                )

    # --- row mapping -----------------------------------------------------------
    # --- session log -------------------------------------------------------------
    def log_session(
        self, rec: SessionRecord, episodes: list[PlannedEpisode] | None = None
    ) -> tuple[SessionRecord, bool]:
        key = (rec.user_id, _agent(rec.agent_id), rec.session_id)
        # Messages stay JSON text, not jsonb: jsonb refuses \u0000, which a message may hold.
        messages = json.dumps([m.model_dump(mode="json") for m in rec.messages])
        with self._tx() as cur:
            # ON CONFLICT waits for a concurrent writer of the same session, then yields.
            row = cur.execute(
                """INSERT INTO sessions (user_id, agent_id, session_id, ts, timestamp, messages,
                   content_hash, created_at, indexed, deferred)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)
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
                ),
            ).fetchone()
            if row is not None:
                if episodes and self._insert_episodes(cur, episodes):
                    bump_search_version(cur, rec.user_id, "episodes")
                status = "deferred" if rec.status == "deferred" else "pending"
                return rec.model_copy(update={"seq": row["seq"], "status": status}), True
            row = cur.execute(f"SELECT * FROM sessions WHERE {_SCOPE}", key).fetchone()
            if row is None:  # removed by a concurrent reset between the two statements
                raise StoreError(f"session {rec.session_id!r} changed while logging; retry")
            if row["content_hash"] != rec.content_hash:
                raise SessionConflict(
                    f"session {rec.session_id!r} of user {rec.user_id!r} is already logged "
                    "with different content; give the new session its own id"
                )
            return POSTGRES_ROWS.session(row), False

    def get_session(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> SessionRecord | None:
        rows = self._read(
            f"SELECT * FROM sessions WHERE {_SCOPE}", (user_id, _agent(agent_id), session_id)
        )
        return POSTGRES_ROWS.session(rows[0]) if rows else None

    def list_sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        where, params = ["TRUE"], []
        if user_id is not None:
            where.append("user_id=%s")
            params.append(user_id)
        if status is not None:
            where.append(_STATUS_WHERE.get(status, "status=%s"))
            params.extend([] if status in _STATUS_WHERE else [status])
        sql = f"SELECT * FROM sessions WHERE {' AND '.join(where)} ORDER BY seq"
        return [POSTGRES_ROWS.session(r) for r in self._read(sql, params)]

    def mark_failed(self, user_id: str, session_id: str, agent_id: str | None, error: str) -> None:
        with self._tx() as cur:
            cur.execute(
                f"""UPDATE sessions SET status='failed', error=%s, attempts=attempts+1,
                    deferred=false WHERE {_SCOPE} AND status<>'applied'""",
                (error[:2000], user_id, _agent(agent_id), session_id),
            )

    def requeue_session(self, user_id: str, session_id: str, agent_id: str | None = None) -> bool:
        with self._tx() as cur:
            cur.execute(
                f"""UPDATE sessions SET status='pending', attempts=0, deferred=false
                    WHERE {_SCOPE} AND (status='failed' OR (status='pending' AND deferred))""",
                (user_id, _agent(agent_id), session_id),
            )
            return cur.rowcount == 1

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

    def session_operations(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        rows = self._read(
            f"SELECT operations FROM sessions WHERE {_SCOPE}",
            (user_id, _agent(agent_id), session_id),
        )
        if not rows or rows[0]["operations"] is None:
            return []
        return [Operation.model_validate(o) for o in rows[0]["operations"]]

    # --- writes ------------------------------------------------------------------
    def apply_session(
        self, session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        now = utcnow()
        key = (session.user_id, _agent(session.agent_id), session.session_id)
        applied: list[Operation] = []
        with self._tx() as cur:
            # The row lock makes a concurrent apply of the same session wait, then refuse.
            state = cur.execute(
                f"SELECT status FROM sessions WHERE {_SCOPE} FOR UPDATE", key
            ).fetchone()
            if state is None:
                raise StoreError(f"session {session.session_id!r} is not in the log")
            if state["status"] == "applied":
                raise StoreError(f"session {session.session_id!r} is already applied")
            for w in writes:
                if w.embedding.shape != (self.dim,):
                    raise StoreError(f"embedding of shape {w.embedding.shape}, expected {self.dim}")
                if not np.isfinite(w.embedding).all():
                    raise StoreError("embedding holds NaN or infinite values")
                if w.op == "add":
                    applied.append(self._insert(cur, session, w, now))
                elif w.op == "update":
                    applied.append(self._update(cur, session, w, now))
                else:
                    raise StoreError(f"cannot apply operation {w.op!r}")
            ops = applied + noops
            cur.execute(
                f"""UPDATE sessions SET status='applied', error=NULL, operations=%s,
                    applied_at=%s, attempts=attempts+1, deferred=false WHERE {_SCOPE}""",
                (Jsonb([o.model_dump(mode="json") for o in ops]), now, *key),
            )
            if writes:
                bump_search_version(cur, session.user_id, "memories")
        return ops

    @staticmethod
    def _log(cur: psycopg.Cursor[Row], *values: Any) -> None:
        cur.execute(
            """INSERT INTO history (memory_id, user_id, op, old_content, new_content, session_id,
               actor, at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s)""",
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
               keywords, session_id, turns, created_at, updated_at, embedding, fts_text)
               VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::vector,%s)""",
            (
                mid,
                session.user_id,
                _agent(session.agent_id),
                w.content,
                session.timestamp.timestamp(),
                session.timestamp.isoformat(),
                w.memory_type or "",
                Jsonb(w.keywords),
                session.session_id,
                Jsonb(w.turns),
                now,
                now,
                vector_literal(w.embedding),
                _fts_text(w),
            ),
        )
        self._log(
            cur, mid, session.user_id, "add", None, w.content, session.session_id, "manager", now
        )
        return Operation(
            op="add", memory_id=mid, content=w.content, memory_type=w.memory_type, turns=w.turns
        )

    def _update(
        self, cur: psycopg.Cursor[Row], session: SessionRecord, w: PlannedWrite, now: datetime
    ) -> Operation:
        row = cur.execute(
            "SELECT content, memory_type FROM memories WHERE id=%s AND user_id=%s FOR UPDATE",
            (w.memory_id, session.user_id),
        ).fetchone()
        if row is None:
            raise UnknownMemory(f"update of unknown memory {w.memory_id!r}")
        mtype = w.memory_type or row["memory_type"] or None
        w.memory_type = mtype
        cur.execute(
            """UPDATE memories SET content=%s, ts=%s, timestamp=%s, memory_type=%s, keywords=%s,
               session_id=%s, turns=%s, updated_at=%s, version=version+1, embedding=%s::vector,
               fts_text=%s WHERE id=%s""",
            (
                w.content,
                session.timestamp.timestamp(),
                session.timestamp.isoformat(),
                mtype or "",
                Jsonb(w.keywords),
                session.session_id,
                Jsonb(w.turns),
                now,
                vector_literal(w.embedding),
                _fts_text(w),
                w.memory_id,
            ),
        )
        self._log(
            cur,
            w.memory_id,
            session.user_id,
            "update",
            row["content"],
            w.content,
            session.session_id,
            "manager",
            now,
        )
        return Operation(
            op="update",
            memory_id=w.memory_id,
            content=w.content,
            old_content=row["content"],
            memory_type=mtype,
            turns=w.turns,
        )

    def delete(self, memory_id: str, actor: str = "api") -> bool:
        if _holds_nul([memory_id]):
            return False
        with self._tx() as cur:
            row = cur.execute(
                "DELETE FROM memories WHERE id=%s RETURNING user_id, content", (memory_id,)
            ).fetchone()
            if row is None:
                return False
            self._log(
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

    def reset(self, user_id: str, agent_id: str | None = None, keep_log: bool = False) -> int:
        if _holds_nul([user_id, agent_id]):
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
        rows = self._read(
            f"""SELECT {_MEMORY_COLS} FROM memories WHERE user_id=%s{extra}
                ORDER BY ts, seq LIMIT %s""",
            [user_id, *params, self._limit(limit)],
        )
        return [POSTGRES_ROWS.memory(r) for r in rows]

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE memory_id=%s ORDER BY id", (memory_id,))
        return [POSTGRES_ROWS.history(r) for r in rows]

    def session_writes(self, session_id: str, user_id: str | None = None) -> dict[str, str]:
        sql = """SELECT memory_id, new_content FROM history WHERE session_id=%s
                 AND op IN ('add','update')"""
        params: list[Any] = [session_id]
        if user_id is not None:
            sql += " AND user_id=%s"
            params.append(user_id)
        written: dict[str, str] = {}
        for r in self._read(sql + " ORDER BY id", params):
            written[r["memory_id"]] = r["new_content"]  # the session's last word on it
        return written

    def dense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        if k <= 0:
            return []
        where = filter_sql(agent_id, filters)
        return self._dense("memories", user_id, vector, k, agent_id, filters, where)

    def keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        if not terms:
            return []
        where = filter_sql(agent_id, filters)
        return self._keywords("memories", user_id, terms, k, agent_id, filters, where)

    def count(self, user_id: str, agent_id: str | None = None) -> int:
        extra, params = filter_sql(agent_id, None)
        rows = self._read(
            f"SELECT count(*) AS n FROM memories WHERE user_id=%s{extra}", [user_id, *params]
        )
        return int(rows[0]["n"])

    # --- call log ----------------------------------------------------------------
    def log_call(self, rec: CallRecord) -> None:
        with self._tx() as cur:
            cur.execute(
                """INSERT INTO llm_calls (at, model, purpose, prompt_tokens, completion_tokens,
                   cached_tokens, seconds, ok, error, reply, user_id, agent_id, session_id)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)""",
                (
                    rec.at,
                    rec.model,
                    rec.purpose,
                    rec.prompt_tokens,
                    rec.completion_tokens,
                    rec.cached_tokens,
                    rec.seconds,
                    bool(rec.ok),
                    rec.error,
                    rec.reply,
                    rec.user_id,
                    None if rec.session_id is None else _agent(rec.agent_id),
                    rec.session_id,
                ),
            )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None
