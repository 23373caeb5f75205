"""SQL helpers the PostgreSQL store's two tiers (memories, episodes) share."""

from __future__ import annotations

import unicodedata

import numpy as np

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
