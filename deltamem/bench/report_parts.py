"""The pieces every benchmark's page is made of (blocks of `render.py`): charts
(matplotlib, drawn in `charts.py` and imported only when a chart is drawn), tables
of a metric by group, the cost section, and the page of a benchmark that writes
none of its own (`generic_page`). `report.py` puts a run's page together;
`report_halumem.py` and `report_qa.py` describe the pages of the benchmarks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from deltamem.bench.render import Block, Charts, Heading, Note, Table, get, panels

Num = float | int | None
Record = dict[str, Any]
__all__ = ["bar_chart", "bars", "get", "line_chart", "lines", "panels"]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return None if math.isnan(float(v)) else float(v)


# --- charts (matplotlib, in charts.py: imported when a chart is drawn) ----------------
def bar_chart(
    title: str, groups: Sequence[str], series: dict[str, Sequence[Num]], **kw: Any
) -> str:
    """Grouped bars as an inline SVG figure (`charts.bar_chart`)."""
    from deltamem.bench import charts

    return charts.bar_chart(title, groups, series, **kw)


def line_chart(title: str, series: Mapping[str, Sequence[tuple[float, float]]], **kw: Any) -> str:
    """Lines of (x, y) points as an inline SVG figure (`charts.line_chart`)."""
    from deltamem.bench import charts

    return charts.line_chart(title, series, **kw)


def bars(title: str, groups: Sequence[str], series: dict[str, Sequence[Num]], **kw: Any) -> str:
    """`bar_chart` over the groups some series has a value for; "" when none has any
    (a panel of dashes says nothing: it is left out)."""
    keep = [i for i in range(len(groups)) if any(_num(vs[i]) is not None for vs in series.values())]
    if not keep:
        return ""
    return bar_chart(
        title,
        [groups[i] for i in keep],
        {s: [vs[i] for i in keep] for s, vs in series.items()},
        **kw,
    )


def lines(title: str, series: Mapping[str, Sequence[tuple[float, float]]], **kw: Any) -> str:
    """`line_chart`, or "" when no series has a point."""
    return line_chart(title, series, **kw) if any(series.values()) else ""


# --- per-session series from the log ---------------------------------------------------
def session_costs(records: Sequence[dict[str, Any]], system: str) -> list[dict[str, float]]:
    """Mean add time and tokens per session index, from the session records."""
    by: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        kept = r.get("kind") == "session" and r.get("system") == system
        if kept and isinstance(r.get("session"), int):
            by.setdefault(r["session"], []).append(r.get("cost") or {})
    out = []
    for s, cs in sorted(by.items()):
        n = len(cs)
        out.append(
            {
                "session": s,
                "add_seconds": sum(float(c.get("add_seconds", 0) or 0) for c in cs) / n,
                "prompt_tokens": sum(float(c.get("prompt_tokens", 0) or 0) for c in cs) / n,
                "completion_tokens": sum(float(c.get("completion_tokens", 0) or 0) for c in cs) / n,
                "session_tokens": sum(float(c.get("session_tokens", 0) or 0) for c in cs) / n,
            }
        )
    return out


COST = [
    ("sessions", "sessions"),
    ("llm_calls_per_session", "LLM calls / session"),
    ("prompt_tokens_per_session", "prompt tokens / session"),
    ("completion_tokens_per_session", "completion tokens / session"),
    ("session_tokens_per_session", "dialogue tokens / session"),
    ("write_amplification", "write amplification"),
    ("write_amplification_uncached", "write ampl. (uncached)"),
    ("qpm", "qpm"),
    ("add_seconds_per_session", "add s / session"),
    ("seconds_per_search", "s / search"),
]


def cost_blocks(metrics: dict[str, Any], records: Sequence[Record]) -> list[Block]:
    """Time and tokens per session: a table, what its ratios mean, and per-session
    lines (report.html)."""
    systems = list(metrics)

    def draw() -> list[str]:
        per = {s: session_costs(records, s) for s in systems}
        return [
            lines(
                "Time to add a session (s), by session index",
                {s: [(p["session"], p["add_seconds"]) for p in per[s]] for s in systems},
                xlabel="session index",
            ),
            lines(
                "Prompt tokens per session, by session index",
                {s: [(p["session"], p["prompt_tokens"]) for p in per[s]] for s in systems},
                xlabel="session index",
            ),
            bars(
                "Tokens per session (mean)",
                ["prompt", "completion", "dialogue"],
                {
                    s: [
                        get(metrics[s], "cost", "prompt_tokens_per_session"),
                        get(metrics[s], "cost", "completion_tokens_per_session"),
                        get(metrics[s], "cost", "session_tokens_per_session"),
                    ]
                    for s in systems
                },
            ),
        ]

    return [
        Heading("Cost"),
        Table(
            ["system", *(label for _, label in COST)],
            [[s, *(get(metrics[s], "cost", k) for k, _ in COST)] for s in systems],
            title="Cost per session",
        ),
        Note(
            "write amplification = prompt tokens the LLM read while adding ÷ tokens of the "
            "sessions; qpm = write-path search queries ÷ memories stored (adds + updates)."
        ),
        Charts(draw),
    ]


# --- a metric by group (question type, category, ...) -------------------------------------
def groups(metrics: dict[str, Any], field: str) -> list[str]:
    """The groups of `metrics[system][field]`, in first-seen order over the systems."""
    return list(dict.fromkeys(g for m in metrics.values() for g in (m.get(field) or {})))


def by_chart(metrics: dict[str, Any], field: str, value: str, title: str) -> str:
    """Bars of `value` per group of `metrics[system][field]`, one series per system."""
    gs = groups(metrics, field)
    return bars(
        title,
        gs,
        {s: [get(m, field, g, value) for g in gs] for s, m in metrics.items()},
        ymax=1.0,
    )


def by_table(
    metrics: dict[str, Any],
    field: str,
    label: str,
    values: Sequence[tuple[str, str]],
    judged: Mapping[str, tuple[str, ...]] | None = None,
) -> list[Block]:
    """One table: the groups of `field` as rows, each system's `values` as columns
    (`(key, label)` pairs; `judged`: key -> judges), and n. [] without groups."""
    gs = groups(metrics, field)
    if not gs:
        return []
    judged = judged or {}
    headers = [label] + [f"{s} {name}" for s in metrics for _, name in values] + ["n"]
    first = next(iter(metrics))
    rows = [
        [g]
        + [get(m, field, g, k) for m in metrics.values() for k, _ in values]
        + [get(metrics[first], field, g, "n")]
        for g in gs
    ]
    marks = {f"{s} {name}": judged[k] for s in metrics for k, name in values if k in judged}
    names = [name for _, name in values]
    title = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else names[0]
    return [Table(headers, rows, title=f"{title} by {label}", judged=marks)]


# --- a benchmark without a page of its own ------------------------------------------------
def _numbers(m: dict[str, Any]) -> list[str]:
    return [k for k, v in m.items() if _num(v) is not None]


def generic_page(
    metrics: dict[str, Any],
    records: Sequence[Record],
    judged: Mapping[str, tuple[str, ...]] | None = None,
) -> list[Block]:
    """Every top-level number of the systems' metrics in one table, each `by_*`
    grouping as a table of its numbers, then the cost section: what a new benchmark
    shows until it describes a page of its own."""
    systems = list(metrics)
    keys = list(dict.fromkeys(k for s in systems for k in _numbers(metrics[s])))
    out: list[Block] = [
        Heading("Summary"),
        Table(
            ["system", *keys],
            [[s, *(metrics[s].get(k) for k in keys)] for s in systems],
            judged={k: v for k, v in (judged or {}).items() if k in keys},
        ),
    ]
    fields = [
        k
        for k in dict.fromkeys(k for m in metrics.values() for k in m)
        if k.startswith("by_") and all(isinstance(m.get(k) or {}, dict) for m in metrics.values())
    ]
    for f in fields:
        inner = [
            v
            for m in metrics.values()
            for g in (m.get(f) or {}).values()
            if isinstance(g, dict)
            for v in _numbers(g)
            if v != "n"
        ]
        values = [(k, k) for k in dict.fromkeys(inner)]
        if values:
            out += by_table(metrics, f, f.removeprefix("by_").replace("_", " "), values, judged)
    return out + cost_blocks(metrics, records)
