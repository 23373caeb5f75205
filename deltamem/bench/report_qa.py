"""The MemBench, LongMemEval and PersonaMem parts of report.html.

MemBench: accuracy, recall@k and timing per system; accuracy by scenario, level
and question type; recall@k; capacity (accuracy by history length). LongMemEval:
judge accuracy (when a judge ran), token F1 and session / turn recall, overall,
on abstention questions and by question type. PersonaMem: accuracy overall, by
question type and by topic. Each ends with the cost section; panels without a
number are left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.report_parts import bars, cost_section, get, panels, table

Record = dict[str, Any]


def _groups(metrics: dict[str, Any], field: str) -> list[str]:
    return list(dict.fromkeys(g for m in metrics.values() for g in (m.get(field) or {})))


def by_chart(metrics: dict[str, Any], field: str, value: str, title: str) -> str:
    """Bars of `value` per group of `metrics[system][field]`, one series per system."""
    groups = _groups(metrics, field)
    return bars(
        title,
        groups,
        {s: [get(m, field, g, value) for g in groups] for s, m in metrics.items()},
        ymax=1.0,
    )


def by_table(metrics: dict[str, Any], field: str, label: str, values: Sequence[str]) -> str:
    groups = _groups(metrics, field)
    if not groups:
        return ""
    headers = [label] + [f"{s} {v}" for s in metrics for v in values] + ["n"]
    first = next(iter(metrics))
    rows = [
        [g]
        + [get(m, field, g, v) for m in metrics.values() for v in values]
        + [get(metrics[first], field, g, "n")]
        for g in groups
    ]
    return table(headers, rows)


# --- MemBench ---------------------------------------------------------------------------
def membench_body(metrics: dict[str, Any], records: Sequence[Record]) -> str:
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
    out = ["<h2>Summary</h2>", table(headers, rows)]
    out.append(
        '<p class="note">accuracy: the chosen letter is the ground truth; recall@k: share of '
        "target_step_id among the steps the first k retrieved items came from.</p>"
    )
    out.append("<h2>Accuracy</h2>")
    out.append(
        panels(
            [
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
        )
    )
    out.append(by_table(metrics, "by_qa_type", "question type", ("accuracy", "recall")))
    buckets = list(
        dict.fromkeys(b["bucket"] for m in metrics.values() for b in m.get("capacity") or [])
    )
    if buckets:

        def cap(s: str, b: str, key: str) -> Any:
            row: dict[str, Any] = next(
                (x for x in metrics[s].get("capacity") or [] if x["bucket"] == b), {}
            )
            return row.get(key)

        out.append("<h2>Capacity</h2>")
        out.append(
            panels(
                [
                    bars(
                        "Accuracy by history length (steps before the question)",
                        buckets,
                        {s: [cap(s, b, "accuracy") for b in buckets] for s in systems},
                        ymax=1.0,
                    )
                ]
            )
        )
        out.append(
            table(
                ["history (steps)"]
                + [f"{s} {k}" for s in systems for k in ("accuracy", "n", "tokens")],
                [
                    [b]
                    + [cap(s, b, k) for s in systems for k in ("accuracy", "n", "history_tokens")]
                    for b in buckets
                ],
            )
        )
    out.append(cost_section(metrics, records))
    return "\n".join(out)


# --- LongMemEval ------------------------------------------------------------------------
LME = [
    ("accuracy", "judge accuracy"),
    ("f1", "token F1"),
    ("session_recall", "session recall"),
    ("turn_recall", "turn recall"),
]


def longmemeval_body(metrics: dict[str, Any], records: Sequence[Record]) -> str:
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
    out = ["<h2>Summary</h2>", table(headers, rows)]
    out.append(
        '<p class="note">judge accuracy needs --judge (– without one); token F1 is judge-free '
        "(abstention questions: 1 when the answer declines); recall: share of the answer "
        "sessions / has_answer turns the retrieved items came from.</p>"
    )
    out.append("<h2>By question type</h2>")
    out.append(
        panels([by_chart(metrics, "by_type", k, f"{label} by question type") for k, label in LME])
    )
    out.append(by_table(metrics, "by_type", "question type", [k for k, _ in LME]))
    out.append(cost_section(metrics, records))
    return "\n".join(out)


# --- PersonaMem -------------------------------------------------------------------------
def personamem_body(metrics: dict[str, Any], records: Sequence[Record]) -> str:
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
    out = ["<h2>Summary</h2>", table(headers, rows)]
    out.append("<h2>By question type</h2>")
    out.append(
        panels(
            [
                by_chart(metrics, "by_type", "accuracy", "Accuracy by question type"),
                by_chart(metrics, "by_topic", "accuracy", "Accuracy by topic"),
            ]
        )
    )
    out.append(by_table(metrics, "by_type", "question type", ("accuracy",)))
    out.append(cost_section(metrics, records))
    return "\n".join(out)
