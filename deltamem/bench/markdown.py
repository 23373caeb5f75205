"""A run's tables as Markdown, for docs/journal/benchmarks.md (`deltamem bench tables
OUT`): the page report.html shows (the task's `page`, rendered by `render.py`
without its charts), then the LLM calls by purpose."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deltamem.bench.log import USAGE
from deltamem.bench.render import Table, markdown


def usage_table(usage: dict[str, dict[str, float]]) -> Table:
    rows: list[list[Any]] = [
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
    return Table(
        ["purpose", "calls", "prompt tok", "from KV cache", "cached share", "generated", "s/call"],
        rows,
        title="LLM calls by purpose (the whole run)",
    )


def run_tables(out: Path) -> str:
    """All tables of the run in OUT (metrics.json, and llm_usage.json if present)."""
    from deltamem.bench.log import RESULTS, read_records
    from deltamem.bench.report import page_of

    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    records = list(read_records(out / RESULTS)) if (out / RESULTS).exists() else []
    _, blocks = page_of(metrics, records)
    usage_path = out / USAGE
    if usage_path.exists():
        blocks.append(usage_table(json.loads(usage_path.read_text(encoding="utf-8"))))
    return markdown(blocks) + "\n"
