"""Building systems by name for the runners and the CLI: a built-in name of
`SYSTEMS`, or `package.module:ClassName`, any `MemorySystem` subclass from outside
(docs/bench.md, "Plugging in a system")."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


class SystemSpecError(ValueError):
    """A `package.module:ClassName` that does not name a usable MemorySystem."""


def system_class(spec: str) -> type[MemorySystem]:
    """The class `package.module:ClassName` names, checked to be a concrete
    `MemorySystem` (the module is imported; the current directory is searched too)."""
    from deltamem.bench.task import TaskError, load_object

    try:
        obj = load_object(spec, "system")
    except TaskError as exc:
        raise SystemSpecError(str(exc)) from exc
    if not (isinstance(obj, type) and issubclass(obj, MemorySystem)):
        raise SystemSpecError(
            f"system {spec!r} is not a MemorySystem: subclass "
            "deltamem.bench.systems.MemorySystem and write _reset, _add_session, "
            "_session_memories and _search (docs/bench.md)"
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        raise SystemSpecError(f"system {spec!r} does not write {missing}")
    return obj


def plugged_system(spec: str, llm: LLM, embedder: Embedder, workdir: Path) -> MemorySystem:
    """An instance of the class `spec` names, given those of `llm`, `embedder` and
    `workdir` its constructor takes (by name); named after the class unless it sets
    `name` itself."""
    cls = system_class(spec)
    params = inspect.signature(cls).parameters.values()
    anything = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    takes = {p.name for p in params}
    given: dict[str, Any] = {"llm": llm, "embedder": embedder, "workdir": workdir}
    system = cls(**{k: v for k, v in given.items() if anything or k in takes})
    if system.name == MemorySystem.name:
        system.name = cls.__name__
    return system


def make_system(name: str, llm: LLM, embedder: Embedder, workdir: Path) -> MemorySystem:
    """A fresh system; `workdir` is where it may keep files (created if needed).
    `name` is a built-in one or `package.module:ClassName`."""
    if ":" in name:
        workdir.mkdir(parents=True, exist_ok=True)
        return plugged_system(name, llm, embedder, workdir)
    if name not in SYSTEMS:
        raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
    workdir.mkdir(parents=True, exist_ok=True)
    return SYSTEMS[name](llm, embedder, workdir)
