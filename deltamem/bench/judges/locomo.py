"""The LoCoMo LLM judge: CORRECT / WRONG per answer."""

from __future__ import annotations

from pathlib import Path

from deltamem.bench.judges.base import CACHE, LOCOMO, Judge, JudgeCache
from deltamem.llm.base import LLM


class LocomoJudge:
    def __init__(self, llm: LLM, out: Path) -> None:
        self.judge = Judge("locomo", LOCOMO, llm, JudgeCache(out / CACHE))

    def correct(self, question: str, answer: str, prediction: str) -> bool:
        reply = self.judge.ask(question=question, answer=answer, prediction=prediction or "")
        return str(reply.get("label", "")).upper() == "CORRECT"
