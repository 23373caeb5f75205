"""deltamem: long-term memory for LLM agents that stays right as facts change."""

from deltamem.aio import AsyncClient, AsyncMemory
from deltamem.answer import Answer
from deltamem.bulk import BulkResult
from deltamem.client import Client, Job, ServiceError
from deltamem.expiry import ExpiryConfig
from deltamem.llm.base import LLMError
from deltamem.llm.factory import LLMConfig
from deltamem.manager.agent import ManagerConfig
from deltamem.memory import InvalidSession, Memory, SessionFailed
from deltamem.provenance import InvalidEdit
from deltamem.store.base import SessionConflict
from deltamem.types import (
    AddResult,
    HistoryEntry,
    MemoryItem,
    Message,
    Operation,
    SearchFilters,
    SearchHit,
    SessionRecord,
    Version,
)

__all__ = [
    "AddResult",
    "Answer",
    "AsyncClient",
    "AsyncMemory",
    "BulkResult",
    "Client",
    "ExpiryConfig",
    "HistoryEntry",
    "InvalidEdit",
    "InvalidSession",
    "Job",
    "LLMConfig",
    "LLMError",
    "ManagerConfig",
    "Memory",
    "MemoryItem",
    "Message",
    "Operation",
    "SearchFilters",
    "SearchHit",
    "ServiceError",
    "SessionConflict",
    "SessionFailed",
    "SessionRecord",
    "Version",
]
__version__ = "0.1.0"
