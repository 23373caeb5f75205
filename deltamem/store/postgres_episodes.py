"""The episode tier of the PostgreSQL store: the session log's turns with their
vectors and a generated tsvector, searched like memories (exact KNN within the
scope, OR of phrase queries). A mixin of `PostgresStore`, which owns the
connection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from deltamem.store.base import PlannedEpisode
from deltamem.store.common import check_embedding
from deltamem.store.pg_sql import bump_search_version, filter_sql, fold, vector_literal
from deltamem.store.rows import POSTGRES_ROWS, episode_values, stored_agent
from deltamem.types import Episode, SearchFilters, SessionRecord

Row = dict[str, Any]


# what an Episode is built from (not the vector, text and tsvector it is searched by)
_EPISODE_COLS = "id, user_id, agent_id, session_id, turn, role, name, content, timestamp"


def episode_filter_sql(
    agent_id: str | None, filters: SearchFilters | None
) -> tuple[str, list[Any]] | None:
    """WHERE fragments for episodes, or None when the filters exclude every episode
    (a memory type: episodes have none)."""
    if filters is not None and filters.memory_type is not None:
        return None
    return filter_sql(agent_id, filters)


class PostgresEpisodes:
    if TYPE_CHECKING:  # provided by PostgresStore
        dim: int
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]
        _dense: Callable[..., list[tuple[str, float]]]
        _keywords: Callable[..., list[tuple[str, float]]]

    def _insert_episodes(self, cur: psycopg.Cursor[Row], episodes: list[PlannedEpisode]) -> int:
        added = 0
        for pe in episodes:
            ep = pe.episode
            check_embedding(pe.embedding, self.dim, finite=True)
            row = cur.execute(
                """INSERT INTO episodes (id, user_id, agent_id, session_id, turn, role, name,
                   content, ts, timestamp, embedding, fts_text)
                   VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s::vector,%s)
                   ON CONFLICT DO NOTHING RETURNING 1""",
                (*episode_values(ep), vector_literal(pe.embedding), fold(ep.content)),
            ).fetchone()
            added += row is not None
        return added

    def unindexed_sessions(self, limit: int = 100) -> list[SessionRecord]:
        rows = self._read(
            "SELECT * FROM sessions WHERE NOT indexed ORDER BY seq LIMIT %s", (int(limit),)
        )
        return [POSTGRES_ROWS.session(r) for r in rows]

    def index_episodes(self, rec: SessionRecord, episodes: list[PlannedEpisode]) -> int:
        key = (rec.user_id, stored_agent(rec.agent_id), rec.session_id)
        with self._tx() as cur:
            row = cur.execute(
                """SELECT 1 FROM sessions WHERE user_id=%s AND agent_id=%s AND session_id=%s
                   FOR UPDATE""",
                key,
            ).fetchone()
            if row is None:  # reset meanwhile: nothing to index
                return 0
            added = self._insert_episodes(cur, episodes)
            cur.execute(
                """UPDATE sessions SET indexed=true
                   WHERE user_id=%s AND agent_id=%s AND session_id=%s""",
                key,
            )
            if added:
                bump_search_version(cur, rec.user_id, "episodes")
            return added

    def get_episodes(self, episode_ids: list[str]) -> list[Episode]:
        if not episode_ids:
            return []
        rows = self._read(
            f"SELECT {_EPISODE_COLS} FROM episodes WHERE id = ANY(%s)", (list(episode_ids),)
        )
        found = {r["id"]: POSTGRES_ROWS.episode(r) for r in rows}
        return [found[i] for i in episode_ids if i in found]

    def episode_dense_search(
        self,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        where = episode_filter_sql(agent_id, filters)
        if k <= 0 or where is None:
            return []
        return self._dense("episodes", user_id, vector, k, agent_id, filters, where)

    def episode_keyword_search(
        self,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, float]]:
        where = episode_filter_sql(agent_id, filters)
        if not terms or k <= 0 or where is None:
            return []
        return self._keywords("episodes", user_id, terms, int(k), agent_id, filters, where)

    def count_episodes(self, user_id: str, agent_id: str | None = None) -> int:
        where: Sequence[Any] = [user_id]
        sql = "SELECT count(*) AS n FROM episodes WHERE user_id=%s"
        if agent_id is not None:
            sql += " AND agent_id=%s"
            where = [user_id, agent_id]
        return int(self._read(sql, where)[0]["n"])
