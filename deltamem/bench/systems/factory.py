"""Building systems by name for the runners and the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deltamem.bench.systems.base import MemorySystem
from deltamem.bench.systems.deltamem_system import DeltamemSystem
from deltamem.bench.systems.pipeline import PipelineSystem
from deltamem.bench.systems.turns import FullSystem, RecentSystem, RetrievalSystem
from deltamem.embed import Embedder
from deltamem.llm.base import LLM
from deltamem.manager.agent import ManagerConfig

Factory = Callable[[LLM, Embedder, Path], MemorySystem]

SYSTEMS: dict[str, Factory] = {
    "deltamem": lambda llm, emb, work: DeltamemSystem(llm, emb, work / "deltamem.db"),
    # the same bank as "deltamem" (same writes), searched for facts only: run after
    # "deltamem" it replays that bank's log instead of paying for the writes again
    "deltamem-facts": lambda llm, emb, work: DeltamemSystem(
        llm, emb, work.parent / "deltamem" / "deltamem.db", tiers="facts", bank_of="deltamem"
    ),
    # the one-call "session" manager strategy, facts only: the manager before "turns"
    "deltamem-session": lambda llm, emb, work: DeltamemSystem(
        llm, emb, work / "deltamem.db", ManagerConfig(strategy="session"), tiers="facts"
    ),
    "pipeline": lambda llm, emb, work: PipelineSystem(llm, emb, work / "pipeline.db"),
    "retrieval": lambda llm, emb, work: RetrievalSystem(emb, llm=llm),
    "recent": lambda llm, emb, work: RecentSystem(llm=llm),
    "full": lambda llm, emb, work: FullSystem(llm=llm),
    "mem0": lambda llm, emb, work: _mem0(llm, emb, work),
}


def _mem0(llm: LLM, embedder: Embedder, work: Path) -> MemorySystem:
    from deltamem.bench.systems.mem0_system import Mem0System  # optional extra

    return Mem0System(llm, embedder, work / "mem0")


def make_system(name: str, llm: LLM, embedder: Embedder, workdir: Path) -> MemorySystem:
    """A fresh system; `workdir` is where it may keep files (created if needed)."""
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
    workdir.mkdir(parents=True, exist_ok=True)
    return SYSTEMS[name](llm, embedder, workdir)
