"""When memories stop being served: an expiry per memory, TTLs per memory type, and
the sweep that deletes what has expired.

A memory's `expires_at` is set by hand (`Memory.set_expiry`, `PATCH
/v1/memories/{id}`), by the session it came from (`add(..., expires_at=...)`, over
REST `"expires_at"` on the session: every memory derived from it gets it), or by the
TTL of its type: `ExpiryConfig(ttl={"event": timedelta(days=30)})`, or from the
environment `DELTAMEM_TTL_EVENT=30d` (also `DELTAMEM_TTL_PERSONA`,
`DELTAMEM_TTL_RELATIONSHIP`). A TTL counts from the event time of the session that
wrote the memory (its add, or the update that last rewrote it), not from when it was
processed: replaying a year-old dialogue does not bring its events back for 30 days.

Once its expiry has passed a memory leaves search, `get_all` and what `answer` reads,
exactly as an outdated one does (`get_all(filters={"expired": True})` lists it);
`get` and `history` keep it until a sweep deletes it for good (`Memory.sweep_expired`,
`deltamem sweep`, or a worker started with `DELTAMEM_SWEEP_EVERY=1h`), recording a
`delete` by actor "expiry" in its history.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import get_args

from deltamem.timeparse import parse_time
from deltamem.types import MemoryType

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")

ENV_TTL = "DELTAMEM_TTL_"  # + the memory type, upper case
ENV_SWEEP_EVERY = "DELTAMEM_SWEEP_EVERY"


def parse_expiry(value: str | datetime) -> datetime:
    """An expiry as given (ISO 8601 or the formats of `parse_time`; no zone: UTC), in
    UTC; ValueError naming the input for one that cannot be read or held."""
    try:
        return parse_time(value).astimezone(UTC)
    except OverflowError:
        raise ValueError(f"expiry {value!s} is out of range") from None


def parse_duration(text: str) -> timedelta:
    """'30d', '12h', '90m', '45s', '2w', or several ('1d12h'); ValueError otherwise."""
    spec = "".join(text.strip().lower().split())
    if not spec:
        raise ValueError("an empty duration")
    pos, seconds = 0, 0.0
    for m in _DURATION.finditer(spec):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(spec) or seconds <= 0:
        raise ValueError(
            f"unreadable duration {text!r}: write a positive number and a unit, "
            "s, m, h, d or w (30d, 12h, 1d12h)"
        )
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class ExpiryConfig:
    """TTLs per memory type (none by default: memories do not expire)."""

    ttl: Mapping[MemoryType, timedelta] = field(default_factory=dict)

    def __post_init__(self) -> None:
        types = get_args(MemoryType)
        for kind, span in self.ttl.items():
            if kind not in types:
                raise ValueError(f"no memory type {kind!r} (types: {', '.join(types)})")
            if span <= timedelta(0):
                raise ValueError(f"the TTL of {kind!r} must be positive")

    @classmethod
    def from_env(cls) -> ExpiryConfig:
        """The TTLs of `DELTAMEM_TTL_EVENT`, `DELTAMEM_TTL_PERSONA` and
        `DELTAMEM_TTL_RELATIONSHIP` where set (e.g. `30d`)."""
        ttl: dict[MemoryType, timedelta] = {}
        for kind in get_args(MemoryType):
            raw = os.environ.get(ENV_TTL + kind.upper(), "").strip()
            if raw:
                try:
                    ttl[kind] = parse_duration(raw)
                except ValueError as exc:
                    raise ValueError(f"{ENV_TTL}{kind.upper()}: {exc}") from None
        return cls(ttl=ttl)

    def expires_at(self, memory_type: MemoryType | None, event_time: datetime) -> datetime | None:
        """When a memory of this type written for an event at `event_time` expires;
        None where its type has no TTL."""
        span = self.ttl.get(memory_type) if memory_type else None
        return event_time + span if span is not None else None


def sweep_every_from_env() -> float | None:
    """Seconds between a worker's sweeps, from `DELTAMEM_SWEEP_EVERY` (e.g. `1h`);
    None (no sweep in the worker) where unset."""
    raw = os.environ.get(ENV_SWEEP_EVERY, "").strip()
    if not raw:
        return None
    try:
        return parse_duration(raw).total_seconds()
    except ValueError as exc:
        raise ValueError(f"{ENV_SWEEP_EVERY}: {exc}") from None
