"""The interface every system under test implements (SPEC §4, HaluMem §5).

Subclasses write `_reset`, `_add_session`, `_session_memories` and `_search`;
the public methods time each call and charge the system's LLM usage to its
`Cost`, so every adapter is accounted for the same way.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from deltamem.llm.base import LLM
from deltamem.types import SearchHit


@dataclass
class Retrieved:
    """One search result: its text, event time and provenance (session id and the
    indices of the session's messages it came from) when the system knows them, and
    whether it is an extracted fact or a raw turn (shown to the answerer apart)."""

    text: str
    timestamp: datetime | None = None
    session_id: str | None = None
    turns: list[int] = field(default_factory=list)
    score: float = 0.0
    kind: Literal["fact", "episode"] = "fact"  # an extracted memory, or a raw turn
    speaker: str | None = None  # who said a raw turn; its text is then "speaker: words"

    def as_record(self) -> dict[str, Any]:
        """A JSON-ready form for results.jsonl: what an answerer needs to answer
        again from the log (`deltamem bench answer`), without the system."""
        out = asdict(self)
        out["timestamp"] = self.timestamp.isoformat() if self.timestamp else None
        return out

    @classmethod
    def from_hit(cls, hit: SearchHit) -> Retrieved:
        """A hit of deltamem's own search, a raw turn prefixed with its speaker."""
        episode = hit.kind == "episode"
        return cls(
            text=f"{hit.speaker}: {hit.memory.content}" if episode else hit.memory.content,
            timestamp=hit.memory.timestamp,
            session_id=hit.memory.session_id,
            turns=list(hit.memory.turns),
            score=hit.score,
            kind=hit.kind,
            speaker=hit.speaker,
        )

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Retrieved:
        ts = rec.get("timestamp")
        return cls(
            text=str(rec["text"]),
            timestamp=datetime.fromisoformat(ts) if ts else None,
            session_id=rec.get("session_id"),
            turns=[int(t) for t in rec.get("turns") or []],
            score=float(rec.get("score") or 0.0),
            kind="episode" if rec.get("kind") == "episode" else "fact",
            speaker=rec.get("speaker"),
        )

    @property
    def content(self) -> str:
        """The text without the speaker's prefix a raw turn carries."""
        prefix = f"{self.speaker}: "
        if self.kind == "episode" and self.speaker and self.text.startswith(prefix):
            return self.text[len(prefix) :]
        return self.text


@dataclass
class Cost:
    """What a system spent. Write side (add_session): the dialogue's tokens, LLM
    calls and tokens, the queries its own write path sent to its memory search
    (`search_queries`, e.g. Mem0's one search per fact) and how many memories it
    stored (adds + updates; raw turns for the turn baselines). Read side: the
    harness's `searches` and their time."""

    sessions: int = 0
    session_tokens: int = 0  # tokens of the dialogue given to add_session
    llm_calls: int = 0
    prompt_tokens: int = 0  # prompt tokens the LLM read on write (cached ones included)
    cached_tokens: int = 0  # of which served from a KV / prompt cache
    completion_tokens: int = 0
    llm_seconds: float = 0.0
    search_queries: int = 0  # write-path search-tool queries
    memories_stored: int = 0  # memories written (adds + updates)
    add_seconds: float = 0.0
    searches: int = 0  # read-path search calls made by the harness
    search_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# the per-session cost fields the runners log (differences of `Cost` over one add)
SESSION_COST_KEYS = (
    "session_tokens",
    "llm_calls",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "llm_seconds",
    "search_queries",
    "memories_stored",
    "add_seconds",
)
# fields an adapter may report for one add (see `MemorySystem._add_session`)
REPORTED_KEYS = (
    "session_tokens",
    "llm_calls",
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "llm_seconds",
    "search_queries",
    "memories_stored",
)


def count_tokens(text: str) -> int:
    """A model-free token estimate (≈ 4 characters a token)."""
    return max(1, len(text) // 4)


class MemorySystem(ABC):
    name: str = "system"
    # True when a session's "memories" are its raw turns: nothing was extracted,
    # so the accuracy judge (is this extracted memory right?) does not apply.
    stores_raw_turns: bool = False
    # The system whose bank this one reads (None: its own). A runner that has just
    # filled that bank in the same run must not reset it before this one reads it.
    bank_of: str | None = None

    def __init__(self, llm: LLM | None = None) -> None:
        self.llm = llm  # the system's own LLM: charged for writes, used to answer
        self.cost = Cost()

    # --- what the harness calls --------------------------------------------------
    def reset(self, user: str) -> None:
        self._reset(user)

    def add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> None:
        before = self.llm.usage.snapshot() if self.llm is not None else None
        t0 = time.perf_counter()
        reported: dict[str, float] = {}
        try:
            reported = dict(self._add_session(user, session_id, messages, timestamp) or {})
        finally:
            self.cost.add_seconds += time.perf_counter() - t0
            self.cost.sessions += 1
            # measured here unless the adapter reported its own figure for the add
            measured: dict[str, float] = {
                "session_tokens": sum(
                    count_tokens(f"{m.get('role')}: {m.get('content', '')}") for m in messages
                )
            }
            if self.llm is not None and before is not None:
                used = self.llm.usage.since(before)
                measured |= {
                    "llm_calls": used.calls,
                    "prompt_tokens": used.prompt_tokens,
                    "cached_tokens": used.cached_tokens,
                    "completion_tokens": used.completion_tokens,
                    "llm_seconds": used.seconds,
                }
            for key in REPORTED_KEYS:
                current = getattr(self.cost, key)
                value = reported.get(key, measured.get(key, 0))
                setattr(self.cost, key, current + type(current)(value))

    def get_session_memories(self, user: str, session_id: str) -> list[str]:
        return self._session_memories(user, session_id)

    def search_retrieved(self, user: str, query: str, k: int) -> list[Retrieved]:
        t0 = time.perf_counter()
        try:
            return self._search(user, query, k)
        finally:
            self.cost.search_seconds += time.perf_counter() - t0
            self.cost.searches += 1

    def search(self, user: str, query: str, k: int) -> list[str]:
        return [r.text for r in self.search_retrieved(user, query, k)]

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    # --- what adapters write -----------------------------------------------------
    @abstractmethod
    def _reset(self, user: str) -> None: ...

    @abstractmethod
    def _add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> dict[str, float] | None:
        """Store one session. May return the add's own cost figures (keys of
        `REPORTED_KEYS`); those it leaves out are measured by the harness (LLM
        usage, a 4-characters-a-token estimate of the dialogue, zero otherwise)."""

    @abstractmethod
    def _session_memories(self, user: str, session_id: str) -> list[str]: ...

    @abstractmethod
    def _search(self, user: str, query: str, k: int) -> list[Retrieved]: ...


def starts_empty(system: MemorySystem, earlier: Sequence[str]) -> bool:
    """Whether a fresh (not resumed) run must reset this system's bank: always,
    unless the bank belongs to a system that filled it earlier in the same run."""
    return system.bank_of is None or system.bank_of not in earlier
