"""Embedded store: one SQLite file (WAL), FTS5 for keywords, exact vector search.

Dense search is exact cosine over one user's bank, held as a numpy matrix that
is loaded once per process and reloaded only when the user's bank version (one
indexed lookup) says another write happened, from this process or another one.
We measured sqlite-vec's vec0 at ~53 ms per query on a 100k bank against ~6 ms
for the cached matrix (docs/benchmarks.md), and per-user banks are exactly the
case where a partitioned brute-force scan is right. The bank holds the rows'
keyword postings too, and keyword search computes FTS5's bm25() over them in
memory, with the same scores and order as SQL (`keywords.py`), instead of having
FTS5 rank every matching row of the table on each query.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from pathlib import Path

import numpy as np

from deltamem.llm.base import CallRecord
from deltamem.store.base import (
    PlannedEpisode,
    PlannedWrite,
    SessionConflict,
    Store,
    StoreError,
    UnknownMemory,
)
from deltamem.store.keywords import TermIndex, bm25, formula_matches, query_token, top
from deltamem.store.rows import SQLITE_ROWS
from deltamem.store.sqlite_episodes import SQLiteEpisodes
from deltamem.store.sqlite_inspect import SQLiteInspection
from deltamem.store.sqlite_sql import bm25_sql, count_rows, filter_sql, fts_stats, rankable
from deltamem.store.vectors import Bank, VectorCache
from deltamem.types import (
    HistoryEntry,
    MemoryItem,
    Operation,
    SearchFilters,
    SessionRecord,
    SessionStatus,
    utcnow,
)


def _iso(dt: datetime) -> str:
    return dt.isoformat()


# a deferred session (added with infer=False) is a pending row with `deferred` set
_STATUS_WHERE = {
    "pending": "status='pending' AND deferred=0",
    "deferred": "status='pending' AND deferred=1",
}


def _agent(agent_id: str | None) -> str:
    return agent_id or ""


# the FTS columns of each table's `{table}_fts` twin
_FTS_COLUMNS = {"memories": ("content", "keywords"), "episodes": ("content",)}


class SQLiteStore(SQLiteEpisodes, SQLiteInspection, Store):
    def __init__(
        self,
        path: str | Path,
        dim: int = 384,
        embedder_name: str = "",
        *,
        memory_keywords: bool = True,
    ) -> None:
        """`memory_keywords=False` ranks keyword search by FTS5 in SQL on every query
        (the same ranking, slower; kept to test the in-memory one against)."""
        self.path = str(path)
        self.memory_keywords = memory_keywords
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        self._lock = threading.RLock()
        self._vectors = VectorCache()
        self._episode_vectors = VectorCache()
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite store at {self.path}: {exc}") from exc
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._migrate(embedder_name)

    # --- schema ----------------------------------------------------------------
    def _migrate(self, embedder_name: str) -> None:
        with self._tx():
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            scripts = sorted(
                (
                    p
                    for p in resources.files("deltamem.store.migrations").iterdir()
                    if p.name.endswith(".sql")
                ),
                key=lambda p: p.name,
            )
            for script in scripts:
                n = int(script.name.split("_", 1)[0])
                if n > version:
                    for stmt in script.read_text().split(";\n"):
                        if stmt.strip():
                            self._db.execute(stmt)
                    self._db.execute(f"PRAGMA user_version={n}")
            row = self._db.execute("SELECT value FROM meta WHERE key='dim'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('dim', ?)", (str(self.dim),))
                self._db.execute("INSERT INTO meta VALUES ('embedder', ?)", (embedder_name,))
            elif int(row[0]) != self.dim:
                raise StoreError(
                    f"{self.path} holds {row[0]}-d embeddings but the embedder gives {self.dim}-d; "
                    "use the embedder the store was created with or a new store"
                )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """A write transaction taken up front, so concurrent writers queue instead of
        failing halfway; rolled back whole on any error."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # --- row mapping -----------------------------------------------------------
    def _read(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # --- session log -------------------------------------------------------------
    def log_session(
        self, rec: SessionRecord, episodes: list[PlannedEpisode] | None = None
    ) -> tuple[SessionRecord, bool]:
        with self._tx() as db:
            row = db.execute(
                "SELECT * FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
                (rec.user_id, _agent(rec.agent_id), rec.session_id),
            ).fetchone()
            if row is not None:
                if row["content_hash"] != rec.content_hash:
                    raise SessionConflict(
                        f"session {rec.session_id!r} of user {rec.user_id!r} is already logged "
                        "with different content; give the new session its own id"
                    )
                return SQLITE_ROWS.session(row), False
            messages = json.dumps([m.model_dump(mode="json") for m in rec.messages])
            cur = db.execute(
                """INSERT INTO sessions (user_id, agent_id, session_id, ts, timestamp, messages,
                   content_hash, created_at, indexed, deferred) VALUES (?,?,?,?,?,?,?,?,?,?)""",
                (
                    rec.user_id,
                    _agent(rec.agent_id),
                    rec.session_id,
                    rec.timestamp.timestamp(),
                    _iso(rec.timestamp),
                    messages,
                    rec.content_hash,
                    _iso(utcnow()),
                    int(episodes is not None),
                    int(rec.status == "deferred"),
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
            (user_id, _agent(agent_id), session_id),
        )
        return SQLITE_ROWS.session(rows[0]) if rows else None

    def list_sessions(
        self, user_id: str | None = None, status: SessionStatus | None = None
    ) -> list[SessionRecord]:
        where, params = [], []
        if user_id is not None:
            where.append("user_id=?")
            params.append(user_id)
        if status is not None:
            where.append(_STATUS_WHERE.get(status, "status=?"))
            params.extend([] if status in _STATUS_WHERE else [status])
        sql = "SELECT * FROM sessions" + (" WHERE " + " AND ".join(where) if where else "")
        return [SQLITE_ROWS.session(r) for r in self._read(sql + " ORDER BY seq", params)]

    def mark_failed(self, user_id: str, session_id: str, agent_id: str | None, error: str) -> None:
        with self._tx() as db:
            db.execute(
                """UPDATE sessions SET status='failed', error=?, attempts=attempts+1, deferred=0
                   WHERE user_id=? AND agent_id=? AND session_id=? AND status!='applied'""",
                (error[:2000], user_id, _agent(agent_id), session_id),
            )

    def requeue_session(self, user_id: str, session_id: str, agent_id: str | None = None) -> bool:
        with self._tx() as db:
            cur = db.execute(
                """UPDATE sessions SET status='pending', attempts=0, deferred=0
                   WHERE user_id=? AND agent_id=? AND session_id=?
                   AND (status='failed' OR (status='pending' AND deferred=1))""",
                (user_id, _agent(agent_id), session_id),
            )
            return cur.rowcount == 1

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

    def session_operations(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[Operation]:
        rows = self._read(
            "SELECT operations FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
            (user_id, _agent(agent_id), session_id),
        )
        if not rows or rows[0]["operations"] is None:
            return []
        return [Operation.model_validate(o) for o in json.loads(rows[0]["operations"])]

    # --- writes ------------------------------------------------------------------
    def apply_session(
        self, session: SessionRecord, writes: list[PlannedWrite], noops: list[Operation]
    ) -> list[Operation]:
        now = _iso(utcnow())
        applied: list[Operation] = []
        agent = _agent(session.agent_id)
        with self._tx() as db:
            state = db.execute(
                "SELECT status FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
                (session.user_id, agent, session.session_id),
            ).fetchone()
            if state is None:
                raise StoreError(f"session {session.session_id!r} is not in the log")
            if state["status"] == "applied":
                raise StoreError(f"session {session.session_id!r} is already applied")
            for w in writes:
                if w.embedding.shape != (self.dim,):
                    raise StoreError(f"embedding of shape {w.embedding.shape}, expected {self.dim}")
                if w.op == "add":
                    applied.append(self._insert(db, session, w, now))
                elif w.op == "update":
                    applied.append(self._update(db, session, w, now))
                else:
                    raise StoreError(f"cannot apply operation {w.op!r}")
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
            """INSERT INTO bank_versions (user_id, version) VALUES (?, 1)
               ON CONFLICT (user_id) DO UPDATE SET version = version + 1""",
            (user_id,),
        )

    @staticmethod
    def _blob(vec: np.ndarray) -> bytes:
        return np.asarray(vec, dtype=np.float32).tobytes()

    def _insert(
        self, db: sqlite3.Connection, session: SessionRecord, w: PlannedWrite, now: str
    ) -> Operation:
        mid = w.memory_id or uuid.uuid4().hex
        if w.memory_id and db.execute("SELECT 1 FROM memories WHERE id=?", (mid,)).fetchone():
            raise StoreError(f"a memory {mid!r} exists already")
        agent = _agent(session.agent_id)
        cur = db.execute(
            """INSERT INTO memories (id, user_id, agent_id, content, ts, timestamp, memory_type,
               keywords, session_id, turns, created_at, updated_at, embedding)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                mid,
                session.user_id,
                agent,
                w.content,
                session.timestamp.timestamp(),
                _iso(session.timestamp),
                w.memory_type or "",
                json.dumps(w.keywords),
                session.session_id,
                json.dumps(w.turns),
                now,
                now,
                self._blob(w.embedding),
            ),
        )
        rowid = cur.lastrowid
        db.execute(
            "INSERT INTO memories_fts (rowid, content, keywords) VALUES (?,?,?)",
            (rowid, w.content, " ".join(w.keywords)),
        )
        db.execute(
            """INSERT INTO history (memory_id, user_id, op, old_content, new_content, session_id,
               actor, at) VALUES (?,?,?,?,?,?,?,?)""",
            (mid, session.user_id, "add", None, w.content, session.session_id, "manager", now),
        )
        return Operation(
            op="add", memory_id=mid, content=w.content, memory_type=w.memory_type, turns=w.turns
        )

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
        mtype = w.memory_type or row["memory_type"] or None
        w.memory_type = mtype
        db.execute(
            """UPDATE memories SET content=?, ts=?, timestamp=?, memory_type=?, keywords=?,
               session_id=?, turns=?, updated_at=?, version=version+1, embedding=?
               WHERE rowid=?""",
            (
                w.content,
                session.timestamp.timestamp(),
                _iso(session.timestamp),
                mtype or "",
                json.dumps(w.keywords),
                session.session_id,
                json.dumps(w.turns),
                now,
                self._blob(w.embedding),
                rowid,
            ),
        )
        db.execute("DELETE FROM memories_fts WHERE rowid=?", (rowid,))
        db.execute(
            "INSERT INTO memories_fts (rowid, content, keywords) VALUES (?,?,?)",
            (rowid, w.content, " ".join(w.keywords)),
        )
        db.execute(
            """INSERT INTO history (memory_id, user_id, op, old_content, new_content, session_id,
               actor, at) VALUES (?,?,?,?,?,?,?,?)""",
            (
                w.memory_id,
                session.user_id,
                "update",
                row["content"],
                w.content,
                session.session_id,
                "manager",
                now,
            ),
        )
        return Operation(
            op="update",
            memory_id=w.memory_id,
            content=w.content,
            old_content=row["content"],
            memory_type=mtype,
            turns=w.turns,
        )

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
            db.execute(
                """INSERT INTO history (memory_id, user_id, op, old_content, new_content,
                   session_id, actor, at) VALUES (?,?,?,?,?,?,?,?)""",
                (
                    memory_id,
                    row["user_id"],
                    "delete",
                    row["content"],
                    None,
                    None,
                    actor,
                    _iso(utcnow()),
                ),
            )
            return True

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
        sql = f"SELECT * FROM memories WHERE user_id=?{extra} ORDER BY ts, rowid"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [SQLITE_ROWS.memory(r) for r in self._read(sql, [user_id, *params])]

    def history(self, memory_id: str) -> list[HistoryEntry]:
        rows = self._read("SELECT * FROM history WHERE memory_id=? ORDER BY id", (memory_id,))
        return [SQLITE_ROWS.history(r) for r in rows]

    def session_writes(self, session_id: str, user_id: str | None = None) -> dict[str, str]:
        sql = """SELECT memory_id, new_content FROM history WHERE session_id=?
                 AND op IN ('add','update')"""
        params: list = [session_id]
        if user_id is not None:
            sql += " AND user_id=?"
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
        bank = self._bank(self._vectors, "memories", "bank_versions", user_id)
        return bank.search(vector, k, agent_id, filters)

    def _bank(self, cache: VectorCache, table: str, versions: str, user_id: str) -> Bank:
        """The user's rows of `table` as a matrix, reloaded only when `versions` says
        a write happened since (one indexed lookup)."""
        rows = self._read(f"SELECT version FROM {versions} WHERE user_id=?", (user_id,))
        version = rows[0]["version"] if rows else 0
        return cache.get(user_id, version, lambda u, old: self._load_bank(table, versions, u, old))

    def _load_bank(self, table: str, versions: str, user_id: str, previous: Bank | None) -> Bank:
        # episodes have no memory type: '' matches no memory_type filter
        mtype = "t.memory_type" if table == "memories" else "'' AS memory_type"
        fts = ", ".join(f"f.{c} AS fts_{c}" for c in _FTS_COLUMNS[table])
        with self._lock:  # version and rows read in one snapshot
            self._db.execute("BEGIN")
            try:
                row = self._db.execute(
                    f"SELECT version FROM {versions} WHERE user_id=?", (user_id,)
                ).fetchone()
                rows = self._db.execute(
                    f"""SELECT t.rowid AS rowid, t.id AS id, t.agent_id AS agent_id, {mtype},
                       t.session_id AS session_id, t.ts AS ts, t.embedding AS embedding, {fts}
                       FROM {table} t LEFT JOIN {table}_fts f ON f.rowid = t.rowid
                       WHERE t.user_id=? ORDER BY t.rowid""",
                    (user_id,),
                ).fetchall()
            finally:
                self._db.execute("COMMIT")
        matrix = np.frombuffer(b"".join(r["embedding"] for r in rows), dtype=np.float32)
        texts = [" ".join(r[f"fts_{c}"] or "" for c in _FTS_COLUMNS[table]) for r in rows]
        return Bank(
            version=row["version"] if row else 0,
            ids=[r["id"] for r in rows],
            matrix=matrix.reshape(len(rows), self.dim) if rows else np.zeros((0, self.dim)),
            agent=np.array([r["agent_id"] for r in rows], dtype=object),
            mtype=np.array([r["memory_type"] for r in rows], dtype=object),
            session=np.array([r["session_id"] or "" for r in rows], dtype=object),
            ts=np.array([r["ts"] for r in rows], dtype=np.float64),
            rowids=np.array([r["rowid"] for r in rows], dtype=np.int64),
            terms=TermIndex.build(texts, previous.terms if previous is not None else None),
        )

    def keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        return self._keyword_search(
            self._vectors, "memories", "bank_versions", user_id, terms, k, agent_id, filters
        )

    def _keyword_search(
        self,
        cache: VectorCache,
        table: str,
        versions: str,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
    ) -> list[tuple[str, float]]:
        """BM25 over the user's rows of `table`: FTS5's bm25() computed over the bank's
        postings in memory where that gives SQL's ranking exactly, else FTS5 in SQL."""
        kept = rankable(self._read, terms, f"{table}_fts_vocab")
        if not kept:
            return []
        tokens = [query_token(t) for t in kept]
        exact = [t for t in tokens if t is not None]
        if not self.memory_keywords or len(exact) < len(tokens) or not formula_matches():
            return bm25_sql(self._read, table, user_id, kept, k, agent_id, filters)
        bank = self._bank(cache, table, versions, user_id)
        if bank.terms is None or bank.rowids is None:
            return bm25_sql(self._read, table, user_id, kept, k, agent_id, filters)
        docs, score = bm25(bank.terms, exact, fts_stats(self._read, table, exact))
        best = top(docs, score, bank.rowids, bank.mask(agent_id, filters), k)
        return [(bank.ids[d], s) for d, s in best]

    def count(self, user_id: str, agent_id: str | None = None) -> int:
        return count_rows(self._read, "memories", user_id, agent_id)

    # --- call log ----------------------------------------------------------------
    def log_call(self, rec: CallRecord) -> None:
        with self._tx() as db:
            db.execute(
                """INSERT INTO llm_calls (at, model, purpose, prompt_tokens, completion_tokens,
                   cached_tokens, seconds, ok, error, reply, user_id, agent_id, session_id)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    _iso(rec.at),
                    rec.model,
                    rec.purpose,
                    rec.prompt_tokens,
                    rec.completion_tokens,
                    rec.cached_tokens,
                    rec.seconds,
                    int(rec.ok),
                    rec.error,
                    rec.reply,
                    rec.user_id,
                    None if rec.session_id is None else _agent(rec.agent_id),
                    rec.session_id,
                ),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
