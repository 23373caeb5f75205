"""HaluMem aggregation (SPEC §4.1) from per-item records with judge verdicts.

Input records are dicts with a `kind`:
- "point": a gold point routed to the integrity judge — `distractor` (bool),
  `importance`, `memory_type`, `session`, and `score` 0/1/2 (None = not judged);
- "extracted": one memory the system extracted from a session — `score`
  0/1/2 and `included` (bool) from the accuracy judge;
- "update": a gold update target — `verdict` correct / hallucination /
  omission / other;
- "question": `question_type`, `session`, `verdict` (as for updates);
- "session": `state` (the memory-state distance of the session, judge-free).
Every share is over the items that were judged; a metric with nothing judged is
None, so a skipped judge is never read as a score of zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from deltamem.bench.metrics.common import harmonic, mean, share

VERDICTS = ("correct", "hallucination", "omission", "other")

Record = dict[str, Any]


def _kind(records: Iterable[Record], kind: str) -> list[Record]:
    return [r for r in records if r.get("kind") == kind]


def _scored(rs: Iterable[Record]) -> list[Record]:
    return [r for r in rs if r.get("score") is not None]


def normalise_verdict(v: Any) -> str | None:
    if v is None:
        return None
    v = str(v).strip().lower()
    return v if v in VERDICTS else "other"


def recall(points: Sequence[Record]) -> float | None:
    """Share of non-distractor gold points scored 2."""
    rs = _scored(p for p in points if not p.get("distractor"))
    return share(sum(r["score"] == 2 for r in rs), len(rs))


def weighted_recall(points: Sequence[Record]) -> float | None:
    """Σ importance·score/2 ÷ Σ importance over non-distractor points."""
    rs = _scored(p for p in points if not p.get("distractor"))
    total = sum(float(r.get("importance", 1.0)) for r in rs)
    if not rs or total <= 0:
        return None
    return sum(float(r.get("importance", 1.0)) * r["score"] / 2 for r in rs) / total


def fmr(points: Sequence[Record]) -> float | None:
    """False-memory resistance: share of distractor points scored 0 (not stored)."""
    rs = _scored(p for p in points if p.get("distractor"))
    return share(sum(r["score"] == 0 for r in rs), len(rs))


def accuracy(extracted: Sequence[Record]) -> float | None:
    return mean(r["score"] / 2 for r in _scored(extracted))


def target_precision(extracted: Sequence[Record]) -> float | None:
    return mean(r["score"] / 2 for r in _scored(extracted) if r.get("included"))


def extraction_f1(points: Sequence[Record], extracted: Sequence[Record]) -> float | None:
    """Harmonic mean of recall and target precision. A system that extracted
    nothing has no true positives: its F1 is 0 once recall was judged."""
    r = recall(points)
    if not extracted:
        return None if r is None else 0.0
    return harmonic(r, target_precision(extracted))


def cho(items: Sequence[Record]) -> dict[str, float | None]:
    """Correct / hallucination / omission shares over judged items ("other" is
    counted in the denominator only)."""
    vs = [normalise_verdict(r.get("verdict")) for r in items]
    vs = [v for v in vs if v is not None]
    return {
        "correct": share(vs.count("correct"), len(vs)),
        "hallucination": share(vs.count("hallucination"), len(vs)),
        "omission": share(vs.count("omission"), len(vs)),
        "n": len(vs),
    }


def by_memory_type(points: Sequence[Record]) -> dict[str, dict[str, float | None]]:
    types = sorted({str(p.get("memory_type", "unknown")) for p in points})
    out = {}
    for t in types:
        ps = [p for p in points if str(p.get("memory_type", "unknown")) == t]
        out[t] = {"recall": recall(ps), "weighted_recall": weighted_recall(ps), "fmr": fmr(ps)}
    return out


def cumulative_qa(questions: Sequence[Record]) -> list[dict[str, Any]]:
    """QA accuracy over all questions asked up to each session index (DeltaMem Fig. 4)."""
    judged = [q for q in questions if normalise_verdict(q.get("verdict")) is not None]
    out, n, ok = [], 0, 0
    for s in sorted({int(q["session"]) for q in judged}):
        here = [q for q in judged if int(q["session"]) == s]
        n += len(here)
        ok += sum(normalise_verdict(q["verdict"]) == "correct" for q in here)
        out.append({"session": s, "n": n, "accuracy": ok / n})
    return out


def state_f1(sessions: Sequence[Record]) -> float | None:
    """Mean r_trans between each evaluated session's memories and its gold points."""
    return mean(r["state"]["r_trans"] for r in sessions if r.get("state") and not r.get("filler"))


def aggregate(records: Sequence[Record]) -> dict[str, Any]:
    points = _kind(records, "point")
    extracted = _kind(records, "extracted")
    updates = _kind(records, "update")
    questions = _kind(records, "question")
    sessions = _kind(records, "session")
    qa: dict[str, Any] = dict(cho(questions))
    types = sorted({str(q.get("question_type", "unknown")) for q in questions})
    qa["by_type"] = {
        t: cho([q for q in questions if str(q.get("question_type", "unknown")) == t]) for t in types
    }
    return {
        "extraction": {
            "recall": recall(points),
            "weighted_recall": weighted_recall(points),
            "target_precision": target_precision(extracted),
            "accuracy": accuracy(extracted),
            "fmr": fmr(points),
            "f1": extraction_f1(points, extracted),
            "state_f1": state_f1(sessions),
            "by_memory_type": by_memory_type(points),
        },
        "update": cho(updates),
        "qa": qa,
        "qa_by_session": cumulative_qa(questions),
    }
