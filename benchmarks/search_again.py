"""Search a finished HaluMem run's questions again with today's search, no model.

    python benchmarks/search_again.py runs/c12-u3 \
        --data ../shared/data/halumem/pilot_slice_user3.jsonl \
        --out runs/c12-u3-search2

A `deltamem` run keeps its store (OUT/systems/deltamem/deltamem.db): the session
log and the operations the manager applied to each session. Those are replayed
into a fresh store session by session, in log order: the session is logged (its
turns indexed as episodes, as the product does), then its recorded adds and updates
are written with the ids they had. After each session the questions asked at that
point of the run are searched again with the code as it is now, so every question
sees the memory as it was when it was asked, without the 1.5B model.

OUT gets the source run's records with the `deltamem` (and `deltamem-facts`)
questions' hits, evidence coverage and cosine recall replaced; `deltamem bench answer
OUT ...` then answers them. The summary printed compares evidence coverage@20 old
and new, per system, over the questions that have evidence.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.bench.datasets.halumem import iter_users
from deltamem.bench.log import RESULTS, read_records
from deltamem.bench.metrics.coverage import evidence_coverage
from deltamem.bench.softmatch import covered
from deltamem.bench.systems.base import Retrieved
from deltamem.embed import make_embedder
from deltamem.episodes import plan_episodes
from deltamem.memory import open_store
from deltamem.retrieval.hybrid import HybridSearcher, Tiers
from deltamem.store.base import PlannedWrite, Store
from deltamem.train.distance import DEFAULT_TAU

TIERS: dict[str, Tiers] = {"deltamem": "all", "deltamem-facts": "facts"}


def replay_session(src: Store, dst: Store, user: str, session_id: str, embedder: Any) -> None:
    rec = src.get_session(user, session_id)
    if rec is None:
        raise SystemExit(f"{session_id}: not in the source log")
    fresh = rec.model_copy(update={"status": "pending", "attempts": 0, "error": None})
    dst.log_session(fresh, plan_episodes(fresh, embedder))
    ops = [o for o in src.session_operations(user, session_id) if o.op in ("add", "update")]
    texts = [o.content or "" for o in ops]
    vectors = embedder.embed(texts) if texts else []
    writes = [
        PlannedWrite(
            op=o.op,
            content=o.content or "",
            embedding=v,
            memory_id=o.memory_id,
            memory_type=o.memory_type,
            turns=list(o.turns),
        )
        for o, v in zip(ops, vectors, strict=True)
    ]
    logged = dst.get_session(user, session_id)
    assert logged is not None
    dst.apply_session(logged, writes, [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a finished HaluMem run with systems/deltamem")
    ap.add_argument("--data", required=True, type=Path, help="its HaluMem JSONL (the name)")
    ap.add_argument("--out", type=Path, help="write the re-searched run here")
    ap.add_argument("--k", type=int, default=20)
    args = ap.parse_args()

    name = next(iter_users(args.data)).name
    embedder = make_embedder()
    records = list(read_records(args.run / RESULTS))
    asked: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("kind") == "question" and r.get("system") in TIERS:
            asked[(str(r["user"]), int(r["session"]))].append(r)
    src = open_store(args.run / "systems" / "deltamem" / "deltamem.db", embedder)
    old: dict[str, list[float]] = defaultdict(list)
    new: dict[str, list[float]] = defaultdict(list)
    replaced: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        dst = open_store(Path(tmp) / "replay.db", embedder)
        searcher = HybridSearcher(dst, embedder)
        for user in sorted({u for u, _ in asked}):
            for index, rec in enumerate(src.list_sessions(user)):
                replay_session(src, dst, user, rec.session_id, embedder)
                for q in asked.get((user, index), []):
                    tiers = TIERS[q["system"]]
                    hits = searcher.search(q["question"], user, limit=args.k, tiers=tiers)
                    fresh = dict(q) | {"hits": [Retrieved.from_hit(h).as_record() for h in hits]}
                    fresh["retrieved"] = [h["text"] for h in fresh["hits"]]
                    fresh["evidence_coverage"] = evidence_coverage(
                        q["evidence"], fresh["retrieved"], name
                    )
                    fresh["evidence_recall"] = covered(
                        embedder, q["evidence"], fresh["retrieved"], DEFAULT_TAU
                    )
                    for stale in ("prediction", "answer_f1", "verdict", "answer_seconds"):
                        fresh.pop(stale, None)
                    fresh["searched_again"] = datetime.now().isoformat(timespec="seconds")
                    replaced[str(q["key"])] = fresh
                    if q.get("evidence_coverage") is not None:
                        old[q["system"]].append(q["evidence_coverage"])
                        new[q["system"]].append(fresh["evidence_coverage"])
        dst.close()
    src.close()
    for system in sorted(old):
        a, b = old[system], new[system]
        print(
            f"{system}: coverage@{args.k} {sum(a) / len(a):.3f} -> {sum(b) / len(b):.3f} "
            f"over {len(a)} questions with evidence"
        )
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / RESULTS).open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(replaced.get(str(r.get("key")), r), ensure_ascii=False) + "\n")
        print(f"-> {args.out / RESULTS}")


if __name__ == "__main__":
    main()
