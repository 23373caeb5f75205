"""OUT/report.html: the tables and charts of a finished run in one self-contained
file (inline CSS and SVG drawn by matplotlib, no script, no network), built from
OUT/metrics.json and OUT/results.jsonl only, so it can be rebuilt at any time
(`deltamem bench report OUT`).

Each benchmark's task describes its page once (`Task.page`, blocks of
`render.py`), and the same page gives `deltamem bench tables` its Markdown: HaluMem
in `report_halumem.py`; LoCoMo here (a summary table, F1 / judge / evidence recall
by category); MemBench, LongMemEval and PersonaMem in `report_qa.py`; a benchmark
without a page of its own gets `report_parts.generic_page`. All end with the cost
section. A chart with no number in it is left out: a judge-free run shows what it
measured, not empty panels.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from string import Template
from typing import Any

from deltamem.bench import render as rd
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.render import Block, Charts, Heading, Table, get
from deltamem.bench.report_parts import bars, by_table, cost_blocks

REPORT = "report.html"
METRICS = "metrics.json"
TEMPLATE = Path(__file__).parent / "report_template.html"


def locomo_page(metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> list[Block]:
    systems = list(metrics)
    keys = [
        ("f1", "F1"),
        ("bleu1", "BLEU-1"),
        ("judge", "LLM judge"),
        ("evidence_recall", "evidence recall"),
        ("n", "n"),
    ]
    cats = list(dict.fromkeys(c for s in systems for c in (metrics[s].get("by_category") or {})))

    def draw() -> list[str]:
        return [
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

    by = [("f1", "F1"), ("judge", "judge"), ("evidence_recall", "evidence recall")]
    return [
        Heading("Summary (categories 1–4)"),
        Table(
            ["system", *(label for _, label in keys)],
            [[s, *(metrics[s].get(k) for k, _ in keys)] for s in systems],
            judged={"LLM judge": ("locomo",)},
        ),
        Heading("By category"),
        Charts(draw),
        *by_table(metrics, "by_category", "category", by, {"judge": ("locomo",)}),
        *cost_blocks(metrics, records),
    ]


# --- the file ------------------------------------------------------------------------------
def benchmark_of(metrics: dict[str, Any]) -> str:
    """The task a metrics.json is from (`task.task_of`)."""
    from deltamem.bench.task import task_of

    return task_of(metrics)


def page_of(metrics: dict[str, Any], records: Sequence[dict[str, Any]]) -> tuple[str, list[Block]]:
    """The run's title (the benchmark's name) and page, from its task; a task the
    registry does not know (one named as package.module:OBJECT) gets the generic
    page."""
    from deltamem.bench.report_parts import generic_page
    from deltamem.bench.task import TASKS, get_task

    name = benchmark_of(metrics)
    if name not in TASKS:
        return name, generic_page(metrics, records) if metrics else []
    task = get_task(name)
    return task.title, task.page(metrics, records) if metrics else []


def render(
    metrics: dict[str, Any], records: Sequence[dict[str, Any]], *, title: str | None = None
) -> str:
    name, blocks = page_of(metrics, records)
    body = rd.html(blocks) if metrics else '<p class="note">No results yet.</p>'
    users = len({r.get("user") for r in records if r.get("kind") == "session"})
    meta = (
        f"{name} · systems: {', '.join(metrics) or '–'}"
        f" · users/conversations: {users} · {len(records)} logged records"
        f" · built {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    page = Template(TEMPLATE.read_text(encoding="utf-8"))
    return page.substitute(
        title=rd.esc(title or f"deltamem bench · {name}"), meta=rd.esc(meta), body=body
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
