"""The HaluMem page (report.html and `bench tables`): a summary table per task
(extraction, updating, QA, the judge-free checks); bars per system for
extraction, updating and QA; QA by question type; figures by session index
(cumulative QA accuracy when a judge ran; judge-free: state F1, QA evidence
coverage and cumulative evidence recall per session); cost. A panel with no
number in it (a judge-free run has no verdicts) is left out, with a note. Every
judged column carries its judge's κ (`JUDGED`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.metrics.common import mean
from deltamem.bench.render import Block, Charts, Heading, Note, Table, get
from deltamem.bench.report_parts import bars, cost_blocks, lines

EXTRACTION = [
    ("recall", "recall"),
    ("weighted_recall", "weighted recall"),
    ("target_precision", "target precision"),
    ("accuracy", "accuracy"),
    ("fmr", "FMR"),
    ("f1", "F1"),
    ("state_f1", "state F1"),
]
CHO = [("correct", "C"), ("hallucination", "H"), ("omission", "O")]
# the judges behind each extraction figure (metrics/halumem.py): recall and FMR are
# the integrity judge's, accuracy the accuracy judge's, target precision also its
# `included` flag, F1 all three
JUDGED: dict[str, tuple[str, ...]] = {
    "recall": ("integrity",),
    "weighted recall": ("integrity",),
    "FMR": ("integrity",),
    "accuracy": ("accuracy",),
    "target precision": ("accuracy", "included"),
    "F1": ("integrity", "accuracy", "included"),
}
Record = dict[str, Any]


def per_session(
    records: Sequence[Record], system: str, kind: str, value: Any
) -> list[tuple[float, float]]:
    """(session index, mean of value(record)) over the system's records of `kind`
    that have a number for it."""
    by: dict[int, list[float]] = {}
    for r in records:
        if r.get("kind") != kind or r.get("system") != system:
            continue
        v = value(r)
        if isinstance(r.get("session"), int) and v is not None:
            by.setdefault(r["session"], []).append(float(v))
    return [(float(s), mean(vs) or 0.0) for s, vs in sorted(by.items())]


def state_f1_by_session(records: Sequence[Record], system: str) -> list[tuple[float, float]]:
    """Mean state F1 (r_trans) of the evaluated sessions at each session index."""
    return per_session(
        records,
        system,
        "session",
        lambda r: None if r.get("filler") else (r.get("state") or {}).get("r_trans"),
    )


def coverage_by_session(records: Sequence[Record], system: str) -> list[tuple[float, float]]:
    """Mean QA evidence coverage of the questions asked at each session index."""
    return per_session(records, system, "question", lambda r: r.get("evidence_coverage"))


def cumulative_evidence_recall(records: Sequence[Record], system: str) -> list[tuple[float, float]]:
    """Judge-free stand-in for cumulative QA accuracy: mean evidence recall of all
    questions asked up to each session index."""
    qs = [
        r
        for r in records
        if r.get("kind") == "question"
        and r.get("system") == system
        and isinstance(r.get("session"), int)
        and r.get("evidence_recall") is not None
    ]
    out, total, n = [], 0.0, 0
    for s in sorted({int(q["session"]) for q in qs}):
        here = [float(q["evidence_recall"]) for q in qs if int(q["session"]) == s]
        total += sum(here)
        n += len(here)
        out.append((float(s), total / n))
    return out


def _summary(metrics: dict[str, Any]) -> list[Block]:
    systems = list(metrics)
    cho = ["correct", "hallucination", "omission"]
    checks = [
        ("update_hit_at_10", "update hit@10"),
        ("qa_evidence_recall_at_20", "QA evidence recall@20"),
        ("qa_evidence_coverage_at_20", "QA evidence coverage@20"),
        ("qa_answer_f1", "QA answer F1"),
        ("errors", "errors"),
    ]
    return [
        Heading("Summary"),
        Table(
            ["system", *(label for _, label in EXTRACTION)],
            [[s, *(get(metrics[s], "extraction", k) for k, _ in EXTRACTION)] for s in systems],
            title="Memory extraction",
            judged=JUDGED,
        ),
        Table(
            ["system", *cho, "n"],
            [[s, *(get(metrics[s], "update", k) for k in [*cho, "n"])] for s in systems],
            title="Memory updating",
            judged={k: ("update",) for k in cho},
        ),
        Table(
            ["system", *cho, "n"],
            [[s, *(get(metrics[s], "qa", k) for k in [*cho, "n"])] for s in systems],
            title="Question answering",
            judged={k: ("qa",) for k in cho},
        ),
        Table(
            ["system", *(label for _, label in checks)],
            [[s, *(get(metrics[s], "retrieval", k) for k, _ in checks)] for s in systems],
            title="Judge-free retrieval and answer checks",
        ),
        Note(
            "Shares in [0, 1]; – means not measured (e.g. no judge ran); n: items judged. "
            "state F1 and the retrieval checks are judge-free."
        ),
    ]


def _tasks(metrics: dict[str, Any]) -> list[Block]:
    systems = list(metrics)

    def draw() -> list[str]:
        return [
            bars(
                "Memory extraction",
                [label for _, label in EXTRACTION],
                {s: [get(metrics[s], "extraction", k) for k, _ in EXTRACTION] for s in systems},
                ymax=1.0,
            ),
            bars(
                "Memory updating",
                ["correct", "hallucination", "omission"],
                {s: [get(metrics[s], "update", k) for k, _ in CHO] for s in systems},
                ymax=1.0,
            ),
            bars(
                "Question answering",
                ["correct", "hallucination", "omission"],
                {s: [get(metrics[s], "qa", k) for k, _ in CHO] for s in systems},
                ymax=1.0,
            ),
        ]

    return [Heading("Tasks"), Charts(draw, empty="No task figures.")]


def _by_type(metrics: dict[str, Any]) -> list[Block]:
    systems = list(metrics)
    types = sorted({t for s in systems for t in (get(metrics[s], "qa", "by_type") or {})})
    out: list[Block] = [Heading("QA by question type")]
    if not types:
        return [*out, Note("No questions.")]
    values = [
        get(metrics[s], "qa", "by_type", t, k) for s in systems for t in types for k, _ in CHO
    ]
    if all(v is None for v in values):
        n = {t: get(metrics[systems[0]], "qa", "by_type", t, "n") for t in types}
        return [
            *out,
            Note(
                "No QA verdicts (no judge ran): questions by type: "
                + ", ".join(f"{t} {n[t] or 0}" for t in types)
                + "."
            ),
        ]

    def draw() -> list[str]:
        return [
            bars(
                f"QA {label} share by question type",
                types,
                {s: [get(metrics[s], "qa", "by_type", t, key) for t in types] for s in systems},
                ymax=1.0,
            )
            for key, label in CHO
        ]

    headers = ["question type"] + [f"{s} {c}" for s in systems for _, c in CHO] + ["n"]
    rows = [
        [t]
        + [get(metrics[s], "qa", "by_type", t, k) for s in systems for k, _ in CHO]
        + [get(metrics[systems[0]], "qa", "by_type", t, "n")]
        for t in types
    ]
    judged = {h: ("qa",) for h in headers[1:-1]}
    return [
        *out,
        Charts(draw),
        Table(
            headers,
            rows,
            title="QA correct (C), hallucination (H), omission (O) by question type",
            judged=judged,
        ),
    ]


def _over_sessions(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    systems = list(metrics)
    cumulative = {
        s: [
            (float(p["session"]), float(p["accuracy"]))
            for p in metrics[s].get("qa_by_session") or []
        ]
        for s in systems
    }

    def draw() -> list[str]:
        return [
            lines(
                "Cumulative QA accuracy by session index",
                cumulative,
                xlabel="session index",
                ymax=1.0,
            ),
            lines(
                "State F1 by session index (judge-free)",
                {s: state_f1_by_session(records, s) for s in systems},
                xlabel="session index",
                ymax=1.0,
            ),
            lines(
                "QA evidence coverage by session index (judge-free)",
                {s: coverage_by_session(records, s) for s in systems},
                xlabel="session index",
                ymax=1.0,
            ),
            lines(
                "Cumulative QA evidence recall by session index (judge-free)",
                {s: cumulative_evidence_recall(records, s) for s in systems},
                xlabel="session index",
                ymax=1.0,
            ),
        ]

    out: list[Block] = [Heading("Over sessions")]
    if not any(cumulative.values()):
        out.append(Note("No judged questions: no cumulative QA accuracy."))
    return [*out, Charts(draw)]


def _by_memory_type(metrics: dict[str, Any]) -> list[Block]:
    systems = list(metrics)
    mtypes = sorted(
        {t for s in systems for t in (get(metrics[s], "extraction", "by_memory_type") or {})}
    )
    if not mtypes:
        return []
    keys = [("recall", "recall"), ("weighted_recall", "weighted recall"), ("fmr", "FMR")]
    rows = [
        [t]
        + [get(metrics[s], "extraction", "by_memory_type", t, k) for s in systems for k, _ in keys]
        for t in mtypes
    ]
    if all(v is None for row in rows for v in row[1:]):
        return []
    headers = ["memory type"] + [f"{s} {label}" for s in systems for _, label in keys]
    judged = {h: ("integrity",) for h in headers[1:]}
    return [
        Heading("Extraction by memory type"),
        Table(headers, rows, title="Extraction by memory type", judged=judged),
    ]


def halumem_page(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    out = _summary(metrics) + _tasks(metrics) + _by_type(metrics)
    out += _over_sessions(metrics, records) + _by_memory_type(metrics)
    return out + cost_blocks(metrics, records)
