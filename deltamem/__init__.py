"""deltamem: long-term memory for LLM agents that stays right as facts change."""

from deltamem.answer import Answer
from deltamem.llm.factory import LLMConfig
from deltamem.manager.agent import ManagerConfig
from deltamem.memory import InvalidSession, Memory, SessionFailed
from deltamem.types import (
    AddResult,
    HistoryEntry,
    MemoryItem,
    Message,
    Operation,
    SearchFilters,
    SearchHit,
)

__all__ = [
    "AddResult",
    "Answer",
    "HistoryEntry",
    "InvalidSession",
    "LLMConfig",
    "ManagerConfig",
    "Memory",
    "MemoryItem",
    "Message",
    "Operation",
    "SearchFilters",
    "SearchHit",
    "SessionFailed",
]
__version__ = "0.1.0"
