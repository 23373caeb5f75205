"""LongMemEval aggregation (SPEC §4.4) from question records.

Each record has `question_type`, `abstention` (question id ends in `_abs`),
`correct` (the judge's verdict was "correct"; None without a judge), `f1`
(judge-free: token F1 against the answer, or for an abstention question 1 when
the prediction says the answer is not known, else 0), and `session_recall` /
`turn_recall` (share of `answer_session_ids` / `has_answer` turns among those
the retrieved items came from; None for abstention questions).
Question types include their abstention questions, as in LongMemEval's own
evaluation; `abstention` also gives those apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.metrics import qa

Record = dict[str, Any]
EXTRA = {"f1": "f1", "session_recall": "session_recall", "turn_recall": "turn_recall"}


def summary(questions: Sequence[Record]) -> dict[str, Any]:
    return {
        "n": len(questions),
        "accuracy": qa.accuracy(questions),
        **{name: qa.mean_of(questions, src) for name, src in EXTRA.items()},
    }


def aggregate(records: Sequence[Record]) -> dict[str, Any]:
    questions = [r for r in records if r.get("kind") == "question"]
    out = summary(questions)
    out["abstention"] = summary([q for q in questions if q.get("abstention")])
    out["by_type"] = qa.grouped(questions, "question_type", EXTRA)
    out["errors"] = qa.errors(records)
    return out
