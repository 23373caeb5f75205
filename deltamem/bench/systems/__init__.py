"""Memory systems under test, all behind one interface (`MemorySystem`).

Adapters: `deltamem` (our agentic manager), `pipeline` (Mem0's multi-agent
write path on our ports: one extraction call, then per fact a search and an
ADD/UPDATE/DELETE/NONE decision call), `retrieval` (raw turns, embedding
search, no LLM on write), `recent` (last N turns), `full` (the whole history,
cut to a token budget), `mem0` (the real `mem0ai` package, optional extra,
run on our model and embeddings through a loopback OpenAI-compatible endpoint).
A new system plugs in by subclassing `MemorySystem` and registering a factory
in `SYSTEMS`.
"""

from deltamem.bench.systems.base import Cost, MemorySystem, Retrieved
from deltamem.bench.systems.factory import SYSTEMS, make_system

__all__ = ["SYSTEMS", "Cost", "MemorySystem", "Retrieved", "make_system"]
