"""MemBench aggregation (SPEC §4.3) from question and step records.

- accuracy: share of questions whose chosen letter is the ground truth, overall
  and by scenario (participation / observation), level (factual / reflective)
  and question type (the file's top keys);
- recall@k: share of `target_step_id` among the steps the first k retrieved
  items came from (provenance), mean over questions with targets;
- capacity: accuracy per history-length bucket (steps before the question,
  noise included), the accuracy-as-history-grows curve;
- time: write seconds per step (the add), read seconds per question (the search).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.metrics import qa
from deltamem.bench.metrics.common import mean

Record = dict[str, Any]

# history-length bucket edges (steps); a history of n steps falls in the first edge ≥ n
EDGES = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)


def bucket(steps: int) -> int | None:
    """The upper edge of the bucket holding a history of `steps` steps (None: beyond)."""
    return next((e for e in EDGES if steps <= e), None)


def bucket_label(edge: int | None) -> str:
    return f"≤{edge:,}" if edge is not None else f">{EDGES[-1]:,}"


def capacity(questions: Sequence[Record]) -> list[dict[str, Any]]:
    """Accuracy by history-length bucket, shortest histories first."""
    by: dict[int, list[Record]] = {}
    for q in questions:
        steps = q.get("history_steps")
        if isinstance(steps, int):
            edge = bucket(steps)
            by.setdefault(edge if edge is not None else EDGES[-1] + 1, []).append(q)
    out = []
    for edge, qs in sorted(by.items()):
        known = edge if edge <= EDGES[-1] else None
        out.append(
            {
                "bucket": bucket_label(known),
                "max_steps": known,
                "n": len(qs),
                "accuracy": qa.accuracy(qs),
                "history_steps": qa.mean_of(qs, "history_steps"),
                "history_tokens": qa.mean_of(qs, "history_tokens"),
            }
        )
    return out


def timing(records: Sequence[Record]) -> dict[str, float | None]:
    steps = [r for r in records if r.get("kind") == "session"]
    questions = [r for r in records if r.get("kind") == "question"]
    return {
        "write_seconds_per_step": mean(
            float((r.get("cost") or {}).get("add_seconds", 0.0) or 0.0) for r in steps
        ),
        "read_seconds_per_question": qa.mean_of(questions, "search_seconds"),
        "answer_seconds_per_question": qa.mean_of(questions, "answer_seconds"),
    }


def aggregate(records: Sequence[Record]) -> dict[str, Any]:
    questions = [r for r in records if r.get("kind") == "question"]
    extra = {"recall": "recall"}
    return {
        "accuracy": qa.accuracy(questions),
        "n": len(questions),
        "recall_at_k": qa.mean_recall(questions),
        "by_scenario": qa.grouped(questions, "scenario", extra),
        "by_level": qa.grouped(questions, "level", extra),
        "by_qa_type": qa.grouped(questions, "qa_type", extra),
        "capacity": capacity(questions),
        "timing": timing(records),
        "errors": qa.errors(records),
    }
