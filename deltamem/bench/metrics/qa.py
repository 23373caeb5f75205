"""Question-level figures shared by the MemBench, LongMemEval and PersonaMem
runners: accuracy over records that carry `correct` (True / False, None where it
was not scored), the same broken down by a record field, recall@k of gold ids
through the ids each retrieved item reached, and timing means."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from deltamem.bench.metrics.common import mean

Record = dict[str, Any]


def accuracy(records: Iterable[Record], field: str = "correct") -> float | None:
    """Share of scored records whose `field` is true; None when none was scored."""
    return mean(float(bool(r[field])) for r in records if r.get(field) is not None)


def found_share(gold: Iterable[str], reached: Iterable[str]) -> float | None:
    """Share of the gold ids among the reached ids; None without gold ids."""
    want = set(gold)
    if not want:
        return None
    return len(want & set(reached)) / len(want)


def recall_at_k(gold: Iterable[Any], ranked: Sequence[Iterable[Any]], k: int) -> float | None:
    """Share of the gold ids reached by the first k retrieved items (`ranked[i]`:
    the ids item i came from). MemBench's recall: found targets ÷ targets."""
    reached = {str(x) for ids in ranked[: max(k, 0)] for x in ids}
    return found_share((str(g) for g in gold), reached)


def cutoffs(k: int) -> list[int]:
    """The recall@k cutoffs reported for a run that retrieves k items."""
    return sorted({c for c in (1, 5, 10) if c <= k} | {k}) if k > 0 else []


def mean_of(records: Iterable[Record], field: str) -> float | None:
    return mean(float(r[field]) for r in records if r.get(field) is not None)


def mean_recall(records: Sequence[Record]) -> dict[str, float | None]:
    """Mean of each record's `recall_at` ({"k": share}) per cutoff."""
    ks = sorted({int(k) for r in records for k in (r.get("recall_at") or {})})
    return {
        str(k): mean(
            float(r["recall_at"][str(k)])
            for r in records
            if (r.get("recall_at") or {}).get(str(k)) is not None
        )
        for k in ks
    }


def grouped(
    records: Sequence[Record], field: str, extra: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per value of `field` (in first-seen order): n and accuracy, plus the mean of
    each `extra` record field ({name in output: record field})."""
    values = list(dict.fromkeys(str(r.get(field)) for r in records if r.get(field) is not None))
    out: dict[str, dict[str, Any]] = {}
    for v in values:
        rs = [r for r in records if str(r.get(field)) == v]
        out[v] = {"n": len(rs), "accuracy": accuracy(rs)}
        for name, src in (extra or {}).items():
            out[v][name] = mean_of(rs, src)
    return out


def errors(records: Iterable[Record]) -> int:
    return sum(1 for r in records if r.get("error"))
