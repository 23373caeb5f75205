"""SQL helpers the PostgreSQL store's two tiers (memories, episodes) share."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from deltamem.types import SearchFilters

FTS_CONFIG = "deltamem_fts"  # text search config made by the first migration
SESSION_KEY = "user_id=%s AND agent_id=%s AND session_id=%s"  # one session's row
# The version a user's tier starts at in search_versions: the clock in microseconds,
# not 1, so that a user forgotten (their rows deleted) and written again never comes
# back to a version that a process still holds a bank of.
FIRST_VERSION = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"


def holds_nul(params: Sequence[Any]) -> bool:
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


def vector_literal(v: np.ndarray) -> str:
    """pgvector's text form; %.9g round-trips every float32 exactly."""
    return _literal(np.asarray(v, dtype=np.float32).ravel().tobytes())


@lru_cache(maxsize=8)  # a search sends its query vector for facts and for episodes
def _literal(raw: bytes) -> str:
    return "[" + ",".join(f"{x:.9g}" for x in np.frombuffer(raw, dtype=np.float32)) + "]"


def fold(text: str) -> str:
    """Strip diacritics ("café" -> "cafe"), as FTS5's unicode61 tokenizer does."""
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


def tsquery_sql(n: int) -> str:
    """SQL for the OR of n terms, each a bound parameter taken as a phrase."""
    return " || ".join([f"phraseto_tsquery('{FTS_CONFIG}', %s)"] * n)


def filter_sql(agent_id: str | None, filters: SearchFilters | None) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    if agent_id is not None:
        parts.append("agent_id = %s")
        params.append(agent_id)
    if filters is not None:
        if filters.since is not None:
            parts.append("ts >= %s")
            params.append(filters.since.timestamp())
        if filters.until is not None:
            parts.append("ts <= %s")
            params.append(filters.until.timestamp())
        if filters.memory_type is not None:
            parts.append("memory_type = %s")
            params.append(filters.memory_type)
        if filters.session_id is not None:
            parts.append("session_id = %s")
            params.append(filters.session_id)
    return "".join(" AND " + p for p in parts), params


def knn(
    read: Callable[..., list[dict[str, Any]]],
    table: str,
    user_id: str,
    vector: np.ndarray,
    k: int,
    where: tuple[str, list[Any]],
) -> list[tuple[str, float]]:
    """(id, cosine similarity) of a user's rows of `table` (memories or episodes),
    best first: exact KNN over the scope's rows (btree on user_id), not an
    approximate index, which filters after the search and loses per-user recall."""
    extra, params = where
    rows = read(
        f"""SELECT id, embedding <=> %s::vector AS distance FROM {table}
            WHERE user_id=%s{extra} ORDER BY distance, seq LIMIT %s""",
        [vector_literal(vector), user_id, *params, int(k)],
    )
    return [(r["id"], 1.0 - float(r["distance"])) for r in rows]


def text_rank(
    read: Callable[..., list[dict[str, Any]]],
    table: str,
    user_id: str,
    terms: list[str],
    limit: int | None,
    where: tuple[str, list[Any]],
) -> list[tuple[str, float]]:
    """(id, relevance) of a user's rows of `table` matching any term, best first.
    ts_rank_cd is cover density, not BM25; normalisation 1 (by log of the length)
    favours short rows as BM25 does."""
    extra, params = where
    rows = read(
        f"""SELECT id, ts_rank_cd(tsv, q.query, 1) AS rank
            FROM {table}, (SELECT {tsquery_sql(len(terms))} AS query) q
            WHERE tsv @@ q.query AND user_id=%s{extra}
            ORDER BY rank DESC, seq LIMIT %s""",
        [*map(fold, terms), user_id, *params, limit],
    )
    return [(r["id"], float(r["rank"])) for r in rows]


def bump_search_version(cur: Any, user_id: str, *tables: str) -> None:
    """Mark the user's rows of `tables` changed, in the writing transaction: every
    process's cached bank of them is reloaded on its next search. Run last in the
    transaction, so that its row lock is held only until the commit."""
    for table in sorted(tables):
        cur.execute(
            f"""INSERT INTO search_versions (user_id, tier, version)
               VALUES (%s, %s, {FIRST_VERSION})
               ON CONFLICT (user_id, tier)
               DO UPDATE SET version = search_versions.version + 1""",
            (user_id, table),
        )
