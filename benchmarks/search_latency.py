"""Search latency of one user's memory (facts and episodes) in a store.

    python benchmarks/search_latency.py --sizes 1000,10000,100000 --json
    python benchmarks/search_latency.py --backend postgres --dsn postgresql://... --json

Builds, per size N, a user with N facts in the memory bank and N episodes (turns
of logged sessions), from synthetic sentences whose vectors are random unit
vectors near a few topic centres, so KNN has structure but the build does not
spend minutes embedding. Other users' rows are added too (1 per 10 of the
user's), so per-user partitioning is exercised. Then it times what
`Memory.search` does: `HybridSearcher.search` over both tiers (dense KNN and
keyword ranking of facts and of episodes, reciprocal rank fusion, fetching and
building the 20 hits), with the query vector precomputed; `facts_p50_ms` is the
same over the fact tier alone. The query embedding is timed separately
(`embed_ms`). `--profile FILE` writes a cProfile of the timed searches of the
largest size. `--schema NAME` (PostgreSQL) builds each size into schema NAME_<size>
and keeps it; a later run with the same name times the stores already there
(`build_s` 0), so that two versions of the code can be timed over the same data.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from deltamem.embed import make_embedder
from deltamem.embed.base import Embedder
from deltamem.episodes import episode_id
from deltamem.retrieval.hybrid import HybridSearcher
from deltamem.store.base import PlannedEpisode, PlannedWrite, Store
from deltamem.text import keywords
from deltamem.types import Episode, Message, SessionRecord

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
OPENERS = ["I think", "Yesterday", "You know,", "By the way,", "Honestly,", "Last week"]
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
TURNS = 20  # turns per logged session of the episode tier
BATCH = 2000


def pick(rng: np.random.Generator, words: list[str]) -> str:
    return words[rng.integers(len(words))]


def sentence(rng: np.random.Generator, i: int) -> str:
    return f"{pick(rng, SUBJECTS)} {pick(rng, VERBS)} {pick(rng, OBJECTS)} (note {i})."


def turn(rng: np.random.Generator, i: int) -> str:
    return (
        f"{pick(rng, OPENERS)} {pick(rng, SUBJECTS)} {pick(rng, VERBS)} "
        f"{pick(rng, OBJECTS)}, turn {i}."
    )


class Vectors:
    """Random unit vectors near 64 topic centres."""

    def __init__(self, rng: np.random.Generator, dim: int) -> None:
        self.rng = rng
        self.centres = rng.normal(size=(64, dim)).astype(np.float32)

    def __call__(self) -> np.ndarray:
        dim = self.centres.shape[1]
        vec = self.centres[self.rng.integers(64)] + 0.5 * self.rng.normal(size=dim).astype(
            np.float32
        )
        return vec / np.linalg.norm(vec)


def record(user: str, session_id: str, messages: list[Message]) -> SessionRecord:
    return SessionRecord(
        user_id=user,
        session_id=session_id,
        timestamp="2029-01-01T00:00:00",
        messages=messages,
        content_hash=f"{user}-{session_id}",
    )


def build_facts(store: Store, user: str, n: int, rng: np.random.Generator, vec: Vectors) -> None:
    for start in range(0, n, BATCH):
        writes = []
        for i in range(start, min(n, start + BATCH)):
            text = sentence(rng, i)
            writes.append(PlannedWrite("add", text, vec(), keywords=keywords(text)))
        rec = record(user, f"bulk-{start}", [Message(role="user", content="bulk")])
        stored, _ = store.log_session(rec)
        store.apply_session(stored, writes, [])


def build_episodes(store: Store, user: str, n: int, rng: np.random.Generator, vec: Vectors) -> None:
    for start in range(0, n, TURNS):
        sid = f"talk-{start}"
        texts = [turn(rng, i) for i in range(start, min(n, start + TURNS))]
        roles = ["user" if t % 2 == 0 else "assistant" for t in range(len(texts))]
        messages = [Message(role=r, content=c) for r, c in zip(roles, texts, strict=True)]
        rec = record(user, sid, messages)
        episodes = [
            PlannedEpisode(
                Episode(
                    id=episode_id(user, None, sid, t),
                    user_id=user,
                    session_id=sid,
                    turn=t,
                    role=roles[t],  # type: ignore[arg-type]
                    content=c,
                    timestamp=rec.timestamp,
                ),
                vec(),
            )
            for t, c in enumerate(texts)
        ]
        store.log_session(rec, episodes)


class Precomputed(Embedder):
    """The benchmark's queries embedded once, so the timed search embeds nothing."""

    def __init__(self, inner: Embedder, queries: list[str]) -> None:
        self.name, self.dim = inner.name, inner.dim
        self.table = dict(zip(queries, inner.embed(queries), strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts])


@contextmanager
def open_store(
    backend: str, dsn: str | None, dim: int, keep: str | None = None
) -> Iterator[tuple[Store, bool]]:
    """The store to time, and whether it is built already (a kept schema)."""
    if backend == "sqlite":
        from deltamem.store.sqlite import SQLiteStore

        with tempfile.TemporaryDirectory() as tmp:
            sqlite_store = SQLiteStore(Path(tmp) / "bench.db", dim=dim)
            try:
                yield sqlite_store, False
            finally:
                sqlite_store.close()
        return
    from deltamem.store.postgres import PostgresStore

    if dsn is None:
        raise SystemExit("--backend postgres needs --dsn")
    with bench_schema(dsn, keep, "bench") as (pg_dsn, built):
        pg_store = PostgresStore(pg_dsn, dim)
        try:
            yield pg_store, built
        finally:
            pg_store.close()


@contextmanager
def bench_schema(
    dsn: str, keep: str | None, prefix: str, settings: tuple[str, ...] = ()
) -> Iterator[tuple[str, bool]]:
    """A PostgreSQL schema to build a benchmark's store in: `keep` (reused where a
    run built it to the end, else emptied and built again) or a new one, dropped
    after. Yields the DSN that points the store at it (with `settings`, NAME=VALUE,
    set on its connections) and whether it is built already."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    schema = keep or f"{prefix}_{int(time.time())}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        kept = conn.execute("SELECT to_regclass(%s)", (f"{schema}.meta",)).fetchone()
        built = bool(kept and kept[0]) and (
            conn.execute(f"SELECT 1 FROM {schema}.meta WHERE key='bench_built'").fetchone()
            is not None
        )
        if not built:  # new, or a build that did not finish: start again
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
    options = " ".join([f"-c search_path={schema},public", *(f"-c {s}" for s in settings)])
    pg_dsn = make_conninfo(dsn, options=options)
    try:
        yield pg_dsn, built
        if keep and not built:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute("INSERT INTO meta VALUES ('bench_built', '1')")
    finally:
        if not keep:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")


def embed_ms(embedder: Embedder) -> float:
    """The median time to embed one query, ms."""
    t = []
    for q in QUERIES * 10:
        s = time.perf_counter()
        embedder.embed([q])
        t.append((time.perf_counter() - s) * 1000)
    return round(statistics.median(t), 3)


def percentile(sorted_ms: list[float], q: float) -> float:
    return round(sorted_ms[int(q * (len(sorted_ms) - 1))], 3)


def timed(searcher: HybridSearcher, repeats: int, tiers: str) -> list[float]:
    timings = []
    for r in range(repeats):
        t = time.perf_counter()
        searcher.search(QUERIES[r % len(QUERIES)], "u-main", limit=20, tiers=tiers)  # type: ignore[arg-type]
        timings.append((time.perf_counter() - t) * 1000)
    return sorted(timings)


def measure(
    store: Store,
    size: int,
    embedder: Embedder,
    repeats: int,
    rng: np.random.Generator,
    profile: Path | None,
    built: bool = False,
) -> dict[str, float]:
    vec = Vectors(rng, embedder.dim)
    t0 = time.perf_counter()
    for user, n in (("u-main", size), ("u-other", max(1, size // 10))):
        if not built:
            build_facts(store, user, n, rng, vec)
            build_episodes(store, user, n, rng, vec)
    build_s = time.perf_counter() - t0
    searcher = HybridSearcher(store, embedder)
    for q in QUERIES:  # load what a process loads on its first search
        searcher.search(q, "u-main")
    profiler = cProfile.Profile() if profile is not None else None
    if profiler is not None:
        profiler.enable()
    both = timed(searcher, repeats, "all")
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(str(profile))
    facts = timed(searcher, repeats, "facts")
    return {
        "p50_ms": round(statistics.median(both), 3),
        "p95_ms": percentile(both, 0.95),
        "p99_ms": percentile(both, 0.99),
        "facts_p50_ms": round(statistics.median(facts), 3),
        "build_s": round(build_s, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--dsn", help="PostgreSQL server (a schema is made and dropped on it)")
    ap.add_argument("--profile", type=Path, help="cProfile output of the largest size")
    ap.add_argument("--schema", help="PostgreSQL: build into NAME_<size> and keep it, or reuse it")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    real = make_embedder("local")
    embedder = Precomputed(real, QUERIES)
    sizes = [int(s) for s in args.sizes.split(",")]
    result: dict[str, object] = {}
    for size in sizes:
        keep = f"{args.schema}_{size}" if args.schema else None
        with open_store(args.backend, args.dsn, embedder.dim, keep) as (store, built):
            prof = args.profile if size == max(sizes) else None
            result[str(size)] = measure(store, size, embedder, args.repeats, rng, prof, built)
        if not args.json:
            print(size, result[str(size)], file=sys.stderr)
    result["embed_ms"] = embed_ms(real)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
