"""Multiple-choice answering (MemBench, PersonaMem): the retrieved items and the
options go to the model, which must reply with one of the option letters (a JSON
schema enum, checked again on the reply). Prompts: `prompts/choice.*.txt`."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from string import Template
from typing import Any

from deltamem.answer import memory_lines
from deltamem.llm.base import LLM
from deltamem.types import SearchHit

PROMPTS = Path(__file__).parent / "prompts"


def choice_schema(letters: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": letters}},
        "required": ["answer"],
        "additionalProperties": False,
    }


class ChoiceAnswerer:
    """`choose(question, choices, hits)` → one of the keys of `choices`."""

    def __init__(self, llm: LLM, max_tokens: int = 20) -> None:
        self.llm = llm
        self.max_tokens = max_tokens
        self._system = (PROMPTS / "choice.system.txt").read_text(encoding="utf-8").strip()
        self._item = Template((PROMPTS / "choice.item.txt").read_text(encoding="utf-8").strip())

    def prompt(
        self,
        question: str,
        choices: dict[str, str],
        hits: list[SearchHit],
        asked_at: datetime | None = None,
    ) -> list[dict[str, str]]:
        facts, excerpts = memory_lines(hits)
        item = self._item.substitute(
            facts="\n".join(facts) if facts else "(none)",
            excerpts="\n".join(excerpts) if excerpts else "(none)",
            asked_at=f"Today is {asked_at:%Y-%m-%d}." if asked_at else "",
            question=question.strip(),
            options="\n".join(f"({k}) {v.strip()}" for k, v in choices.items()),
        )
        return [{"role": "system", "content": self._system}, {"role": "user", "content": item}]

    def choose(
        self,
        question: str,
        choices: dict[str, str],
        hits: list[SearchHit],
        asked_at: datetime | None = None,
    ) -> str:
        letters = list(choices)

        def check(reply: dict[str, Any]) -> None:
            if str(reply.get("answer", "")).strip() not in letters:
                raise ValueError(f"answer is not one of {letters}")

        reply = self.llm.complete_json(
            self.prompt(question, choices, hits, asked_at),
            choice_schema(letters),
            purpose="answer:choice",
            max_tokens=self.max_tokens,
            check=check,
        )
        return str(reply["answer"]).strip()
