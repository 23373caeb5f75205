"""Parsing the timestamps that dialogue datasets and users hand us.

Times without a zone are taken as UTC so that every stored time compares with
every other one.
"""

from __future__ import annotations

from datetime import UTC, datetime

_FORMATS = (
    "%b %d, %Y, %H:%M:%S",  # HaluMem: "Feb 13, 2029, 10:51:39"
    "%b %d, %Y %H:%M:%S",
    "%b %d, %Y",
    "%I:%M %p on %d %B, %Y",  # LoCoMo: "1:56 pm on 8 May, 2023"
    "%I:%M %p on %d %b, %Y",
    "%Y/%m/%d (%a) %H:%M",  # LongMemEval: "2023/05/20 (Sat) 02:21"
    "%Y/%m/%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d",
    "%d %B %Y",
    "%B %d, %Y",
)


def parse_time(value: str | datetime) -> datetime:
    """Parse ISO 8601 or one of the dataset formats; raise ValueError naming the input."""
    if isinstance(value, datetime):
        dt = value
    elif not isinstance(value, str):
        raise ValueError(f"unrecognised timestamp {value!r}: give a string or a datetime")
    else:
        text = " ".join(value.strip().split())
        parsed: datetime | None = None
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            for fmt in _FORMATS:
                try:
                    parsed = datetime.strptime(text, fmt)
                    break
                except ValueError:
                    continue
        if parsed is None:
            raise ValueError(f"unrecognised timestamp {value!r}")
        dt = parsed
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def human_date(dt: datetime) -> str:
    """'Monday, 13 February 2029, 10:51' — what the LLM sees."""
    return dt.strftime("%A, %d %B %Y, %H:%M")
