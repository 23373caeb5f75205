"""Adapter for deltamem itself: the `Memory` facade with the agentic manager."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.bench.systems.base import REPORTED_KEYS, MemorySystem, Retrieved
from deltamem.embed import Embedder
from deltamem.llm.base import LLM
from deltamem.manager.agent import ManagerConfig
from deltamem.memory import Memory
from deltamem.retrieval.hybrid import Tiers


class DeltamemSystem(MemorySystem):
    """deltamem as shipped: facts and episodes searched together. With
    `tiers="facts"` (the `deltamem-facts` system) only the manager's facts are
    searched, which keeps the manager's own effect visible."""

    name = "deltamem"

    def __init__(
        self,
        llm: LLM,
        embedder: Embedder,
        path: str | Path,
        config: ManagerConfig | None = None,
        tiers: Tiers = "all",
        bank_of: str | None = None,
    ) -> None:
        super().__init__(llm)
        self.tiers: Tiers = tiers
        self.bank_of = bank_of
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if tiers == "facts":
            session = config is not None and config.strategy == "session"
            self.name = "deltamem-session" if session else "deltamem-facts"
        self.memory = Memory(path, llm=llm, embedder=embedder, config=config, log_calls=False)

    def _reset(self, user: str) -> None:
        self.memory.reset(user)

    def _add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> dict[str, float]:
        result = self.memory.add(messages, user_id=user, session_id=session_id, timestamp=timestamp)
        if result.already_applied:  # replayed from the log: nothing was spent
            return {k: 0 for k in REPORTED_KEYS if k != "session_tokens"}
        cost = {k: float(v) for k, v in result.cost.items() if k in REPORTED_KEYS}
        return cost | {"memories_stored": len(result.applied)}

    def _session_memories(self, user: str, session_id: str) -> list[str]:
        return [m.content for m in self.memory.session_memories(session_id, user)]

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        # what the product's `answer` reads: superseded excerpts left out
        hits = self.memory.context(query, user_id=user, limit=k, tiers=self.tiers)
        return [Retrieved.from_hit(h) for h in hits]

    def close(self) -> None:
        self.memory.close()
