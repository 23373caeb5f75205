"""Memory systems under test, all behind one interface (`MemorySystem`).

Adapters: `deltamem` (our agentic manager), `retrieval` (raw turns, embedding
search, no LLM on write), `recent` (last N turns), `full` (the whole history,
cut to a token budget).

TODO: the `pipeline` baseline (Mem0-style: one extraction call, then per fact a
search and an ADD/UPDATE/DELETE/NONE decision call, SPEC §2) and a `mem0`
adapter for the third-party library are still to be written; they plug in by
subclassing `MemorySystem` and registering a factory in `SYSTEMS`.
"""

from deltamem.bench.systems.base import Cost, MemorySystem, Retrieved
from deltamem.bench.systems.factory import SYSTEMS, make_system

__all__ = ["SYSTEMS", "Cost", "MemorySystem", "Retrieved", "make_system"]
