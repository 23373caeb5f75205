"""Search of the PostgreSQL store's two tiers over per-user banks cached in the process.

A user's rows of a table (vectors, the filter columns, the stored tsvectors) are read
once into a `PgBank` and reused while the user's version of that table in
`search_versions` is unchanged; every write bumps it in the same transaction
(`bump_search_version`), so a process sees another's write on its next search. A
search reads the version in the statement it sends anyway: dense search sends the
candidates numpy picked, for PostgreSQL to score exactly; keyword search sends the
terms, for PostgreSQL to parse (`phraseto_tsquery`). Where the bank is stale the
search reloads it (only the rows added or changed since) and asks again. The
ranking is the SQL's (`pg_bank.py`; tested in tests/test_search_ranking_pg.py);
`PostgresStore(cached_search=False)` ranks in SQL on every query, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import psycopg

from deltamem.store.base import Store, TierRanking
from deltamem.store.pg_bank import PgBank, Postings, parse_tsvector, query_lexeme
from deltamem.store.pg_sql import (
    FTS_CONFIG,
    filter_sql,
    fold,
    holds_nul,
    knn,
    text_rank,
    vector_literal,
)
from deltamem.store.postgres_episodes import episode_filter_sql
from deltamem.store.vectors import VectorCache, side_by_side
from deltamem.types import SearchFilters

Row = dict[str, Any]
Where = tuple[str, list[Any]]

_VERSION = "coalesce((SELECT version FROM search_versions WHERE user_id=%s AND tier=%s), 0)"
_RETRIES = 3  # reloads of a bank that went stale meanwhile, before ranking in SQL


class PostgresSearch:
    if TYPE_CHECKING:  # provided by PostgresStore
        dim: int
        cached_search: bool
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]

    _caches: dict[str, VectorCache]

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
        """The four rankings from the cached banks with one statement: it reads both
        tiers' versions, scores both tiers' dense candidates and parses the terms
        (where `_dense` and `_keywords` send one statement each, per tier)."""
        scopes = {"memories": filter_sql(agent_id, filters) if facts else None}
        scopes["episodes"] = episode_filter_sql(agent_id, filters) if episodes else None
        live = [t for t, where in scopes.items() if where is not None]
        if not live or k <= 0 or not self.cached_search or holds_nul([user_id, terms]):
            return cast(Store, super()).tier_rankings(
                user_id, vector, terms, k, agent_id, filters, facts=facts, episodes=episodes
            )
        ranked = {"memories": TierRanking(), "episodes": TierRanking()}
        banks = {t: self._cached(t, user_id) or self._bank(t, user_id) for t in live}
        for _ in range(_RETRIES):
            found = self._candidates(banks, vector, k, agent_id, filters)
            bounded = {t: ids for t, ids in found.items() if ids is not None}
            if len(bounded) < len(found):  # a zero vector: SQL ranks every row
                break
            row = self._read(*_ranking_statement(user_id, vector, terms, k, bounded))[0]
            stale = [t for t in live if int(row[f"v_{t}"]) != banks[t].version]
            for t in stale:
                banks[t] = self._bank(t, user_id, int(row[f"v_{t}"]))
            if stale:
                continue
            parsed = [query_lexeme(q) for q in row["queries"]]
            phrase = any(p is False for p in parsed)
            lexemes = [p for p in parsed if isinstance(p, str)]
            for t in live:
                ranked[t].dense = _nearest(row, t)
                if not terms:
                    continue
                if phrase or banks[t].postings is None:
                    where = cast(Where, scopes[t])
                    ranked[t].keywords = text_rank(self._read, t, user_id, terms, k, where)
                else:
                    ranked[t].keywords = banks[t].keyword_rank(lexemes, k, agent_id, filters)
            return ranked["memories"], ranked["episodes"]
        return cast(Store, super()).tier_rankings(
            user_id, vector, terms, k, agent_id, filters, facts=facts, episodes=episodes
        )

    @staticmethod
    def _candidates(
        banks: dict[str, PgBank],
        vector: np.ndarray,
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
    ) -> dict[str, list[str] | None]:
        """Each bank's dense candidates (`PgBank.candidates`), two banks side by side
        where they are large."""
        near = [
            lambda b=bank: b.candidates(vector, k, agent_id, filters) for bank in banks.values()
        ]
        if len(near) == 1:
            return dict(zip(banks, [near[0]()], strict=True))
        rows = sum(len(b.ids) for b in banks.values())
        return dict(zip(banks, side_by_side(near[0], near[1], rows), strict=True))

    def _cache(self, table: str) -> VectorCache:
        if not hasattr(self, "_caches"):
            self._caches = {"memories": VectorCache(), "episodes": VectorCache()}
        return self._caches[table]

    def _bank(self, table: str, user_id: str, version: int | None = None) -> PgBank:
        """The user's bank of `table` at `version` (read now where None), or newer."""
        if version is None:
            version = int(self._read(f"SELECT {_VERSION} AS v", (user_id, table))[0]["v"])
        load = lambda u, old: self._load_bank(table, u, cast(PgBank | None, old))  # noqa: E731
        return cast(PgBank, self._cache(table).get(user_id, version, load))

    def _cached(self, table: str, user_id: str) -> PgBank | None:
        return cast(PgBank | None, self._cache(table).peek(user_id))

    def _load_bank(self, table: str, user_id: str, old: PgBank | None = None) -> PgBank:
        """The user's rows of `table`, read in one snapshot with their version. Given
        the bank it replaces, only the rows added or changed since are read (a row's
        xmin changes with each update; its seq never does), the others are kept."""
        # episodes have no memory type: '' matches no memory_type filter
        cols = f"""seq, xmin::text::bigint AS xmin, id, agent_id,
            {"memory_type" if table == "memories" else "''"} AS memory_type, session_id, ts,
            vector_send(embedding) AS embedding, tsv::text AS tsv"""
        keep = None
        with self._tx() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            got = cur.execute(f"SELECT {_VERSION} AS v", (user_id, table)).fetchone()
            if old is None or old.rowids is None:
                sql = f"SELECT {cols} FROM {table} WHERE user_id=%s ORDER BY seq"
                rows = cur.execute(sql, (user_id,)).fetchall()
            else:
                now = cur.execute(
                    f"""SELECT coalesce(array_agg(seq ORDER BY seq), '{{}}') AS seq,
                        coalesce(array_agg(xmin::text::bigint ORDER BY seq), '{{}}') AS xmin
                        FROM {table} WHERE user_id=%s""",
                    (user_id,),
                ).fetchone()
                assert now is not None
                seqs = np.array(now["seq"], dtype=np.int64)
                at = np.minimum(np.searchsorted(old.rowids, seqs), max(len(old.ids) - 1, 0))
                keep = np.zeros(len(seqs), dtype=bool)
                if len(old.ids):
                    keep = (old.rowids[at] == seqs) & (old.xmins[at] == np.array(now["xmin"]))
                sql = f"SELECT {cols} FROM {table} WHERE user_id=%s AND seq = ANY(%s) ORDER BY seq"
                rows = cur.execute(sql, (user_id, seqs[~keep].tolist())).fetchall()
        fresh = self._rows_bank(rows, int(got["v"]) if got else 0)
        if keep is None or old is None:
            return fresh
        return old.merged(fresh, keep, at[keep])

    def _rows_bank(self, rows: list[Row], version: int) -> PgBank:
        # vector_send: int16 dim, int16 unused, then big-endian float32s
        raw = b"".join(bytes(r["embedding"])[4:] for r in rows)
        matrix = np.frombuffer(raw, dtype=">f4").astype(np.float32).reshape(len(rows), self.dim)
        wide = matrix.astype(np.float64)
        parsed = [parse_tsvector(r["tsv"]) for r in rows]
        return PgBank(
            version=version,
            ids=[r["id"] for r in rows],
            matrix=matrix,
            agent=np.array([r["agent_id"] for r in rows], dtype=object),
            mtype=np.array([r["memory_type"] for r in rows], dtype=object),
            session=np.array([r["session_id"] or "" for r in rows], dtype=object),
            ts=np.array([r["ts"] for r in rows], dtype=np.float64),
            rowids=np.array([r["seq"] for r in rows], dtype=np.int64),
            norms=np.sqrt(np.einsum("ij,ij->i", wide, wide)),
            xmins=np.array([r["xmin"] for r in rows], dtype=np.int64),
            parsed=parsed,
            postings=None if None in parsed else Postings.build(cast(list, parsed)),
        )

    # --- dense ---------------------------------------------------------------------
    def _dense(
        self,
        table: str,
        user_id: str,
        vector: np.ndarray,
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
        where: Where,
    ) -> list[tuple[str, float]]:
        """(id, 1 - pgvector's cosine distance) of the k nearest rows in scope."""
        if not self.cached_search or "\x00" in user_id:
            return knn(self._read, table, user_id, vector, k, where)
        bank = self._cached(table, user_id) or self._bank(table, user_id)
        for _ in range(_RETRIES):
            ids = bank.candidates(vector, k, agent_id, filters)
            if ids is None:
                break
            row = self._read(*_ranking_statement(user_id, vector, [], k, {table: ids}))[0]
            if int(row[f"v_{table}"]) == bank.version:
                return _nearest(row, table)
            bank = self._bank(table, user_id, int(row[f"v_{table}"]))
        return knn(self._read, table, user_id, vector, k, where)

    # --- keywords ------------------------------------------------------------------
    def _keywords(
        self,
        table: str,
        user_id: str,
        terms: list[str],
        k: int,
        agent_id: str | None,
        filters: SearchFilters | None,
        where: Where,
    ) -> list[tuple[str, float]]:
        """(id, ts_rank_cd) of the rows in scope matching any term, best first."""
        limit = k if k >= 0 else None
        if not self.cached_search:
            return text_rank(self._read, table, user_id, terms, limit, where)
        rows = self._read(*_ranking_statement(user_id, None, terms, 0, {}))
        if not rows:  # a NUL in the user id or a term: nothing stored can match
            return []
        parsed = [query_lexeme(q) for q in rows[0]["queries"]]
        if any(p is False for p in parsed):  # a phrase: ranked in SQL
            return text_rank(self._read, table, user_id, terms, limit, where)
        bank = self._bank(table, user_id, int(rows[0][f"v_{table}"]))
        if bank.postings is None:
            return text_rank(self._read, table, user_id, terms, limit, where)
        lexemes = [p for p in parsed if isinstance(p, str)]
        return bank.keyword_rank(
            lexemes, len(bank.ids) if limit is None else limit, agent_id, filters
        )


def _ranking_statement(
    user_id: str,
    vector: np.ndarray | None,
    terms: list[str],
    k: int,
    candidates: dict[str, list[str]],
) -> tuple[str, list[Any]]:
    """One row: each tier's version (`v_<table>`), the `phraseto_tsquery` text of each
    term (`queries`) and, for each table in `candidates`, the k nearest of those rows
    by pgvector's distance to `vector` as the full query orders them (`ids_<table>`,
    `d_<table>`; read them with `_nearest`)."""
    params: list[Any] = [user_id, "memories", user_id, "episodes", [fold(t) for t in terms]]
    if candidates:
        assert vector is not None
        params.append(vector_literal(vector))
    ranked, joins = [], []
    for table, ids in candidates.items():
        ranked.append(f"r_{table}.ids AS ids_{table}, r_{table}.d AS d_{table}")
        joins.append(
            f"""LEFT JOIN LATERAL (
                SELECT array_agg(id ORDER BY distance, seq) AS ids,
                       array_agg(distance ORDER BY distance, seq) AS d
                FROM (SELECT id, seq, embedding <=> q.v AS distance FROM {table}
                      WHERE id = ANY(%s) AND user_id=%s ORDER BY distance, seq LIMIT %s) c
            ) r_{table} ON true"""
        )
        params += [ids, user_id, int(k)]
    sql = f"""SELECT {_VERSION} AS v_memories, {_VERSION} AS v_episodes,
            ARRAY(SELECT phraseto_tsquery('{FTS_CONFIG}', t)::text
                  FROM unnest(%s::text[]) WITH ORDINALITY AS u(t, n) ORDER BY n) AS queries
            {"".join(", " + r for r in ranked)}
        {"FROM (SELECT %s::vector AS v) q " + " ".join(joins) if candidates else ""}"""
    return sql, params


def _nearest(row: Row, table: str) -> list[tuple[str, float]]:
    """(id, 1 - pgvector's cosine distance) of `table`'s candidates in a ranking row."""
    near = zip(row[f"ids_{table}"] or [], row[f"d_{table}"] or [], strict=True)
    return [(i, 1.0 - float(d)) for i, d in near]
