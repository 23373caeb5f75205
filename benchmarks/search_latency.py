"""Search latency of one user's bank in the embedded SQLite store.

    python benchmarks/search_latency.py --sizes 1000,10000,100000 --json

Builds a bank per size (synthetic fact sentences; vectors are random unit vectors
near a few topic centres, so KNN has structure but the build does not spend
minutes embedding), then times hybrid search (dense KNN + FTS5 BM25 + RRF +
fetching the rows) with the query vector precomputed. The query embedding is
timed separately and reported as embed_ms. Other users' rows are added too
(1 per 10 of the user's), so per-user partitioning is exercised.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from deltamem.embed import make_embedder
from deltamem.retrieval.hybrid import HybridSearcher
from deltamem.store.base import PlannedWrite
from deltamem.store.sqlite import SQLiteStore
from deltamem.text import keywords
from deltamem.types import Message, SessionRecord

SUBJECTS = ["Martin", "Sarah", "Lena", "Priya", "Tomas", "Ana", "Jonas", "Mei"]
VERBS = ["likes", "visited", "bought", "studies", "dislikes", "plans to see", "works on", "met"]
OBJECTS = [
    "jazz concerts",
    "the Lisbon office",
    "a red bicycle",
    "marine biology",
    "spicy food",
    "a new apartment",
    "the quarterly report",
    "an old friend",
    "sci-fi films",
    "herbal tea",
    "a marathon",
    "Portuguese lessons",
    "a rescue cat",
    "the night shift",
    "a trip to Kyoto",
]
QUERIES = [
    "What films does Martin like?",
    "Where did Sarah travel?",
    "Which food does Lena avoid?",
    "What is Priya studying?",
    "Who did Tomas meet?",
    "What did Ana buy recently?",
    "Does Jonas run marathons?",
    "What drink does Mei prefer?",
]


def sentence(rng: np.random.Generator, i: int) -> str:
    return (
        f"{SUBJECTS[rng.integers(len(SUBJECTS))]} {VERBS[rng.integers(len(VERBS))]} "
        f"{OBJECTS[rng.integers(len(OBJECTS))]} (note {i})."
    )


def build(store: SQLiteStore, user: str, n: int, rng: np.random.Generator, dim: int) -> None:
    centres = rng.normal(size=(64, dim)).astype(np.float32)
    batch = 2000
    for start in range(0, n, batch):
        writes = []
        for i in range(start, min(n, start + batch)):
            vec = centres[rng.integers(64)] + 0.5 * rng.normal(size=dim).astype(np.float32)
            text = sentence(rng, i)
            writes.append(
                PlannedWrite("add", text, vec / np.linalg.norm(vec), keywords=keywords(text))
            )
        rec = SessionRecord(
            user_id=user,
            session_id=f"bulk-{start}",
            timestamp="2029-01-01T00:00:00",
            messages=[Message(role="user", content="bulk")],
            content_hash=f"{user}-{start}",
        )
        stored, _ = store.log_session(rec)
        store.apply_session(stored, writes, [])


def measure(size: int, embedder, repeats: int, rng: np.random.Generator) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db", dim=embedder.dim)
        t0 = time.perf_counter()
        build(store, "u-main", size, rng, embedder.dim)
        build(store, "u-other", max(1, size // 10), rng, embedder.dim)
        build_s = time.perf_counter() - t0
        searcher = HybridSearcher(store, embedder)
        qvecs = embedder.embed(QUERIES)
        timings = []
        for r in range(repeats):
            q = r % len(QUERIES)
            t = time.perf_counter()
            ranked = searcher.rank([QUERIES[q]], "u-main", vectors=qvecs[q : q + 1])[:20]
            store.get_many([mid for mid, _ in ranked])
            timings.append((time.perf_counter() - t) * 1000)
        store.close()
    timings.sort()
    return {
        "p50_ms": round(statistics.median(timings), 3),
        "p95_ms": round(timings[int(0.95 * (len(timings) - 1))], 3),
        "build_s": round(build_s, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    embedder = make_embedder("local")
    result: dict[str, object] = {}
    for size in [int(s) for s in args.sizes.split(",")]:
        result[str(size)] = measure(size, embedder, args.repeats, rng)
        if not args.json:
            print(size, result[str(size)], file=sys.stderr)
    t = []
    for q in QUERIES * 10:
        s = time.perf_counter()
        embedder.embed([q])
        t.append((time.perf_counter() - s) * 1000)
    result["embed_ms"] = round(statistics.median(t), 3)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
