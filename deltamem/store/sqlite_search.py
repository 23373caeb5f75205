"""Search of the SQLite store's two tiers (memories, episodes) over per-user banks
cached in the process: a user's rows of a table (vectors, filter columns, keyword
postings) read in one snapshot with the user's version of that table, and reused
until a write bumps it. Dense search is exact cosine over the bank's matrix;
keyword search is FTS5's bm25() computed over its postings where that gives the
SQL's ranking exactly (`keywords.py`), else FTS5 in SQL. A mixin of
`SQLiteStore`, which owns the connection."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

import numpy as np

from deltamem.store.base import Store, TierRanking
from deltamem.store.keywords import TermIndex, bm25, formula_matches, query_token, top
from deltamem.store.sqlite_sql import bm25_sql, fts_stats, rankable
from deltamem.store.vectors import Bank, VectorCache, side_by_side
from deltamem.types import SearchFilters

# the FTS columns of each table's `{table}_fts` twin
_FTS_COLUMNS = {"memories": ("content", "keywords"), "episodes": ("content",)}


class SQLiteSearch:
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        dim: int
        memory_keywords: bool
        _db: sqlite3.Connection
        _lock: threading.RLock
        _vectors: VectorCache
        _episode_vectors: VectorCache
        _read: Callable[..., list[sqlite3.Row]]

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

    def tier_rankings(
        self,
        user_id: str,
        vector: np.ndarray,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
        *,
        facts: bool = True,
        episodes: bool = True,
    ) -> tuple[TierRanking, TierRanking]:
        """As the four searches give them; the two tiers side by side where the
        user's banks are large (`side_by_side`)."""
        rank = cast(Store, super()).tier_rankings
        scope = (user_id, vector, terms, k, agent_id, filters)
        if not (facts and episodes):
            return rank(*scope, facts=facts, episodes=episodes)
        banks = (self._vectors.peek(user_id), self._episode_vectors.peek(user_id))
        rows = sum(len(b.ids) for b in banks if b is not None)
        return side_by_side(
            lambda: rank(*scope, episodes=False)[0], lambda: rank(*scope, facts=False)[1], rows
        )

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
