"""Embedded store: one SQLite file (WAL), FTS5 for keywords, exact vector search.

Dense search is exact cosine over one user's bank, held as a numpy matrix that
is loaded once per process and reloaded only when the user's bank version (one
indexed lookup) says another write happened, from this process or another one.
We measured sqlite-vec's vec0 at ~53 ms per query on a 100k bank against ~6 ms
for the cached matrix (docs/journal/benchmarks.md), and per-user banks are exactly the
case where a partitioned brute-force scan is right. The bank holds the rows'
keyword postings too, and keyword search computes FTS5's bm25() over them in
memory, with the same scores and order as SQL (`keywords.py`), instead of having
FTS5 rank every matching row of the table on each query.

This module holds the connection and the schema; the store's parts are mixins
beside it: the session log (`sqlite_log.py`), the memories and their history
(`sqlite_memories.py`), search (`sqlite_search.py`), episodes
(`sqlite_episodes.py`), the inspector's needs (`sqlite_inspect.py`) and a user's
data as a whole: export, import, forget (`sqlite_users.py`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deltamem.store.base import Store, StoreError
from deltamem.store.common import migration_scripts
from deltamem.store.sqlite_episodes import SQLiteEpisodes
from deltamem.store.sqlite_inspect import SQLiteInspection
from deltamem.store.sqlite_log import SQLiteSessionLog
from deltamem.store.sqlite_memories import SQLiteMemories
from deltamem.store.sqlite_search import SQLiteSearch
from deltamem.store.sqlite_users import SQLiteUsers
from deltamem.store.vectors import VectorCache


class SQLiteStore(
    SQLiteSessionLog,
    SQLiteMemories,
    SQLiteSearch,
    SQLiteEpisodes,
    SQLiteInspection,
    SQLiteUsers,
    Store,
):
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
            for n, script in migration_scripts("deltamem.store.migrations"):
                if n > version:
                    for stmt in script.split(";\n"):
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

    # --- connection --------------------------------------------------------------
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

    def _read(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def close(self) -> None:
        with self._lock:
            self._db.close()
