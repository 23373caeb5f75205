"""`deltamem diff`: how far one memory state is from another.

A state is a list of memory sentences: a user's live memories in a store, or a
JSON snapshot (`deltamem memories --json`, a list of strings, or
`{"memories": [...]}`). The first state is read as the prediction, the second
as the target. Identical entries are shared; the rest are aligned by the state
distance of `distance.py` (cosine ≥ τ, one to one, keyword fidelity as credit).
P, R and F1 count shared entries as full matches, so two equal states score 1.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from deltamem.train.distance import DEFAULT_TAU, EmbedFn, soft_f1, state_distance


class SnapshotError(ValueError):
    """A file that is not a memory snapshot."""


@dataclass(frozen=True)
class Match:
    pred: str
    target: str
    similarity: float
    fidelity: float  # share of the target's keywords found in the prediction


@dataclass
class StateDiff:
    n_pred: int
    n_target: int
    shared: list[str] = field(default_factory=list)
    matched: list[Match] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # target entries nothing matched
    extra: list[str] = field(default_factory=list)  # predicted entries matching nothing
    precision: float = 1.0
    recall: float = 1.0
    f1: float = 1.0
    tau: float = DEFAULT_TAU

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff_states(
    pred: Sequence[str], target: Sequence[str], *, embed: EmbedFn, tau: float = DEFAULT_TAU
) -> StateDiff:
    dist = state_distance(pred, target, embed=embed, tau=tau)
    uniq_pred = list(dict.fromkeys(" ".join(p.split()) for p in pred))
    uniq_target = list(dict.fromkeys(" ".join(t.split()) for t in target))
    delta_target = {" ".join(t.split()) for t in dist.delta_target}
    shared = [t for t in uniq_target if t not in delta_target]
    matched = [
        Match(dist.delta_pred[p.pred], dist.delta_target[p.target], p.similarity, p.fidelity)
        for p in dist.pairs
    ]
    used_pred = {p.pred for p in dist.pairs}
    used_target = {p.target for p in dist.pairs}
    credit = len(shared) + dist.fidelity
    precision, recall, f1 = soft_f1(credit, len(uniq_pred), len(uniq_target))
    return StateDiff(
        n_pred=len(uniq_pred),
        n_target=len(uniq_target),
        shared=shared,
        matched=matched,
        missing=[t for j, t in enumerate(dist.delta_target) if j not in used_target],
        extra=[p for i, p in enumerate(dist.delta_pred) if i not in used_pred],
        precision=precision,
        recall=recall,
        f1=f1,
        tau=tau,
    )


def load_snapshot(path: Path) -> list[str]:
    """Memory sentences from a JSON snapshot file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SnapshotError(f"{path}: not a JSON file: {exc}") from exc
    if isinstance(data, dict):
        data = data.get("memories")
    if not isinstance(data, list):
        raise SnapshotError(f"{path}: expected a list of memories or {{'memories': [...]}}")
    out: list[str] = []
    for i, item in enumerate(data):
        text = item.get("content") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise SnapshotError(f"{path}: item {i} is neither a string nor has a 'content'")
        out.append(text)
    return out
