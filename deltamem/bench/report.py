"""OUT/report.html: the tables and charts of a finished run in one self-contained
file (inline CSS and SVG, no script, no network), built from OUT/metrics.json and
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
PALETTE = ["#4269d0", "#efb118", "#ff725c", "#6cc5b0", "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5"]

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


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


# --- SVG charts ----------------------------------------------------------------------
def bar_chart(
    title: str,
    groups: Sequence[str],
    series: dict[str, Sequence[Num]],
    *,
    ymax: float | None = None,
    width: int = 520,
    height: int = 260,
) -> str:
    """Grouped bars: one group per label in `groups`, one bar per series (system)."""
    values = [_num(v) for vs in series.values() for v in vs]
    top = ymax if ymax is not None else _nice_max(max([v for v in values if v is not None] or [0]))
    left, right, top_pad, bottom = 48, 10, 10, 70
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    n_series = max(1, len(series))
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / n_series
    parts = [_axes(left, top_pad, plot_w, plot_h, top)]
    for si, (name, vs) in enumerate(series.items()):
        color = PALETTE[si % len(PALETTE)]
        for gi, v in enumerate(vs):
            x = left + gi * group_w + group_w * 0.1 + si * bar_w
            val = _num(v)
            if val is None:
                parts.append(
                    f'<text x="{x + bar_w / 2:.1f}" y="{top_pad + plot_h - 3:.1f}" '
                    f'font-size="9" text-anchor="middle" fill="#999">–</text>'
                )
                continue
            h = plot_h * min(max(val, 0.0), top) / top
            y = top_pad + plot_h - h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(bar_w - 1, 1):.1f}" '
                f'height="{h:.1f}" fill="{color}"><title>{esc(name)} · '
                f"{esc(groups[gi])}: {fmt(val)}</title></rect>"
            )
    for gi, g in enumerate(groups):
        x = left + gi * group_w + group_w / 2
        y = top_pad + plot_h + 12
        parts.append(
            f'<text x="{x:.1f}" y="{y}" font-size="10" text-anchor="end" '
            f'transform="rotate(-30 {x:.1f} {y})">{esc(_short(g))}</text>'
        )
    return _figure(title, width, height, parts, list(series))


def line_chart(
    title: str,
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    xlabel: str = "",
    ymax: float | None = None,
    width: int = 520,
    height: int = 260,
) -> str:
    """Lines of (x, y) points, one per series (system)."""
    pts = [(x, y) for s in series.values() for x, y in s]
    ys = [y for _, y in pts]
    top = ymax if ymax is not None else _nice_max(max(ys or [0]))
    xs = [x for x, _ in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    left, right, top_pad, bottom = 48, 14, 10, 50
    plot_w, plot_h = width - left - right, height - top_pad - bottom
    parts = [_axes(left, top_pad, plot_w, plot_h, top)]

    def px(x: float) -> float:
        return left + plot_w * (x - x0) / (x1 - x0)

    def py(y: float) -> float:
        return top_pad + plot_h - plot_h * min(max(y, 0.0), top) / top

    for tick in _ticks(x0, x1):
        parts.append(
            f'<text x="{px(tick):.1f}" y="{top_pad + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{fmt(tick if tick != int(tick) else int(tick))}</text>'
        )
    if xlabel:
        parts.append(
            f'<text x="{left + plot_w / 2:.1f}" y="{height - 22}" font-size="10" '
            f'text-anchor="middle">{esc(xlabel)}</text>'
        )
    for si, (name, s) in enumerate(series.items()):
        color = PALETTE[si % len(PALETTE)]
        if not s:
            continue
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        for x, y in s:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{color}">'
                f"<title>{esc(name)} · {fmt(x)}: {fmt(y)}</title></circle>"
            )
    return _figure(title, width, height, parts, list(series))


def _ticks(x0: float, x1: float, n: int = 8) -> list[float]:
    step = max(1, math.ceil((x1 - x0) / n))
    out, x = [], x0
    while x <= x1 + 1e-9:
        out.append(x)
        x += step
    return out


def _short(label: str, n: int = 22) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _axes(left: float, top: float, w: float, h: float, ymax: float) -> str:
    out = []
    for i in range(5):
        v = ymax * i / 4
        y = top + h - h * i / 4
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" '
            f'stroke="#eee" stroke-width="1"/>'
        )
        out.append(
            f'<text x="{left - 4}" y="{y + 3:.1f}" font-size="10" text-anchor="end">'
            f"{fmt(v, 2)}</text>"
        )
    out.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#555"/>')
    return "".join(out)


def _figure(title: str, width: int, height: int, parts: list[str], names: list[str]) -> str:
    legend = "".join(
        f'<tspan fill="{PALETTE[i % len(PALETTE)]}">■</tspan><tspan> {esc(n)}  </tspan>'
        for i, n in enumerate(names)
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 16}" '
        f'viewBox="0 0 {width} {height + 16}" role="img" aria-label="{esc(title)}">'
        + "".join(parts)
        + f'<text x="48" y="{height + 10}" font-size="11">{legend}</text></svg>'
    )
    return f"<figure><figcaption>{esc(title)}</figcaption>{svg}</figure>"


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
