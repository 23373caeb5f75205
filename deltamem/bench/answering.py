"""Glue shared by the runners: any system's search results as deltamem SearchHits
(so one Answerer answers for every system), and error text for the log."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from deltamem.bench.systems.base import Retrieved
from deltamem.types import MemoryItem, SearchHit


def as_search_hits(found: Sequence[Retrieved], user: str, fallback: datetime) -> list[SearchHit]:
    out = []
    for i, r in enumerate(found):
        ts = r.timestamp or fallback
        item = MemoryItem(
            id=f"r{i}",
            user_id=user,
            content=r.content,
            timestamp=ts,
            session_id=r.session_id,
            turns=r.turns,
            created_at=ts,
            updated_at=ts,
        )
        out.append(SearchHit(memory=item, score=r.score, kind=r.kind, speaker=r.speaker))
    return out


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]
