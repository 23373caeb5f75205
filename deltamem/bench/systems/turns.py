"""Baselines that keep raw dialogue turns instead of extracted facts (MemBench's
RetrievalMemory, RecentMemory and FullMemory). No LLM is called on write."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from deltamem.bench.systems.base import MemorySystem, Retrieved, count_tokens
from deltamem.embed import Embedder
from deltamem.llm.base import LLM
from deltamem.timeparse import parse_time


@dataclass
class StoredTurn:
    speaker: str
    content: str
    timestamp: datetime | None
    session_id: str
    index: int  # position of the message in its session

    @property
    def text(self) -> str:
        return f"{self.speaker}: {self.content}"


def _turn(m: dict[str, Any], default: datetime | None, session_id: str, i: int) -> StoredTurn:
    who = m.get("name") or m.get("role", "user")
    return StoredTurn(who, str(m.get("content", "")).strip(), _time(m, default), session_id, i)


def _time(m: dict[str, Any], default: datetime | None) -> datetime | None:
    ts = m.get("timestamp")
    if isinstance(ts, datetime):
        return ts
    if isinstance(ts, str) and ts:
        try:
            return parse_time(ts)
        except ValueError:
            return default
    return default


class TurnSystem(MemorySystem):
    """Per-user lists of raw turns; subclasses decide what a search returns."""

    stores_raw_turns = True

    def __init__(self, llm: LLM | None = None) -> None:
        super().__init__(llm)
        self.turns: dict[str, list[StoredTurn]] = {}

    def _reset(self, user: str) -> None:
        self.turns.pop(user, None)

    def _add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> dict[str, float]:
        new = [
            _turn(m, timestamp, session_id, i)
            for i, m in enumerate(messages)
            if str(m.get("content", "")).strip()
        ]
        self.turns.setdefault(user, []).extend(new)
        self._stored(user, new)
        return {"memories_stored": len(new), "search_queries": 0}

    def _stored(self, user: str, new: list[StoredTurn]) -> None:
        """Hook for subclasses that index what was stored."""

    def _visible(self, user: str) -> list[StoredTurn]:
        return self.turns.get(user, [])

    def _session_memories(self, user: str, session_id: str) -> list[str]:
        return [t.text for t in self._visible(user) if t.session_id == session_id]

    @staticmethod
    def _out(ts: list[StoredTurn]) -> list[Retrieved]:
        return [
            Retrieved(
                t.text, t.timestamp, t.session_id, [t.index], kind="episode", speaker=t.speaker
            )
            for t in ts
        ]


class RetrievalSystem(TurnSystem):
    """Raw turns, searched by embedding cosine."""

    name = "retrieval"

    def __init__(self, embedder: Embedder, llm: LLM | None = None) -> None:
        super().__init__(llm)
        self.embedder = embedder
        self.vectors: dict[str, list[np.ndarray]] = {}

    def _reset(self, user: str) -> None:
        super()._reset(user)
        self.vectors.pop(user, None)

    def _stored(self, user: str, new: list[StoredTurn]) -> None:
        if new:
            vecs = self.embedder.embed([t.text for t in new])
            self.vectors.setdefault(user, []).extend(list(vecs))

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        turns = self.turns.get(user, [])
        if not turns or k <= 0:
            return []
        matrix = np.stack(self.vectors[user])
        sims = matrix @ self.embedder.embed_one(query)
        order = np.argsort(-sims, kind="stable")[:k]
        out = self._out([turns[i] for i in order])
        for r, i in zip(out, order, strict=True):
            r.score = float(sims[i])
        return out


class RecentSystem(TurnSystem):
    """Only the last `window` turns are kept; a search returns the last k of them."""

    name = "recent"

    def __init__(self, window: int = 40, llm: LLM | None = None) -> None:
        super().__init__(llm)
        self.window = window

    def _visible(self, user: str) -> list[StoredTurn]:
        return self.turns.get(user, [])[-self.window :] if self.window > 0 else []

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        visible = self._visible(user)
        return self._out(visible[-k:] if k > 0 else [])


class FullSystem(TurnSystem):
    """The whole history, cut from the oldest end to fit `budget_tokens`; the query
    and k are ignored (the whole context is the memory)."""

    name = "full"

    def __init__(self, budget_tokens: int = 6000, llm: LLM | None = None) -> None:
        super().__init__(llm)
        self.budget_tokens = budget_tokens

    def _tokens(self, text: str) -> int:
        return self.llm.count_tokens(text) if self.llm is not None else count_tokens(text)

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        kept: list[StoredTurn] = []
        used = 0
        for t in reversed(self.turns.get(user, [])):
            n = self._tokens(t.text)
            if used + n > self.budget_tokens:
                break
            kept.append(t)
            used += n
        return self._out(kept[::-1])
