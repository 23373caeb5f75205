"""LongMemEval (SPEC §4.4): a JSON list of instances, each with its own haystack of
sessions. Question ids ending in `_abs` are abstention questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from deltamem.bench.datasets.base import BenchSession, message, safe_time


class LMETurn(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str
    content: str = ""
    has_answer: bool = False


class Instance(BaseModel):
    model_config = ConfigDict(extra="allow")
    question_id: str
    question_type: str = ""
    question: str
    answer: str = ""
    question_date: str | None = None
    haystack_sessions: list[list[LMETurn]] = Field(default_factory=list)
    haystack_dates: list[str] = Field(default_factory=list)
    haystack_session_ids: list[str] = Field(default_factory=list)
    answer_session_ids: list[str] = Field(default_factory=list)

    @field_validator("answer", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("haystack_session_ids", "answer_session_ids", mode="before")
    @classmethod
    def _ids(cls, v: Any) -> list[str]:
        return [str(x) for x in v or []]

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    def session_ids(self) -> list[str]:
        if len(self.haystack_session_ids) == len(self.haystack_sessions):
            return self.haystack_session_ids
        return [f"h{i}" for i in range(len(self.haystack_sessions))]

    def sessions(self) -> list[BenchSession]:
        """Haystack sessions in file order; turn id "<session id>:<turn index>"."""
        out = []
        for k, (sid, turns) in enumerate(
            zip(self.session_ids(), self.haystack_sessions, strict=True)
        ):
            ts = safe_time(self.haystack_dates[k]) if k < len(self.haystack_dates) else None
            msgs, ids = [], []
            for j, t in enumerate(turns):
                if t.content.strip() and t.role in ("user", "assistant"):
                    msgs.append(message(t.role, t.content, ts))
                    ids.append(f"{sid}:{j}")
            out.append(BenchSession(session_id=sid, timestamp=ts, messages=msgs, turn_ids=ids))
        return out


def load(path: str | Path, limit: int | None = None) -> list[Instance]:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    items = [Instance.model_validate(r) for r in raw]
    return items[:limit] if limit is not None else items
