"""A run's metrics as Markdown tables, for docs/journal/benchmarks.md (`deltamem bench
tables OUT`): the same numbers as metrics.json, systems side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltamem.bench.log import USAGE


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.{digits}f}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _metric_rows(
    metrics: dict[str, Any], section: str | None, keys: Sequence[str]
) -> list[list[Any]]:
    path = (section,) if section else ()
    return [[s, *(_get(m, *path, k) for k in keys)] for s, m in metrics.items()]


COST_KEYS = (
    "llm_calls_per_session",
    "prompt_tokens_per_session",
    "session_tokens_per_session",
    "write_amplification",
    "qpm",
    "add_seconds",
    "search_seconds",
)


def halumem_tables(metrics: dict[str, Any]) -> str:
    ext = ("recall", "weighted_recall", "target_precision", "accuracy", "fmr", "f1", "state_f1")
    parts = [
        "Memory extraction",
        table(["system", *ext], _metric_rows(metrics, "extraction", ext)),
        "Memory updating",
        table(
            ["system", "correct", "hallucination", "omission"],
            _metric_rows(metrics, "update", ("correct", "hallucination", "omission")),
        ),
        "Question answering",
        table(
            ["system", "correct", "hallucination", "omission"],
            _metric_rows(metrics, "qa", ("correct", "hallucination", "omission")),
        ),
        "Judge-free retrieval and answer checks",
        table(
            [
                "system",
                "update hit@10",
                "QA evidence recall@20",
                "QA evidence coverage@20",
                "QA answer F1",
                "errors",
            ],
            _metric_rows(
                metrics,
                "retrieval",
                (
                    "update_hit_at_10",
                    "qa_evidence_recall_at_20",
                    "qa_evidence_coverage_at_20",
                    "qa_answer_f1",
                    "errors",
                ),
            ),
        ),
        "Cost (per session; seconds are totals)",
        table(["system", *COST_KEYS], _metric_rows(metrics, "cost", COST_KEYS)),
    ]
    types = sorted({t for m in metrics.values() for t in (_get(m, "qa", "by_type") or {})})
    if types:
        rows = []
        for s, m in metrics.items():
            by = _get(m, "qa", "by_type") or {}
            rows.append([s, *(_get(by, t, "correct") for t in types)])
        parts += ["QA correct by question type", table(["system", *types], rows)]
    return "\n\n".join(parts)


def locomo_tables(metrics: dict[str, Any]) -> str:
    keys = ("f1", "bleu1", "judge", "evidence_recall")
    parts = [
        "Overall (categories 1–4)",
        table(["system", *keys], _metric_rows(metrics, None, keys)),
    ]
    cats = sorted({c for m in metrics.values() for c in (m.get("by_category") or {})})
    for key in ("f1", "judge", "evidence_recall"):
        rows = [[s, *(_get(m, "by_category", c, key) for c in cats)] for s, m in metrics.items()]
        parts += [f"{key} by category", table(["system", *cats], rows)]
    parts += [
        "Cost (per session; seconds are totals)",
        table(["system", *COST_KEYS], _metric_rows(metrics, "cost", COST_KEYS)),
    ]
    return "\n\n".join(parts)


def _cost(metrics: dict[str, Any]) -> list[str]:
    return [
        "Cost (per session; seconds are totals)",
        table(["system", *COST_KEYS], _metric_rows(metrics, "cost", COST_KEYS)),
    ]


def by_tables(metrics: dict[str, Any], field: str, label: str, keys: Sequence[str]) -> list[str]:
    """One table per key: systems as rows, the groups of `field` as columns."""
    groups = list(dict.fromkeys(g for m in metrics.values() for g in (m.get(field) or {})))
    if not groups:
        return []
    out = []
    for key in keys:
        rows = [[s, *(_get(m, field, g, key) for g in groups)] for s, m in metrics.items()]
        out += [f"{key} by {label}", table(["system", *groups], rows)]
    first = next(iter(metrics.values()))
    out += [
        f"questions by {label}",
        table(["", *groups], [["n", *(_get(first, field, g, "n") for g in groups)]]),
    ]
    return out


def membench_tables(metrics: dict[str, Any]) -> str:
    ks = list(dict.fromkeys(k for m in metrics.values() for k in (m.get("recall_at_k") or {})))
    rows = [
        [
            s,
            m.get("accuracy"),
            *(_get(m, "recall_at_k", k) for k in ks),
            m.get("n"),
            m.get("errors"),
        ]
        for s, m in metrics.items()
    ]
    timing = ("write_seconds_per_step", "read_seconds_per_question", "answer_seconds_per_question")
    parts = [
        "Overall",
        table(["system", "accuracy", *(f"recall@{k}" for k in ks), "n", "errors"], rows),
        "Time (seconds)",
        table(["system", *timing], _metric_rows(metrics, "timing", timing)),
    ]
    parts += by_tables(metrics, "by_scenario", "scenario", ("accuracy", "recall"))
    parts += by_tables(metrics, "by_level", "level", ("accuracy", "recall"))
    parts += by_tables(metrics, "by_qa_type", "question type", ("accuracy", "recall"))
    buckets = list(
        dict.fromkeys(b["bucket"] for m in metrics.values() for b in m.get("capacity") or [])
    )
    if buckets:
        cap = [
            [
                s,
                *(
                    next((b["accuracy"] for b in m.get("capacity") or [] if b["bucket"] == x), None)
                    for x in buckets
                ),
            ]
            for s, m in metrics.items()
        ]
        parts += ["Capacity: accuracy by history length (steps)", table(["system", *buckets], cap)]
    return "\n\n".join(parts + _cost(metrics))


def longmemeval_tables(metrics: dict[str, Any]) -> str:
    keys = ("accuracy", "f1", "session_recall", "turn_recall")
    rows = [
        [
            s,
            *(m.get(k) for k in keys),
            _get(m, "abstention", "accuracy"),
            _get(m, "abstention", "f1"),
            m.get("n"),
            m.get("errors"),
        ]
        for s, m in metrics.items()
    ]
    headers = ["system", *keys, "abstention accuracy", "abstention f1", "n", "errors"]
    parts = ["Overall (accuracy: LLM judge)", table(headers, rows)]
    parts += by_tables(metrics, "by_type", "question type", keys)
    return "\n\n".join(parts + _cost(metrics))


def personamem_tables(metrics: dict[str, Any]) -> str:
    parts = [
        "Overall",
        table(
            ["system", "accuracy", "n", "errors"],
            _metric_rows(metrics, None, ("accuracy", "n", "errors")),
        ),
    ]
    parts += by_tables(metrics, "by_type", "question type", ("accuracy",))
    parts += by_tables(metrics, "by_topic", "topic", ("accuracy",))
    return "\n\n".join(parts + _cost(metrics))


TABLES = {
    "membench": membench_tables,
    "longmemeval": longmemeval_tables,
    "personamem": personamem_tables,
}


def usage_table(usage: dict[str, dict[str, float]]) -> str:
    rows = [
        [
            purpose,
            int(u["calls"]),
            int(u["prompt_tokens"]),
            int(u["cached_tokens"]),
            u["cached_share"],
            int(u["completion_tokens"]),
            u["seconds_per_call"],
        ]
        for purpose, u in sorted(usage.items())
    ]
    return table(
        ["purpose", "calls", "prompt tok", "from KV cache", "cached share", "generated", "s/call"],
        rows,
    )


def run_tables(out: Path) -> str:
    """All tables of the run in OUT (metrics.json, and llm_usage.json if present)."""
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    first: Any = next(iter(metrics.values()), {})
    if first.get("benchmark") in TABLES:
        body = TABLES[first["benchmark"]](metrics)
    else:
        body = halumem_tables(metrics) if "extraction" in first else locomo_tables(metrics)
    usage_path = out / USAGE
    if usage_path.exists():
        usage = json.loads(usage_path.read_text(encoding="utf-8"))
        body += "\n\nLLM calls by purpose (the whole run)\n\n" + usage_table(usage)
    return body + "\n"
