"""OUT/report.html: the tables and charts of a finished run in one self-contained
file (inline CSS and SVG drawn by matplotlib, no script, no network), built from
OUT/metrics.json and
OUT/results.jsonl only, so it can be rebuilt at any time
(`deltamem bench report OUT`).

Each benchmark has its body, made of the pieces in `report_parts.py`: HaluMem in
`report_halumem.py`; LoCoMo here (a
summary table, F1 / judge / evidence recall by category); MemBench, LongMemEval
and PersonaMem in `report_qa.py`. All end with the cost section (time and
tokens per session). A chart with no number in it is left out (`bars`, `lines`,
`panels` return "" then): a judge-free run shows what it measured, not empty
panels.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.report_parts import (
    bars,
    cost_section,
    esc,
    get,
    panels,
    table,
)

REPORT = "report.html"
METRICS = "metrics.json"
TEMPLATE = Path(__file__).parent / "report_template.html"


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
                    {s: [get(metrics[s], "by_category", c, key) for c in cats] for s in systems},
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
                + [get(metrics[s], "by_category", c, k) for s in systems for k in ("f1", "judge")]
                + [get(metrics[systems[0]], "by_category", c, "n")]
                for c in cats
            ],
        )
    )
    out.append(cost_section(metrics, records))
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
