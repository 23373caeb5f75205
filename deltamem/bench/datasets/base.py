"""What every loader hands the runners: sessions as deltamem message lists."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from deltamem.timeparse import parse_time


def safe_time(value: Any) -> datetime | None:
    """A dataset timestamp as a datetime, or None when it is absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        return parse_time(value if isinstance(value, datetime) else str(value))
    except ValueError:
        return None


class BenchSession(BaseModel):
    """One dialogue session, ready for `add_session`.

    `messages` are `{role, content, timestamp, name}` dicts; `turn_ids[i]` is the
    dataset's own id of message i (HaluMem dialogue_turn, LoCoMo dia_id, ...),
    so evidence can be traced back from memory provenance.
    """

    session_id: str
    timestamp: datetime | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    turn_ids: list[str] = Field(default_factory=list)


def message(
    role: str, content: str, timestamp: datetime | None, name: str | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"role": role, "content": content}
    if timestamp is not None:
        out["timestamp"] = timestamp.isoformat()
    if name:
        out["name"] = name
    return out
