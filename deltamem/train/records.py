"""Training records `(state_before, session, ops, state_after, keywords)`.

Built from a HaluMem file, so training can start from real dialogues without any
synthesis: each session's non-distractor gold points are the operations, a point
with `is_update` "True" and `original_memories` is an update of the memory it
quotes, every other point an add. The state is the list of memories in force,
carried from session to session of a user.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from deltamem.bench.datasets import halumem as ds
from deltamem.text import terms
from deltamem.train.distance import gold_keywords

# HaluMem quotes originals with their stamp: "[Sep 06, 2025, 13:56:51][Persona Memory]…"
_STAMP = re.compile(r"^(?:\[[^\]]*\])+\s*")
MATCH_OVERLAP = 0.6  # share of an original's words a state entry must hold to be it


@dataclass
class TrainingOp:
    # "none": a memory the session repeats without changing it (synthesised data
    # labels these; HaluMem's gold points hold no such operation)
    op: Literal["add", "update", "none"]
    content: str
    keywords: list[str]
    replaces: str | None = None  # the state entry an update replaces
    # an update whose quoted original matches no entry of the state: it is kept as
    # an update (the label says so) but replaces nothing
    unmatched: bool = False


@dataclass
class TrainingRecord:
    user: str
    session: int
    session_id: str
    timestamp: str | None
    state_before: list[str]
    messages: list[dict[str, Any]]
    ops: list[TrainingOp] = field(default_factory=list)
    state_after: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


Split = Literal["all", "train", "heldout"]
HELDOUT_SHARE = 0.2  # share of sessions held back from training by default


def held_out(record: TrainingRecord, share: float = HELDOUT_SHARE) -> bool:
    """Whether a record is in the held-back split: a stable hash of its user and
    session id, so the split does not depend on the file's order or length."""
    digest = hashlib.sha256(f"{record.user}/{record.session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def select(
    records: Iterable[TrainingRecord], split: Split, share: float = HELDOUT_SHARE
) -> list[TrainingRecord]:
    """The records of one split ("all" keeps every record)."""
    if split == "all":
        return list(records)
    want = split == "heldout"
    return [r for r in records if held_out(r, share) == want]


def unstamped(text: str) -> str:
    return _STAMP.sub("", text).strip()


def find_original(original: str, state: list[str]) -> int | None:
    """Index of the state entry an update's quoted original is: the same text, else
    the entry holding most of its words (at least MATCH_OVERLAP of them)."""
    text = " ".join(unstamped(original).split())
    for i, entry in enumerate(state):
        if " ".join(entry.split()) == text:
            return i
    want = set(terms(text, limit=10_000))
    if not want:
        return None
    best, where = 0.0, None
    for i, entry in enumerate(state):
        share = len(want & set(terms(entry, limit=10_000))) / len(want)
        if share > best:
            best, where = share, i
    return where if best >= MATCH_OVERLAP else None


def records_from_halumem(
    path: Path, *, users: int | None = None, sessions: int | None = None
) -> Iterator[TrainingRecord]:
    for user in ds.iter_users(path, limit=users):
        state: list[str] = []
        for index, session in enumerate(user.sessions[:sessions] if sessions else user.sessions):
            bench = ds.to_bench_session(session, index, user.name)
            rec = TrainingRecord(
                user=user.uuid,
                session=index,
                session_id=bench.session_id,
                timestamp=bench.timestamp.isoformat() if bench.timestamp else None,
                state_before=list(state),
                messages=[_plain(m) for m in bench.messages],
            )
            for point in session.memory_points:
                if point.is_distractor:
                    continue
                content = point.memory_content.strip()
                op = TrainingOp("add", content, gold_keywords(content))
                if point.is_update_target:
                    op.op = "update"
                    where = next(
                        (
                            i
                            for o in point.original_memories
                            if (i := find_original(o, state)) is not None
                        ),
                        None,
                    )
                    if where is None:
                        op.unmatched = True
                    else:
                        op.replaces = state.pop(where)
                state.append(content)
                rec.ops.append(op)
            rec.state_after = list(state)
            yield rec


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in message.items()}


def write_records(records: Iterator[TrainingRecord], out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec.as_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n
