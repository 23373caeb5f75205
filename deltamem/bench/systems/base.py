"""The interface every system under test implements (SPEC §4, HaluMem §5).

Subclasses write `_reset`, `_add_session`, `_session_memories` and `_search`;
the public methods time each call and charge the system's LLM usage to its
`Cost`, so every adapter is accounted for the same way.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from deltamem.llm.base import LLM


@dataclass
class Retrieved:
    """One search result: its text, event time and provenance (session id and the
    indices of the session's messages it came from) when the system knows them."""

    text: str
    timestamp: datetime | None = None
    session_id: str | None = None
    turns: list[int] = field(default_factory=list)
    score: float = 0.0


@dataclass
class Cost:
    sessions: int = 0
    session_tokens: int = 0  # tokens of the dialogue given to add_session
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    add_seconds: float = 0.0
    searches: int = 0
    search_seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def count_tokens(text: str) -> int:
    """A model-free token estimate (≈ 4 characters a token)."""
    return max(1, len(text) // 4)


class MemorySystem(ABC):
    name: str = "system"

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
        try:
            self._add_session(user, session_id, messages, timestamp)
        finally:
            self.cost.add_seconds += time.perf_counter() - t0
            self.cost.sessions += 1
            self.cost.session_tokens += sum(
                count_tokens(f"{m.get('role')}: {m.get('content', '')}") for m in messages
            )
            if self.llm is not None and before is not None:
                used = self.llm.usage.since(before)
                self.cost.llm_calls += used.calls
                self.cost.prompt_tokens += used.prompt_tokens
                self.cost.completion_tokens += used.completion_tokens

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
    ) -> None: ...

    @abstractmethod
    def _session_memories(self, user: str, session_id: str) -> list[str]: ...

    @abstractmethod
    def _search(self, user: str, query: str, k: int) -> list[Retrieved]: ...
