"""HaluMem (Medium / Long) official JSONL: one user per line, read as a stream.

Fields follow SPEC §4.1. `is_update` is the strings "True"/"False" in the
official files (booleans are accepted too and normalised to those strings).
HaluMem-Long filler sessions carry `is_generated_qa_session: true`: runners add
them but never evaluate them. Sessions may lack `questions`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deltamem.bench.datasets.base import BenchSession, message, safe_time

DISTRACTOR_SOURCE = "interference"


class Evidence(BaseModel):
    model_config = ConfigDict(extra="allow")
    memory_content: str
    memory_type: str | None = None


class Question(BaseModel):
    model_config = ConfigDict(extra="allow")
    question: str
    answer: str = ""
    evidence: list[Evidence] = Field(default_factory=list)
    difficulty: str | None = None
    question_type: str = "unknown"

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class MemoryPoint(BaseModel):
    model_config = ConfigDict(extra="allow")
    index: int | None = None
    memory_content: str
    memory_type: str = "unknown"
    memory_source: str = "primary"
    is_update: str = "False"
    original_memories: list[str] = Field(default_factory=list)
    importance: float = 1.0
    timestamp: str | None = None

    @field_validator("is_update", mode="before")
    @classmethod
    def _bool_string(cls, v: Any) -> str:
        if isinstance(v, bool):
            return "True" if v else "False"
        return "True" if str(v).strip().lower() == "true" else "False"

    @field_validator("original_memories", mode="before")
    @classmethod
    def _list(cls, v: Any) -> list[str]:
        if v is None:
            return []
        return [str(x) for x in v] if isinstance(v, list) else [str(v)]

    @property
    def is_distractor(self) -> bool:
        return self.memory_source == DISTRACTOR_SOURCE

    @property
    def is_update_target(self) -> bool:
        """Routed to the update task (SPEC §4.1): is_update "True" with originals."""
        return self.is_update == "True" and bool(self.original_memories)


class Turn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str = ""
    timestamp: str | None = None
    dialogue_turn: int | str | None = None


class Session(BaseModel):
    model_config = ConfigDict(extra="allow")
    start_time: str | None = None
    end_time: str | None = None
    dialogue: list[Turn] = Field(default_factory=list)
    memory_points: list[MemoryPoint] = Field(default_factory=list)
    questions: list[Question] = Field(default_factory=list)
    is_generated_qa_session: bool = False

    @field_validator("memory_points", "questions", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v

    @property
    def evaluated(self) -> bool:
        return not self.is_generated_qa_session


class User(BaseModel):
    model_config = ConfigDict(extra="allow")
    uuid: str
    persona_info: Any = None
    sessions: list[Session] = Field(default_factory=list)

    @property
    def name(self) -> str | None:
        """The user's name from persona_info ("Name: Martin Mark; ..."), if stated."""
        info = self.persona_info
        if isinstance(info, dict):
            return info.get("name") or info.get("Name")
        if isinstance(info, str) and "Name:" in info:
            return info.split("Name:", 1)[1].split(";", 1)[0].strip() or None
        return None


def iter_users(path: str | Path, limit: int | None = None) -> Iterator[User]:
    """Users of a HaluMem JSONL file, one line at a time (the full files are large)."""
    n = 0
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            if limit is not None and n >= limit:
                return
            yield User.model_validate(json.loads(line))
            n += 1


def session_id(index: int) -> str:
    return f"s{index:03d}"


def to_bench_session(session: Session, index: int, user_name: str | None = None) -> BenchSession:
    """Messages of one session; blank turns are skipped, turn ids kept. The user's
    messages carry `user_name` as the speaker's name, as an assistant knows the
    account it talks with: the gold points name the person, and a fact about "the
    user" never matches them."""
    start = safe_time(session.start_time)
    messages: list[dict[str, Any]] = []
    turn_ids: list[str] = []
    for pos, t in enumerate(session.dialogue):
        if not t.content.strip() or t.role not in ("user", "assistant", "system"):
            continue
        name = user_name if t.role == "user" else None
        messages.append(message(t.role, t.content, safe_time(t.timestamp) or start, name=name))
        turn_ids.append(str(t.dialogue_turn if t.dialogue_turn is not None else pos))
    return BenchSession(
        session_id=session_id(index), timestamp=start, messages=messages, turn_ids=turn_ids
    )
