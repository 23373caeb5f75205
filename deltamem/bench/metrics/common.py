"""Small helpers shared by the metric modules."""

from __future__ import annotations

from collections.abc import Iterable


def mean(values: Iterable[float]) -> float | None:
    vals = list(values)
    return sum(vals) / len(vals) if vals else None


def share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def harmonic(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 2 * a * b / (a + b) if a + b > 0 else 0.0
