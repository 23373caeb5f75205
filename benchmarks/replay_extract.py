"""Re-check logged extraction replies with today's code: state_f1 per session, no model.

    python benchmarks/replay_extract.py --data ../shared/data/halumem/pilot_slice_user3.jsonl \
        --calls runs/h12-u3/llm_calls.jsonl --sessions 6

A run of the per-turn manager logs every extraction reply (the bench's
llm_calls.jsonl, or the llm_calls table of a store). Those replies, fed back in
order (one per user turn, sessions in order) through `FactExtractor`, go through
the checks of the code as it is now, then the session's facts are deduplicated
among themselves and scored against the session's gold points with the bench's
state distance (DeltaMem r_trans at tau 0.75). So a change to the checks is
measured in seconds on every logged session, without the 1.5B model. What it does
not replay: the decision step against stored memories (resolve), so the counts
are the facts a session would try to write; a change to the prompt needs a new run.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from deltamem.bench.datasets.halumem import iter_users, to_bench_session
from deltamem.embed import make_embedder
from deltamem.llm.jsonrepair import close_truncated
from deltamem.manager.extract import FactExtractor, introduced_name, name_in
from deltamem.manager.resolve import DUPLICATE
from deltamem.memory import parse_messages
from deltamem.train.distance import DEFAULT_TAU, state_distance
from deltamem.types import Operation, SessionRecord


def logged_replies(path: Path) -> list[str]:
    """Successful extraction replies, oldest first, from a calls log or a store."""
    if path.suffix == ".db":
        with sqlite3.connect(path) as db:
            rows = db.execute(
                "SELECT reply FROM llm_calls WHERE purpose = 'extract' AND ok = 1 ORDER BY id"
            )
            return [r for (r,) in rows]
    calls = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [c["reply"] for c in calls if c.get("purpose") == "extract" and c.get("ok", True)]


class ReplayLLM:
    """Answers each extraction request with the next logged reply."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.used = 0

    def complete_json(self, messages: Any, schema: Any, **_: Any) -> dict[str, Any]:
        if self.used >= len(self.replies):
            raise SystemExit(f"the log has {len(self.replies)} replies: fewer than user turns")
        text = self.replies[self.used]
        self.used += 1
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = close_truncated(text)
        return value if isinstance(value, dict) else {"facts": []}

    def complete_json_many(self, prompts: list[Any], schema: Any, **_: Any) -> list[Any]:
        return [self.complete_json(p, schema) for p in prompts]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, type=Path, help="HaluMem JSONL (first user)")
    ap.add_argument("--calls", required=True, type=Path, help="llm_calls.jsonl or a store .db")
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    user = next(iter_users(args.data))
    embedder = make_embedder()
    llm = ReplayLLM(logged_replies(args.calls))
    extractor = FactExtractor(llm)  # type: ignore[arg-type]  # only complete_json is used
    name: str | None = None
    rows = []
    for index, session in enumerate(user.sessions[: args.sessions]):
        bench = to_bench_session(session, index, user.name)
        record = SessionRecord(
            session_id=bench.session_id,
            user_id="replay",
            timestamp=bench.timestamp,
            messages=parse_messages(bench.messages),
            content_hash="replay",
        )
        said = [m.content for m in record.messages if m.role == "user"]
        name = name or name_in(said) or introduced_name(said)
        refused: list[Operation] = []
        facts = [c.content for c in extractor.extract(record, name, refused)]
        kept: list[str] = []
        vectors: list[np.ndarray] = []
        for fact, vec in zip(facts, embedder.embed(facts) if facts else [], strict=True):
            if any(float(vec @ v) >= DUPLICATE for v in vectors):
                continue
            kept.append(fact)
            vectors.append(vec)
        gold = [p.memory_content for p in session.memory_points if not p.is_distractor]
        dist = state_distance(kept, gold, embed=embedder.embed, tau=DEFAULT_TAU)
        rows.append(
            {
                "session": index,
                "facts": len(kept),
                "refused": len(refused),
                "gold": len(gold),
                "precision": round(dist.precision, 3),
                "recall": round(dist.recall, 3),
                "state_f1": round(dist.r_trans, 3),
            }
        )
    mean = sum(r["state_f1"] for r in rows) / max(1, len(rows))
    if args.json:
        print(json.dumps({"sessions": rows, "mean_state_f1": round(mean, 3)}))
        return
    for r in rows:
        print(
            f"session {r['session']:2d}: {r['facts']:3d} facts ({r['refused']} refused), "
            f"{r['gold']:2d} gold, P {r['precision']:.3f} R {r['recall']:.3f} "
            f"state_f1 {r['state_f1']:.3f}"
        )
    print(f"mean state_f1 {mean:.3f} over {len(rows)} sessions; {llm.used} replies used")


if __name__ == "__main__":
    main()
