"""SQL helpers the PostgreSQL store's two tiers (memories, episodes) share."""

from __future__ import annotations

import unicodedata
from typing import Any

import numpy as np

from deltamem.types import SearchFilters

FTS_CONFIG = "deltamem_fts"  # text search config made by the first migration


def vector_literal(v: np.ndarray) -> str:
    """pgvector's text form; %.9g round-trips every float32 exactly."""
    return "[" + ",".join(f"{x:.9g}" for x in np.asarray(v, dtype=np.float32).ravel()) + "]"


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
