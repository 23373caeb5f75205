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

This module holds the connection and the schema; the store's parts are mixins
beside it: the session log (`postgres_log.py`), the memories and their history
(`postgres_memories.py`), search (`postgres_search.py`), episodes
(`postgres_episodes.py`), the inspector's needs (`postgres_inspect.py`) and a
user's data as a whole: export, import, forget (`postgres_users.py`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row

from deltamem.store.base import Store, StoreError
from deltamem.store.common import migration_scripts
from deltamem.store.pg_sql import holds_nul
from deltamem.store.postgres_episodes import PostgresEpisodes
from deltamem.store.postgres_inspect import PostgresInspection
from deltamem.store.postgres_log import PostgresSessionLog
from deltamem.store.postgres_memories import PostgresMemories
from deltamem.store.postgres_search import PostgresSearch
from deltamem.store.postgres_users import PostgresUsers

Row = dict[str, Any]

_MIGRATION_LOCK = 0x64656C74616D656D  # "deltamem": serialises first connects
_MAX_DIM = 16_000  # pgvector's limit for `vector`


class PostgresStore(
    PostgresSessionLog,
    PostgresMemories,
    PostgresSearch,
    PostgresEpisodes,
    PostgresInspection,
    PostgresUsers,
    Store,
):
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

    # --- connection --------------------------------------------------------------
    def _conn(self) -> psycopg.Connection[Row]:
        if self._closed:
            raise StoreError("the PostgreSQL store is closed")
        if self._db is None or self._db.closed or self._db.broken:
            try:
                self._db = psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row)
                self._db.execute("SET TIME ZONE 'UTC'")
                # a prepared statement's generic plan ignores which user is asked:
                # at 1M facts it ran the keyword search over every user's rows
                # (58 ms instead of 0.8; docs/reliability.md)
                self._db.execute("SET plan_cache_mode = force_custom_plan")
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
        if params is not None and holds_nul(params):
            return []  # see holds_nul: no stored row can match
        with self._lock:
            conn = self._conn()
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.OperationalError:
                if not conn.broken:
                    raise
            return self._conn().execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._db is not None:
                self._db.close()
                self._db = None

    # --- schema ----------------------------------------------------------------
    def _migrate(self, embedder_name: str) -> None:
        scripts = migration_scripts("deltamem.store.migrations_pg")
        with self._tx() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            cur.execute(
                """CREATE TABLE IF NOT EXISTS schema_version (
                       version    integer PRIMARY KEY,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            row = cur.execute("SELECT coalesce(max(version), 0) AS v FROM schema_version")
            version = row.fetchone()["v"]  # type: ignore[index]
            for n, script in scripts:
                if n > version:
                    cur.execute(script)  # no parameters: a multi-statement script
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
