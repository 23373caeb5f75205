"""The pieces every benchmark's report body is made of: escaping and number
formats, tables, charts (matplotlib, drawn in `charts.py` and imported only when
a chart is drawn) and the cost section. `report.py` puts a run's page together;
`report_halumem.py` and `report_qa.py` write the bodies."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

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


def get(d: Any, *path: str) -> Any:
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


def cost_section(metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> str:
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
                            get(metrics[s], "cost", "prompt_tokens_per_session"),
                            get(metrics[s], "cost", "completion_tokens_per_session"),
                            get(metrics[s], "cost", "session_tokens_per_session"),
                        ]
                        for s in systems
                    },
                ),
            ]
        )
    )
    return "\n".join(out)


# --- LoCoMo ------------------------------------------------------------------------------
