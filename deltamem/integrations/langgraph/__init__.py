"""deltamem for LangGraph (``pip install 'deltamem[langgraph]'``).

* `RecallMemories`, `SaveTurns`: graph nodes that put the user's recalled memories
  ahead of the model call and hand the finished turns to memory after it
  (`MemoryState` is `MessagesState` with the model's input); also usable as the
  prebuilt agent's ``pre_model_hook`` / ``post_model_hook``.
* `memory_tools`: the ``remember``, ``recall`` and ``answer_from_memory`` tools.
* `DeltamemStore`: a LangGraph `BaseStore` whose namespace ``("memories", user_id)``
  is that user's memory, for ``compile(store=...)``.
* `DeltamemChatModel`: a LangChain chat model on deltamem's own LLM (the embedded
  model), for graphs that run offline.

The user is always the one in the graph's config, ``config["configurable"]["user_id"]``
(or the namespace, for the store), never an argument the model writes.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
    import langgraph  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "deltamem.integrations.langgraph needs LangGraph: pip install 'deltamem[langgraph]'"
    ) from exc

from deltamem.integrations.langgraph.chat import DeltamemChatModel
from deltamem.integrations.langgraph.common import MissingUser, Writer, memory_prompt, user_of
from deltamem.integrations.langgraph.nodes import MemoryState, RecallMemories, SaveTurns
from deltamem.integrations.langgraph.store import DeltamemStore
from deltamem.integrations.langgraph.tools import (
    answer_tool,
    memory_tools,
    recall_tool,
    remember_tool,
)

__all__ = [
    "DeltamemChatModel",
    "DeltamemStore",
    "MemoryState",
    "MissingUser",
    "RecallMemories",
    "SaveTurns",
    "Writer",
    "answer_tool",
    "memory_prompt",
    "memory_tools",
    "recall_tool",
    "remember_tool",
    "user_of",
]
