"""The five judges as one set, in two modes behind one interface.

`rubric`: the official single-prompt rubrics (`prompts/<judge>.*.txt`), for strong
judges. `decomposed` (`decomposed.py`): code settles what it can and the model
answers small closed questions; the default for the embedded model. Every
method returns the fields a run stores: integrity/accuracy `score` (and
`included`), update/qa `verdict`, locomo `label`, each with a `reason`.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from deltamem.bench.judges.base import (
    ACCURACY,
    INTEGRITY,
    LOCOMO,
    QA,
    UPDATE,
    Judge,
    JudgeCache,
    lines,
)
from deltamem.llm.base import LLM

Mode = Literal["auto", "rubric", "decomposed"]
MODES: tuple[str, ...] = ("auto", "rubric", "decomposed")


class JudgeSet(Protocol):
    mode: str

    def integrity(self, memories: list[str], fact: str) -> dict[str, Any]: ...

    def accuracy(self, dialogue: list[str], gold: list[str], memory: str) -> dict[str, Any]: ...

    def update(self, old: list[str], new: str, memories: list[str]) -> dict[str, Any]: ...

    def qa(
        self, question: str, answer: str, evidence: list[str], prediction: str
    ) -> dict[str, Any]: ...

    def locomo(self, question: str, answer: str, prediction: str) -> dict[str, Any]: ...


class RubricJudges:
    """One prompt per judgement, the model reads the whole rubric."""

    mode = "rubric"

    def __init__(self, llm: LLM, cache: JudgeCache) -> None:
        self._integrity = Judge("integrity", INTEGRITY, llm, cache)
        self._accuracy = Judge("accuracy", ACCURACY, llm, cache)
        self._update = Judge("update", UPDATE, llm, cache)
        self._qa = Judge("qa", QA, llm, cache)
        self._locomo = Judge("locomo", LOCOMO, llm, cache)

    def integrity(self, memories: list[str], fact: str) -> dict[str, Any]:
        if not memories:  # nothing stored: nothing can cover the fact, no call needed
            return {"score": 0, "reason": "no memories extracted"}
        return self._integrity.ask(memories=lines(memories), fact=fact)

    def accuracy(self, dialogue: list[str], gold: list[str], memory: str) -> dict[str, Any]:
        return self._accuracy.ask(dialogue="\n".join(dialogue), gold=lines(gold), memory=memory)

    def update(self, old: list[str], new: str, memories: list[str]) -> dict[str, Any]:
        return self._update.ask(old=lines(old), new=new, memories=lines(memories))

    def qa(
        self, question: str, answer: str, evidence: list[str], prediction: str
    ) -> dict[str, Any]:
        return self._qa.ask(
            question=question,
            answer=answer,
            evidence=lines(evidence),
            prediction=prediction or "(no answer)",
        )

    def locomo(self, question: str, answer: str, prediction: str) -> dict[str, Any]:
        reply = self._locomo.ask(question=question, answer=answer, prediction=prediction or "")
        return reply | {"label": str(reply.get("label", "")).upper()}


def is_embedded(llm: LLM) -> bool:
    """The embedded llama.cpp model (and test doubles), not a hosted one."""
    from deltamem.llm.openai_compat import OpenAICompatLLM

    return not isinstance(llm, OpenAICompatLLM)


def make_judges(llm: LLM, cache: JudgeCache, mode: str = "auto") -> JudgeSet:
    """`auto`: decomposed checks for the embedded model, rubrics for a hosted one."""
    from deltamem.bench.judges.decomposed import DecomposedJudges

    if mode not in MODES:
        raise ValueError(f"unknown judge mode {mode!r}; choose from {', '.join(MODES)}")
    if mode == "rubric" or (mode == "auto" and not is_embedded(llm)):
        return RubricJudges(llm, cache)
    return DecomposedJudges(llm, cache)
