"""The LoCoMo LLM judge: CORRECT / WRONG per answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltamem.bench.judges.base import CACHE, LOCOMO, Judge, JudgeCache
from deltamem.llm.base import LLM


def ask(judge: Judge, question: str, answer: str, prediction: str) -> dict[str, Any]:
    """The judge's reply for one answer, asked the same way by a run and by the
    agreement command."""
    return judge.ask(question=question, answer=answer, prediction=prediction or "")


class LocomoJudge:
    def __init__(self, llm: LLM, out: Path) -> None:
        self.judge = Judge("locomo", LOCOMO, llm, JudgeCache(out / CACHE))

    def correct(self, question: str, answer: str, prediction: str) -> bool:
        reply = ask(self.judge, question, answer, prediction)
        return str(reply.get("label", "")).upper() == "CORRECT"
