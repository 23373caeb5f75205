"""SQL fragments the SQLite store's two tiers (memories, episodes) share."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from deltamem.porter import stem
from deltamem.store.keywords import TableStats, averages
from deltamem.types import SearchFilters

COMMON_TERM_DOCS = 4000  # keyword terms found in more rows than this are not ranked

# The version a user's bank starts at (bank_versions, episode_versions): the clock in
# microseconds, not 1, so that a user forgotten (their version rows deleted) and
# written again never comes back to a version that a process still holds a bank of.
FIRST_VERSION = "CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)"


def fts_query(terms: list[str]) -> str:
    """OR of quoted terms: user text never reaches FTS5 as query syntax."""
    return " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)


def filter_sql(
    agent_id: str | None, filters: SearchFilters | None, prefix: str = ""
) -> tuple[str, list[Any]]:
    parts: list[str] = []
    params: list[Any] = []
    if agent_id is not None:
        parts.append(f"{prefix}agent_id = ?")
        params.append(agent_id)
    if filters is not None:
        if filters.since is not None:
            parts.append(f"{prefix}ts >= ?")
            params.append(filters.since.timestamp())
        if filters.until is not None:
            parts.append(f"{prefix}ts <= ?")
            params.append(filters.until.timestamp())
        if filters.memory_type is not None:
            parts.append(f"{prefix}memory_type = ?")
            params.append(filters.memory_type)
        if filters.session_id is not None:
            parts.append(f"{prefix}session_id = ?")
            params.append(filters.session_id)
    return "".join(" AND " + p for p in parts), params


def rankable(
    read: Callable[[str, list[str]], list[sqlite3.Row]], terms: list[str], vocab: str
) -> list[str]:
    """The terms worth ranking by: BM25 costs O(documents matched), and a term in
    thousands of rows (a user's own name, in every one of theirs) has an IDF near
    zero, so it would cost the most and change the ranking the least."""
    if not terms:
        return []
    stems = {t: stem(t) for t in terms}
    distinct = sorted(set(stems.values()))  # "film" and "films" share a stem
    marks = ",".join("?" * len(distinct))
    df = {
        r["term"]: r["doc"]
        for r in read(f"SELECT term, doc FROM {vocab} WHERE term IN ({marks})", distinct)
    }
    return [t for t in terms if df.get(stems[t], 0) <= COMMON_TERM_DOCS]


def bm25_sql(
    read: Callable[..., list[sqlite3.Row]],
    table: str,
    user_id: str,
    terms: list[str],
    k: int,
    agent_id: str | None,
    filters: SearchFilters | None,
) -> list[tuple[str, float]]:
    """(id, relevance) of a user's rows of `table` (memories or episodes) by BM25 over
    its FTS5 twin `{table}_fts`, best first; any of the terms (found `rankable`) may
    match. The reference the in-memory ranking (`keywords.py`) is tested against."""
    if not terms:
        return []
    extra, params = filter_sql(agent_id, filters, prefix="t.")
    rows = read(
        f"""SELECT t.id AS id, bm25({table}_fts) AS rank FROM {table}_fts
            JOIN {table} t ON t.rowid = {table}_fts.rowid
            WHERE {table}_fts MATCH ? AND t.user_id = ?{extra}
            ORDER BY rank LIMIT ?""",
        [fts_query(terms), user_id, *params, int(k)],
    )
    return [(r["id"], -float(r["rank"])) for r in rows]


def fts_stats(read: Callable[..., list[sqlite3.Row]], table: str, tokens: list[str]) -> TableStats:
    """What FTS5's bm25() reads of `{table}_fts` for these tokens: its row count and
    token total (the averages record, row 1 of its data table) and each token's
    document count (its vocabulary table)."""
    block = read(f"SELECT block FROM {table}_fts_data WHERE id=1")
    rows, total = averages(block[0][0]) if block else (0, 0)
    distinct = sorted(set(tokens))
    marks = ",".join("?" * len(distinct))
    found = read(f"SELECT term, doc FROM {table}_fts_vocab WHERE term IN ({marks})", distinct)
    return TableStats(rows=rows, tokens=total, hits={r["term"]: r["doc"] for r in found})


def count_rows(
    read: Callable[..., list[sqlite3.Row]], table: str, user_id: str, agent_id: str | None
) -> int:
    extra, params = filter_sql(agent_id, None)
    return int(
        read(f"SELECT count(*) FROM {table} WHERE user_id=?{extra}", [user_id, *params])[0][0]
    )
