"""OUT/report.html: the tables and charts of a finished run in one self-contained
file (inline CSS and SVG drawn by matplotlib, no script, no network), built from
OUT/metrics.json and
OUT/results.jsonl only, so it can be rebuilt at any time
(`deltamem bench report OUT`).

Each benchmark has its body: HaluMem in `report_halumem.py`; LoCoMo here (a
summary table, F1 / judge / evidence recall by category); MemBench, LongMemEval
and PersonaMem in `report_qa.py`. All end with the cost section (time and
tokens per session). A chart with no number in it is left out (`bars`, `lines`,
`panels` return "" then): a judge-free run shows what it measured, not empty
panels.
"""

from __future__ import annotations

import html
import json
import math
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

from deltamem.bench.log import RESULTS, read_records

REPORT = "report.html"
METRICS = "metrics.json"
TEMPLATE = Path(__file__).parent / "report_template.html"

Num = float | int | None


def esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "–"
        return f"{v:.{digits}f}" if abs(v) < 100 else f"{v:,.0f}"
    return esc(v)


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


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{fmt(v) if not isinstance(v, str) else esc(v)}</td>" for v in r)
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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


def panels(figures: Sequence[str]) -> str:
    """The non-empty figures side by side; "" when all are empty."""
    kept = [f for f in figures if f]
    return '<div class="charts">' + "\n".join(kept) + "</div>" if kept else ""


def _get(d: Any, *path: str) -> Any:
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d


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


def _cost_section(metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    systems = list(metrics)
    rows = []
    for s in systems:
        c = metrics[s].get("cost") or {}
        rows.append(
            [
                s,
                c.get("sessions"),
                c.get("llm_calls_per_session"),
                c.get("prompt_tokens_per_session"),
                c.get("completion_tokens_per_session"),
                c.get("session_tokens_per_session"),
                c.get("write_amplification"),
                c.get("write_amplification_uncached"),
                c.get("qpm"),
                c.get("add_seconds_per_session"),
                c.get("seconds_per_search"),
            ]
        )
    out = ["<h2>Cost</h2>"]
    out.append(
        table(
            [
                "system",
                "sessions",
                "LLM calls / session",
                "prompt tokens / session",
                "completion tokens / session",
                "dialogue tokens / session",
                "write amplification",
                "write ampl. (uncached)",
                "qpm",
                "add s / session",
                "s / search",
            ],
            rows,
        )
    )
    out.append(
        '<p class="note">write amplification = prompt tokens the LLM read while adding ÷ '
        "tokens of the sessions; qpm = write-path search queries ÷ memories stored "
        "(adds + updates).</p>"
    )
    per = {s: session_costs(records, s) for s in systems}
    out.append(
        panels(
            [
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
                            _get(metrics[s], "cost", "prompt_tokens_per_session"),
                            _get(metrics[s], "cost", "completion_tokens_per_session"),
                            _get(metrics[s], "cost", "session_tokens_per_session"),
                        ]
                        for s in systems
                    },
                ),
            ]
        )
    )
    return "\n".join(out)


# --- LoCoMo ------------------------------------------------------------------------------
def locomo_body(metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    systems = list(metrics)
    out = ["<h2>Summary (categories 1–4)</h2>"]
    out.append(
        table(
            ["system", "F1", "BLEU-1", "LLM judge", "evidence recall", "n"],
            [
                [s] + [metrics[s].get(k) for k in ("f1", "bleu1", "judge", "evidence_recall", "n")]
                for s in systems
            ],
        )
    )
    cats = list(dict.fromkeys(c for s in systems for c in (metrics[s].get("by_category") or {})))
    out.append("<h2>By category</h2>")
    out.append(
        panels(
            [
                bars(
                    f"{label} by category",
                    cats,
                    {s: [_get(metrics[s], "by_category", c, key) for c in cats] for s in systems},
                    ymax=1.0,
                )
                for key, label in (
                    ("f1", "token F1"),
                    ("judge", "LLM-judge accuracy"),
                    ("evidence_recall", "evidence recall"),
                )
            ]
        )
    )
    out.append(
        table(
            ["category"] + [f"{s} {k}" for s in systems for k in ("F1", "judge")] + ["n"],
            [
                [c]
                + [_get(metrics[s], "by_category", c, k) for s in systems for k in ("f1", "judge")]
                + [_get(metrics[systems[0]], "by_category", c, "n")]
                for c in cats
            ],
        )
    )
    out.append(_cost_section(metrics, records))
    return "\n".join(out)


# --- the file ------------------------------------------------------------------------------
NAMES = {
    "halumem": "HaluMem",
    "locomo": "LoCoMo",
    "membench": "MemBench",
    "longmemeval": "LongMemEval",
    "personamem": "PersonaMem",
}


def benchmark_of(metrics: dict[str, Any]) -> str:
    """The benchmark a metrics.json is from: its `benchmark` field, else (runs from
    before that field) LoCoMo when it has categories and HaluMem otherwise."""
    first: Any = next(iter(metrics.values()), {})
    if not isinstance(first, dict):
        return "halumem"
    if first.get("benchmark") in NAMES:
        return str(first["benchmark"])
    return "locomo" if "by_category" in first else "halumem"


def body_of(kind: str, metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
    from deltamem.bench import report_halumem, report_qa

    bodies = {
        "halumem": report_halumem.halumem_body,
        "locomo": locomo_body,
        "membench": report_qa.membench_body,
        "longmemeval": report_qa.longmemeval_body,
        "personamem": report_qa.personamem_body,
    }
    return bodies[kind](metrics, records)


def render(
    metrics: dict[str, Any], records: Sequence[dict[str, Any]], *, title: str | None = None
) -> str:
    kind = benchmark_of(metrics)
    name = NAMES[kind]
    body = body_of(kind, metrics, records) if metrics else '<p class="note">No results yet.</p>'
    users = len({r.get("user") for r in records if r.get("kind") == "session"})
    meta = (
        f"{name} · systems: {', '.join(metrics) or '–'}"
        f" · users/conversations: {users} · {len(records)} logged records"
        f" · built {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    page = Template(TEMPLATE.read_text(encoding="utf-8"))
    return page.substitute(
        title=esc(title or f"deltamem bench · {name}"), meta=esc(meta), body=body
    )


def write_report(out: Path) -> Path:
    """OUT/report.html from OUT/metrics.json and OUT/results.jsonl."""
    metrics = json.loads((out / METRICS).read_text(encoding="utf-8"))
    records = list(read_records(out / RESULTS))
    path = out / REPORT
    path.write_text(render(metrics, records, title=f"deltamem bench · {out.name}"), "utf-8")
    return path


def write_report_safely(out: Path) -> Path | None:
    """`write_report` for the runners: a report that fails to build is reported on
    stderr and never costs the run its metrics (they are written first)."""
    try:
        return write_report(out)
    except Exception as exc:  # the report is a view; the logs are the record
        print(f"report.html not written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
