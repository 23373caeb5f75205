"""The HaluMem part of report.html: a summary table; bars per system for
extraction, updating and QA; QA by question type; figures by session index
(cumulative QA accuracy when a judge ran; judge-free: state F1, QA evidence
coverage and cumulative evidence recall per session); cost. A panel with no
number in it (a judge-free run has no verdicts) is left out, with a note."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from deltamem.bench.metrics.common import mean
from deltamem.bench.report_parts import bars, cost_section, esc, get, lines, panels, table

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


def _summary(metrics: dict[str, Any]) -> list[str]:
    systems = list(metrics)
    headers = ["system"] + [label for _, label in EXTRACTION]
    headers += [f"update {c}" for _, c in CHO] + [f"QA {c}" for _, c in CHO]
    headers += [
        "update hit@10",
        "QA evidence recall@20",
        "QA evidence coverage@20",
        "QA answer F1",
        "errors",
    ]
    rows = []
    for s in systems:
        m = metrics[s]
        row: list[Any] = [s] + [get(m, "extraction", k) for k, _ in EXTRACTION]
        row += [get(m, "update", k) for k, _ in CHO] + [get(m, "qa", k) for k, _ in CHO]
        row += [
            get(m, "retrieval", "update_hit_at_10"),
            get(m, "retrieval", "qa_evidence_recall_at_20"),
            get(m, "retrieval", "qa_evidence_coverage_at_20"),
            get(m, "retrieval", "qa_answer_f1"),
            get(m, "retrieval", "errors"),
        ]
        rows.append(row)
    n_update = ", ".join(f"{s} {get(metrics[s], 'update', 'n')}" for s in systems)
    n_qa = ", ".join(f"{s} {get(metrics[s], 'qa', 'n')}" for s in systems)
    return [
        "<h2>Summary</h2>",
        table(headers, rows),
        '<p class="note">Shares in [0, 1]; – means not measured (e.g. no judge ran). '
        f"Judged items: update n = {esc(n_update)}; QA n = {esc(n_qa)}.</p>",
    ]


def _tasks(metrics: dict[str, Any]) -> list[str]:
    systems = list(metrics)
    figures = panels(
        [
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
    )
    return ["<h2>Tasks</h2>", figures or '<p class="note">No task figures.</p>']


def _by_type(metrics: dict[str, Any]) -> list[str]:
    systems = list(metrics)
    types = sorted({t for s in systems for t in (get(metrics[s], "qa", "by_type") or {})})
    out = ["<h2>QA by question type</h2>"]
    if not types:
        return [*out, '<p class="note">No questions.</p>']
    figures = panels(
        [
            bars(
                f"QA {label} share by question type",
                types,
                {s: [get(metrics[s], "qa", "by_type", t, key) for t in types] for s in systems},
                ymax=1.0,
            )
            for key, label in CHO
        ]
    )
    if not figures:
        n = {t: get(metrics[systems[0]], "qa", "by_type", t, "n") for t in types}
        return [
            *out,
            '<p class="note">No QA verdicts (no judge ran): questions by type: '
            + esc(", ".join(f"{t} {n[t] or 0}" for t in types))
            + ".</p>",
        ]
    out.append(figures)
    out.append(
        table(
            ["question type"] + [f"{s} {c}" for s in systems for _, c in CHO] + ["n"],
            [
                [t]
                + [get(metrics[s], "qa", "by_type", t, k) for s in systems for k, _ in CHO]
                + [get(metrics[systems[0]], "qa", "by_type", t, "n")]
                for t in types
            ],
        )
    )
    return out


def _over_sessions(metrics: dict[str, Any], records: Sequence[Record]) -> list[str]:
    systems = list(metrics)
    cumulative = {
        s: [
            (float(p["session"]), float(p["accuracy"]))
            for p in metrics[s].get("qa_by_session") or []
        ]
        for s in systems
    }
    figures = panels(
        [
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
    )
    out = ["<h2>Over sessions</h2>"]
    if not any(cumulative.values()):
        out.append('<p class="note">No judged questions: no cumulative QA accuracy.</p>')
    return [*out, figures]


def _by_memory_type(metrics: dict[str, Any]) -> list[str]:
    systems = list(metrics)
    mtypes = sorted(
        {t for s in systems for t in (get(metrics[s], "extraction", "by_memory_type") or {})}
    )
    if not mtypes:
        return []
    rows = [
        [t]
        + [
            get(metrics[s], "extraction", "by_memory_type", t, k)
            for s in systems
            for k in ("recall", "weighted_recall", "fmr")
        ]
        for t in mtypes
    ]
    if all(v is None for row in rows for v in row[1:]):
        return []
    headers = ["memory type"] + [
        f"{s} {k}" for s in systems for k in ("recall", "weighted recall", "FMR")
    ]
    return ["<h2>Extraction by memory type</h2>", table(headers, rows)]


def halumem_body(metrics: dict[str, Any], records: Sequence[Record]) -> str:
    out = _summary(metrics) + _tasks(metrics) + _by_type(metrics)
    out += _over_sessions(metrics, records) + _by_memory_type(metrics)
    out.append(cost_section(metrics, records))
    return "\n".join(out)
