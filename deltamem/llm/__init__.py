"""The LLM port and its adapters. `make_llm(spec)` turns a short spec into a model."""

from deltamem.llm.base import (
    LLM,
    CallRecord,
    Completion,
    LLMError,
    LLMOutputError,
    LLMTimeout,
    Usage,
)
from deltamem.llm.factory import LLMConfig, make_llm

__all__ = [
    "LLM",
    "CallRecord",
    "Completion",
    "LLMConfig",
    "LLMError",
    "LLMOutputError",
    "LLMTimeout",
    "Usage",
    "make_llm",
]
