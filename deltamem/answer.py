"""Answering a question from retrieved memories (SPEC §3): most recent wins, unknown
stays unknown, false premises get corrected."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from string import Template

from pydantic import BaseModel

from deltamem.llm.base import LLM
from deltamem.types import SearchHit

PROMPTS = Path(__file__).parent / "prompts"


class Answer(BaseModel):
    text: str
    memories: list[SearchHit]


class Answerer:
    def __init__(self, llm: LLM, max_tokens: int = 200) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self._system = (PROMPTS / "answer_system.txt").read_text(encoding="utf-8")
        self._user = Template((PROMPTS / "answer_user.txt").read_text(encoding="utf-8"))

    def prompt(
        self, question: str, hits: list[SearchHit], asked_at: datetime | None = None
    ) -> list[dict[str, str]]:
        # oldest first, so that "the most recent" is where the model looks last
        ordered = sorted(hits, key=lambda h: h.memory.timestamp)
        lines = [f"{h.memory.timestamp:%Y-%m-%d} | {h.memory.content}" for h in ordered]
        user = self._user.substitute(
            memories="\n".join(lines) if lines else "(no memories)",
            asked_at=f"Today is {asked_at:%Y-%m-%d}." if asked_at else "",
            question=question.strip(),
        )
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    def answer(
        self, question: str, hits: list[SearchHit], asked_at: datetime | None = None
    ) -> Answer:
        text = self.llm.complete(
            self.prompt(question, hits, asked_at), purpose="answer", max_tokens=self.max_tokens
        )
        return Answer(text=text.strip(), memories=hits)
