"""PersonaMem (SPEC §4.4): a questions CSV plus a contexts JSONL in which each line
maps a `shared_context_id` to its list of `{role, content}` messages. Each
question sees the shared context up to `end_index_in_shared_context`
(inclusive) and is multiple choice; `correct_answer` is written "(c)"."""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from deltamem.bench.datasets.base import BenchSession, message

_LETTER = re.compile(r"\(?\s*([a-zA-Z])\s*\)")
_OPTION = re.compile(r"^\s*\(\s*([a-zA-Z])\s*\)\s*(.*)$", re.S)


class PMQuestion(BaseModel):
    model_config = ConfigDict(extra="allow")
    persona_id: str
    question_id: str
    question_type: str = ""
    user_question_or_message: str
    correct_answer: str
    all_options: list[str]
    shared_context_id: str
    end_index_in_shared_context: int

    @field_validator("all_options", mode="before")
    @classmethod
    def _options(cls, v: Any) -> list[str]:
        if isinstance(v, list):
            return [str(x) for x in v]
        text = str(v).strip()
        for parse in (json.loads, ast.literal_eval):
            try:
                value = parse(text)
            except (ValueError, SyntaxError):
                continue
            if isinstance(value, list):
                return [str(x) for x in value]
        return [text]

    @property
    def correct_letter(self) -> str:
        m = _LETTER.search(self.correct_answer)
        return (m.group(1) if m else self.correct_answer.strip()[:1]).lower()

    @property
    def choices(self) -> dict[str, str]:
        """Options by letter: "(b) Visit a pottery studio" → {"b": "Visit a pottery
        studio"}; an option without a "(x)" prefix takes its position's letter."""
        out: dict[str, str] = {}
        for i, option in enumerate(self.all_options):
            m = _OPTION.match(option)
            letter, text = (m.group(1).lower(), m.group(2)) if m else (chr(ord("a") + i), option)
            out[letter] = text.strip()
        return out


def load_questions(path: str | Path) -> list[PMQuestion]:
    with Path(path).open(encoding="utf-8", newline="") as fh:
        return [PMQuestion.model_validate(row) for row in csv.DictReader(fh)]


def load_contexts(path: str | Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.update(json.loads(line))
    return out


def context_session(q: PMQuestion, contexts: dict[str, list[dict[str, Any]]]) -> BenchSession:
    """The shared context a question may see, as one session (system turns kept
    out: they hold the persona prompt, not dialogue)."""
    raw = contexts[q.shared_context_id]
    return range_session(q.shared_context_id, raw, 0, q.end_index_in_shared_context + 1)


def range_session(
    context_id: str, raw: list[dict[str, Any]], start: int, stop: int, session_id: str | None = None
) -> BenchSession:
    """Messages start..stop-1 of a shared context as one session; turn id i is the
    message's index in the context. System turns and blank turns are left out."""
    msgs, ids = [], []
    for i in range(start, min(stop, len(raw))):
        m = raw[i]
        role, content = str(m.get("role", "")), str(m.get("content", ""))
        if role in ("user", "assistant") and content.strip():
            msgs.append(message(role, content, None))
            ids.append(str(i))
    return BenchSession(session_id=session_id or context_id, messages=msgs, turn_ids=ids)
