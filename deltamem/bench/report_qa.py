"""The MemBench, LongMemEval and PersonaMem pages (report.html and `bench tables`).

MemBench: accuracy, recall@k and timing per system; accuracy and recall by
scenario, level and question type; capacity (accuracy by history length).
LongMemEval: judge accuracy (when a judge ran, with its κ), token F1 and session /
turn recall, overall, on abstention questions and by question type. PersonaMem:
accuracy overall, by question type and by topic. Each ends with the cost section;
panels without a number are left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.render import Block, Charts, Heading, Note, Table, get
from deltamem.bench.report_parts import bars, by_chart, by_table, cost_blocks

Record = dict[str, Any]


# --- MemBench ---------------------------------------------------------------------------
def membench_page(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    systems = list(metrics)
    ks = list(dict.fromkeys(k for m in metrics.values() for k in (m.get("recall_at_k") or {})))
    headers = ["system", "accuracy", *(f"recall@{k}" for k in ks), "n"]
    headers += ["write s / step", "read s / question", "answer s / question", "errors"]
    rows = [
        [
            s,
            m.get("accuracy"),
            *(get(m, "recall_at_k", k) for k in ks),
            m.get("n"),
            get(m, "timing", "write_seconds_per_step"),
            get(m, "timing", "read_seconds_per_question"),
            get(m, "timing", "answer_seconds_per_question"),
            m.get("errors"),
        ]
        for s, m in metrics.items()
    ]

    def draw() -> list[str]:
        return [
            by_chart(metrics, "by_scenario", "accuracy", "Accuracy by scenario"),
            by_chart(metrics, "by_level", "accuracy", "Accuracy by memory level"),
            by_chart(metrics, "by_qa_type", "accuracy", "Accuracy by question type"),
            bars(
                "Recall@k of the target steps",
                [f"@{k}" for k in ks],
                {s: [get(metrics[s], "recall_at_k", k) for k in ks] for s in systems},
                ymax=1.0,
            ),
        ]

    values = [("accuracy", "accuracy"), ("recall", "recall")]
    out: list[Block] = [
        Heading("Summary"),
        Table(headers, rows),
        Note(
            "accuracy: the chosen letter is the ground truth (no judge); recall@k: share of "
            "target_step_id among the steps the first k retrieved items came from."
        ),
        Heading("Accuracy"),
        Charts(draw),
        *by_table(metrics, "by_scenario", "scenario", values),
        *by_table(metrics, "by_level", "level", values),
        *by_table(metrics, "by_qa_type", "question type", values),
    ]
    buckets = list(
        dict.fromkeys(b["bucket"] for m in metrics.values() for b in m.get("capacity") or [])
    )
    if buckets:

        def cap(s: str, b: str, key: str) -> Any:
            row: dict[str, Any] = next(
                (x for x in metrics[s].get("capacity") or [] if x["bucket"] == b), {}
            )
            return row.get(key)

        def draw_capacity() -> list[str]:
            return [
                bars(
                    "Accuracy by history length (steps before the question)",
                    buckets,
                    {s: [cap(s, b, "accuracy") for b in buckets] for s in systems},
                    ymax=1.0,
                )
            ]

        keys = ("accuracy", "n", "history_tokens")
        out += [
            Heading("Capacity"),
            Charts(draw_capacity),
            Table(
                ["history (steps)"] + [f"{s} {k}" for s in systems for k in keys],
                [[b] + [cap(s, b, k) for s in systems for k in keys] for b in buckets],
                title="Capacity: accuracy by history length (steps)",
            ),
        ]
    return out + cost_blocks(metrics, records)


# --- LongMemEval ------------------------------------------------------------------------
LME = [
    ("accuracy", "judge accuracy"),
    ("f1", "token F1"),
    ("session_recall", "session recall"),
    ("turn_recall", "turn recall"),
]
# the judge set's QA judge gives LongMemEval's verdicts
LME_JUDGED = {"accuracy": ("qa",)}


def longmemeval_page(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    headers = ["system", *(label for _, label in LME)]
    headers += ["abstention accuracy", "abstention F1", "n", "errors"]
    rows = [
        [
            s,
            *(m.get(k) for k, _ in LME),
            get(m, "abstention", "accuracy"),
            get(m, "abstention", "f1"),
            m.get("n"),
            m.get("errors"),
        ]
        for s, m in metrics.items()
    ]

    def draw() -> list[str]:
        return [by_chart(metrics, "by_type", k, f"{label} by question type") for k, label in LME]

    judged = {"judge accuracy": ("qa",), "abstention accuracy": ("qa",)}
    return [
        Heading("Summary"),
        Table(headers, rows, judged=judged),
        Note(
            "judge accuracy needs --judge (– without one); token F1 is judge-free "
            "(abstention questions: 1 when the answer declines); recall: share of the answer "
            "sessions / has_answer turns the retrieved items came from."
        ),
        Heading("By question type"),
        Charts(draw),
        *by_table(metrics, "by_type", "question type", LME, LME_JUDGED),
        *cost_blocks(metrics, records),
    ]


# --- PersonaMem -------------------------------------------------------------------------
def personamem_page(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    rows = [
        [
            s,
            m.get("accuracy"),
            m.get("n"),
            get(m, "timing", "read_seconds_per_question"),
            get(m, "timing", "answer_seconds_per_question"),
            m.get("errors"),
        ]
        for s, m in metrics.items()
    ]
    headers = ["system", "accuracy", "n", "read s / question", "answer s / question", "errors"]

    def draw() -> list[str]:
        return [
            by_chart(metrics, "by_type", "accuracy", "Accuracy by question type"),
            by_chart(metrics, "by_topic", "accuracy", "Accuracy by topic"),
        ]

    accuracy = [("accuracy", "accuracy")]
    return [
        Heading("Summary"),
        Table(headers, rows),
        Note("accuracy: the chosen letter is the correct one (no judge)."),
        Heading("By question type"),
        Charts(draw),
        *by_table(metrics, "by_type", "question type", accuracy),
        *by_table(metrics, "by_topic", "topic", accuracy),
        *cost_blocks(metrics, records),
    ]
