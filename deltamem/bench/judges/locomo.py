"""The LoCoMo LLM judge: CORRECT / WRONG per answer."""

from __future__ import annotations

from pathlib import Path

from deltamem.bench.judges.base import CACHE, JudgeCache
from deltamem.bench.judges.sets import make_judges
from deltamem.llm.base import LLM


class LocomoJudge:
    def __init__(self, llm: LLM, out: Path, mode: str = "auto") -> None:
        self.judges = make_judges(llm, JudgeCache(out / CACHE), mode)

    def correct(self, question: str, answer: str, prediction: str) -> bool:
        reply = self.judges.locomo(question, answer, prediction)
        return str(reply.get("label", "")).upper() == "CORRECT"
