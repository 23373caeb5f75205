"""Output shared by the CLI's commands: the consoles, JSON, errors and rich tables.

Its own module so that the commands' modules (main, demo, diff) import it and
not each other.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from deltamem.retrieval.hybrid import RRF_K
from deltamem.types import MemoryItem, Operation, SearchHit

out = Console()
err = Console(stderr=True)


class Bars:
    """Progress bars on stderr, one per phase ("sessions", "questions"): the
    `deltamem.bench.progress.Progress` the bench and synth commands advance. A bar
    is made when its total is declared (none for a phase of no items) or, open-ended
    (`n/?`), when it advances first. Off a terminal (CI logs) rich draws nothing
    until the end, then each bar once, at its final count."""

    def __init__(self, bar: Progress) -> None:
        self._bar = bar
        self._tasks: dict[str, TaskID] = {}

    def total(self, what: str, n: int) -> None:
        if what in self._tasks:
            self._bar.update(self._tasks[what], total=n)
        elif n > 0:
            self._tasks[what] = self._bar.add_task(what, total=n)

    def advance(self, what: str, n: int = 1) -> None:
        if what not in self._tasks:
            self._tasks[what] = self._bar.add_task(what, total=None)
        self._bar.advance(self._tasks[what], n)


def session_progress(as_json: bool) -> Progress:
    """A bar with elapsed time on stderr, off for --json or when stderr is no terminal."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=as_json or not err.is_terminal,
    )


@contextmanager
def progress_bars(totals: Mapping[str, int] | None = None) -> Iterator[Bars]:
    """Bars on stderr for the length of the block; `totals` declares some up front."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=False,
    ) as bar:
        bars = Bars(bar)
        for what, n in (totals or {}).items():
            bars.total(what, n)
        yield bars


def emit_json(value: Any) -> None:
    def plain(v: Any) -> Any:
        if isinstance(v, BaseModel):
            return v.model_dump(mode="json")
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v

    sys.stdout.write(json.dumps(plain(value), ensure_ascii=False, indent=2) + "\n")


def fail(message: str, code: int = 2) -> NoReturn:
    # messages carry user text (ids, paths): never read as markup, never hard-wrapped
    err.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def memories_table(items: list[MemoryItem], title: str) -> Table:
    table = Table(title=title, show_lines=False)
    for col in ("id", "date", "type", "memory", "from (session:turns)", "v"):
        table.add_column(col, overflow="fold")
    for m in items:
        turns = ",".join(str(t) for t in m.turns)
        table.add_row(
            m.id[:8],
            m.timestamp.strftime("%Y-%m-%d"),
            m.memory_type or "",
            escape(m.content),
            escape(f"{m.session_id}:{turns}"),
            str(m.version),
        )
    return table


# a hit's fused score when it is first in both rankings (embedding and keyword)
BEST_SCORE = 2 / (RRF_K + 1)
BAR = 10  # characters of the relevance bar


def relevance(score: float) -> int:
    """A search hit's reciprocal-rank-fusion score as 0-100: 100 for a hit first in
    both the embedding and the keyword ranking, 50 for one first in one of them only."""
    return max(0, min(100, round(100 * score / BEST_SCORE)))


def hits_table(hits: list[SearchHit], title: str) -> Table:
    """Search hits best first: rank, relevance (0-100 and a bar), kind (a `fact` of
    the memory bank or an `episode`, a turn of the session log, with its speaker)."""
    table = Table(title=title, show_lines=False)
    for col in ("#", "relevance", "kind", "id", "date", "memory", "from (session:turns)"):
        table.add_column(col, overflow="fold")
    for rank, h in enumerate(hits, start=1):
        m, score = h.memory, relevance(h.score)
        filled = round(score * BAR / 100)
        content = m.content if h.kind == "fact" else f"{h.speaker or '?'}: {m.content}"
        table.add_row(
            str(rank),
            f"{score:>3} {'█' * filled}{'·' * (BAR - filled)}",
            h.kind if h.kind == "episode" or not m.memory_type else f"fact ({m.memory_type})",
            m.id[:8] if h.kind == "fact" else "",  # an episode's id is no memory id
            m.timestamp.strftime("%Y-%m-%d"),
            escape(content),
            escape(f"{m.session_id}:{','.join(str(t) for t in m.turns)}"),
        )
    return table


def ops_table(ops: list[Operation], title: str) -> Table:
    table = Table(title=title)
    for col in ("op", "id", "content", "note"):
        table.add_column(col, overflow="fold")
    for o in ops:
        content = o.content or ""
        if o.op == "update" and o.old_content:
            content = f"{o.old_content}\n→ {content}"
        table.add_row(o.op, (o.memory_id or "")[:8], escape(content), escape(o.note or ""))
    return table
