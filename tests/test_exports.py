"""The names a user of the library meets in the README import from `deltamem`."""

from __future__ import annotations

import re
from pathlib import Path

import deltamem

README = Path(__file__).resolve().parent.parent / "README.md"


def test_every_exception_the_readme_names_imports_from_deltamem() -> None:
    text = README.read_text(encoding="utf-8")
    named = set(
        re.findall(r"`(?:deltamem\.)?([A-Z]\w*(?:Error|Conflict|Failed)|Invalid\w+)`", text)
    )
    # (the LangGraph integration's `MissingUser` is its own: it needs the langgraph extra)
    assert {"SessionConflict", "InvalidSession", "SessionFailed", "LLMError"} <= named
    for name in sorted(named):
        assert name in deltamem.__all__, name
        assert issubclass(getattr(deltamem, name), Exception), name


def test_the_readme_imports_work() -> None:
    from deltamem import (  # noqa: F401
        InvalidEdit,
        InvalidSession,
        LLMError,
        ServiceError,
        SessionConflict,
        SessionFailed,
    )
    from deltamem.llm.base import LLMError as Raised
    from deltamem.store.base import SessionConflict as Conflict

    assert LLMError is Raised and SessionConflict is Conflict  # the classes raised, not copies
