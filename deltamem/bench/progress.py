"""What a run tells its progress bars: one bar per phase ("sessions", "questions",
"judge point", ...), its total declared before it first advances.

A runner counts its totals from its data up front, for every system. On --resume
an item found done still advances its bar as the run passes it (its sessions are
added again to rebuild the memory), so a resumed run's bars end at the same totals
as a fresh one's. The judges and `bench answer` count only what they will do.
The CLI draws the bars (`deltamem.cli.render.progress_bars`); tests record them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class Progress(Protocol):
    def total(self, what: str, n: int) -> None:
        """The number of items the bar `what` will count (set, not added)."""
        ...

    def advance(self, what: str, n: int = 1) -> None:
        """`n` more items of `what` done."""
        ...


def declare(progress: Progress | None, totals: Mapping[str, int]) -> None:
    """Declare each bar's total, if the run has bars."""
    if progress is not None:
        for what, n in totals.items():
            progress.total(what, n)


def tick(progress: Progress | None, what: str, n: int = 1) -> None:
    """Advance a run's bar for `what` by `n` items, if it has bars."""
    if progress is not None and n:
        progress.advance(what, n)
