"""Answering a question from retrieved memories (SPEC §3): most recent wins, unknown
stays unknown, false premises get corrected. Facts and conversation excerpts
(episodes) are shown apart, each dated, so the newest fact wins and a fact the
manager missed can still be read in the user's own words."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from string import Template
from typing import Literal

from pydantic import BaseModel

from deltamem.llm.base import LLM
from deltamem.text import clip
from deltamem.types import SearchHit

PROMPTS = Path(__file__).parent / "prompts"
# an excerpt longer than this is cut: a long assistant turn would crowd out the rest
EXCERPT_CHARS = 600


Order = Literal["date", "newest", "relevance"]
ORDERS: tuple[Order, ...] = ("date", "newest", "relevance")
# what the prompt says of the order the items are listed in
ORDER_NOTE = {"date": "oldest first", "newest": "newest first", "relevance": "most relevant first"}


def memory_lines(hits: list[SearchHit], order: Order = "date") -> tuple[list[str], list[str]]:
    """Facts ("date | fact") and conversation excerpts ("date | speaker: words"),
    each tier oldest first ("date": "the most recent" is where the model looks
    last), newest first ("newest": where a small model looks first), or as search
    ranked them ("relevance": the best match first)."""
    ordered = list(hits)
    if order in ("date", "newest"):
        ordered.sort(key=lambda h: h.memory.timestamp, reverse=order == "newest")
    facts = [
        f"{h.memory.timestamp:%Y-%m-%d} | {h.memory.content}" for h in ordered if h.kind == "fact"
    ]
    excerpts = [
        f"{h.memory.timestamp:%Y-%m-%d} | {h.speaker or 'user'}: "
        f"{clip(h.memory.content, EXCERPT_CHARS)}"
        for h in ordered
        if h.kind == "episode"
    ]
    return facts, excerpts


class Answer(BaseModel):
    text: str
    memories: list[SearchHit]


class Answerer:
    """`order`: how the items are listed (docs/benchmarks.md measures both)."""

    def __init__(self, llm: LLM, max_tokens: int = 200, order: Order = "date") -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self.order: Order = order
        self._system = (PROMPTS / "answer_system.txt").read_text(encoding="utf-8")
        self._user = Template((PROMPTS / "answer_user.txt").read_text(encoding="utf-8"))

    def prompt(
        self, question: str, hits: list[SearchHit], asked_at: datetime | None = None
    ) -> list[dict[str, str]]:
        facts, excerpts = memory_lines(hits, self.order)
        user = self._user.substitute(
            order=ORDER_NOTE[self.order],
            facts="\n".join(facts) if facts else "(none)",
            excerpts="\n".join(excerpts) if excerpts else "(none)",
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
