"""The episode tier of the SQLite store: the session log's turns, embedded and in
FTS5, searched like the memory bank (exact cosine over a cached per-user matrix,
BM25 over FTS5). A mixin of `SQLiteStore`, which owns the connection."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import numpy as np

from deltamem.store.base import PlannedEpisode
from deltamem.store.common import check_embedding
from deltamem.store.rows import SQLITE_ROWS, episode_values, stored_agent
from deltamem.store.sqlite_sql import FIRST_VERSION, count_rows
from deltamem.store.vectors import Bank, VectorCache
from deltamem.types import Episode, SearchFilters, SessionRecord


class SQLiteEpisodes:
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        dim: int
        _db: sqlite3.Connection
        _episode_vectors: VectorCache
        _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _read: Callable[..., list[sqlite3.Row]]
        _bank: Callable[[VectorCache, str, str, str], Bank]
        _keyword_search: Callable[..., list[tuple[str, float]]]

    def _insert_episodes(self, db: sqlite3.Connection, episodes: list[PlannedEpisode]) -> int:
        added = 0
        users: set[str] = set()
        for pe in episodes:
            ep = pe.episode
            check_embedding(pe.embedding, self.dim)
            cur = db.execute(
                """INSERT OR IGNORE INTO episodes (id, user_id, agent_id, session_id, turn, role,
                   name, content, ts, timestamp, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)""",
                (*episode_values(ep), np.asarray(pe.embedding, dtype=np.float32).tobytes()),
            )
            if cur.rowcount == 1:
                db.execute(
                    "INSERT INTO episodes_fts (rowid, content) VALUES (?,?)",
                    (cur.lastrowid, ep.content),
                )
                added += 1
                users.add(ep.user_id)
        for user in users:
            self._bump_episodes(db, user)
        return added

    @staticmethod
    def _bump_episodes(db: sqlite3.Connection, user_id: str) -> None:
        db.execute(
            f"""INSERT INTO episode_versions (user_id, version) VALUES (?, {FIRST_VERSION})
               ON CONFLICT (user_id) DO UPDATE SET version = version + 1""",
            (user_id,),
        )

    def _remove_episodes(self, db: sqlite3.Connection, scope: str, params: list) -> None:
        rows = db.execute(f"SELECT rowid FROM episodes WHERE {scope}", params).fetchall()
        rowids = [r["rowid"] for r in rows]
        for i in range(0, len(rowids), 500):
            part = rowids[i : i + 500]
            marks = ",".join("?" * len(part))
            db.execute(f"DELETE FROM episodes_fts WHERE rowid IN ({marks})", part)
            db.execute(f"DELETE FROM episodes WHERE rowid IN ({marks})", part)
        self._bump_episodes(db, params[0])

    def unindexed_sessions(self, limit: int = 100) -> list[SessionRecord]:
        rows = self._read(
            "SELECT * FROM sessions WHERE indexed=0 ORDER BY seq LIMIT ?", (int(limit),)
        )
        return [SQLITE_ROWS.session(r) for r in rows]

    def index_episodes(self, rec: SessionRecord, episodes: list[PlannedEpisode]) -> int:
        with self._tx() as db:
            row = db.execute(
                "SELECT 1 FROM sessions WHERE user_id=? AND agent_id=? AND session_id=?",
                (rec.user_id, stored_agent(rec.agent_id), rec.session_id),
            ).fetchone()
            if row is None:  # reset meanwhile: nothing to index
                return 0
            added = self._insert_episodes(db, episodes)
            db.execute(
                "UPDATE sessions SET indexed=1 WHERE user_id=? AND agent_id=? AND session_id=?",
                (rec.user_id, stored_agent(rec.agent_id), rec.session_id),
            )
            return added

    def get_episodes(self, episode_ids: list[str]) -> list[Episode]:
        found: dict[str, Episode] = {}
        for i in range(0, len(episode_ids), 500):
            part = episode_ids[i : i + 500]
            rows = self._read(
                f"SELECT * FROM episodes WHERE id IN ({','.join('?' * len(part))})", part
            )
            found.update({r["id"]: SQLITE_ROWS.episode(r) for r in rows})
        return [found[i] for i in episode_ids if i in found]

    def episode_dense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        bank = self._bank(self._episode_vectors, "episodes", "episode_versions", user_id)
        return bank.search(vector, k, agent_id, filters)

    def episode_keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        if filters is not None and filters.memory_type is not None:
            return []
        return self._keyword_search(
            self._episode_vectors,
            "episodes",
            "episode_versions",
            user_id,
            terms,
            k,
            agent_id,
            filters,
        )

    def count_episodes(self, user_id: str, agent_id: str | None = None) -> int:
        return count_rows(self._read, "episodes", user_id, agent_id)
