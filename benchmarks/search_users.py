"""Search latency over many users: U users of F facts and E turns each, in one store.

    python benchmarks/search_users.py --users 10000 --facts-per-user 100 \\
        --backend postgres --dsn postgresql://... --schema big --json

Where benchmarks/search_latency.py times one user with a large bank, this times the
shape of a service: many users with small banks, and a search for a user picked at
random. Each user has `--sessions-per-user` logged sessions (default 5); each session
holds E/S turns (the episode tier, indexed when logged) and, applied, adds F/S facts
with their history rows, as `Store.log_session` and `Store.apply_session` write them.
Texts and vectors are synthetic as in search_latency.py (sentences from small word
lists; random unit vectors near 64 topic centres), drawn from a generator seeded per
user and session, so every load of the same arguments holds the same memory. The
sessions arrive in rounds (every user's first session, then every user's second...),
so that a user's rows lie in several places of each table, as they do in a store
written over time.

Loading (`--load`): `store` calls the store's own write path, a transaction a session
(SQLite; or PostgreSQL, slowly); `copy` (PostgreSQL, the default there) writes the same
rows with binary COPY into the tables the store's migrations created (the store is
opened first): the session log, the memories, their history, the episodes and the
per-user search versions, each value as the store's write path computes it
(tests/test_search_users.py compares the two loads row by row). Then VACUUM ANALYZE,
as autovacuum would in time. Progress goes to stderr.

Then it times `HybridSearcher.search` (limit 20, the query vector precomputed; the
query embedding is `embed_ms`) for `--queries` random (user, query) pairs, both tiers
and facts alone, in three conditions, each with a new store object (empty caches):
- `cold`: users at random, each searched once, so every search is the process's first
  of that user (its bank of vectors and postings is read from the database, and its
  name sampled);
- `warm`: `--warm-users` users searched once beforehand, then at random among them
  (their banks are held in the process: the steady state of an active user);
- `sql` (PostgreSQL): the store ranking in SQL on every search (`cached_search=False`:
  pgvector's exact KNN over the user's rows, ts_rank_cd), no bank in the process.
It reports the build time, each table's and index's size, the server's settings and,
with `--explain`, EXPLAIN (ANALYZE, BUFFERS) of the fact tier's KNN and keyword ranking
in SQL and of its bank read, for one user. `--schema NAME` (PostgreSQL) keeps the built
store in schema NAME and times it again on a later run with the same name (`build_s`
0). `--query TEXT` times other queries than search_latency.py's eight; `--pg-option
NAME=VALUE` sets a PostgreSQL setting on the store's connections (plan_cache_mode...).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_latency import QUERIES, Precomputed, bench_schema, embed_ms, sentence, turn

from deltamem.embed import make_embedder
from deltamem.embed.base import Embedder
from deltamem.episodes import session_episodes
from deltamem.memory import session_hash
from deltamem.retrieval.hybrid import HybridSearcher
from deltamem.store.base import PlannedEpisode, PlannedWrite, Store
from deltamem.store.common import added, history_row, written_values
from deltamem.store.rows import episode_values, stored_agent
from deltamem.text import keywords
from deltamem.types import Message, SessionRecord, utcnow

START = datetime(2029, 1, 1, tzinfo=UTC)
CENTRES = 64
TABLES = ("sessions", "memories", "history", "episodes", "search_versions")
SETTINGS = (
    "shared_buffers",
    "work_mem",
    "effective_cache_size",
    "maintenance_work_mem",
    "random_page_cost",
    "jit",
    "max_parallel_workers_per_gather",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "max_wal_size",
    "autovacuum",
)


@dataclass
class Shape:
    users: int
    facts: int  # per user
    turns: int  # per user (episodes)
    sessions: int  # per user
    dim: int
    seed: int = 0

    def user(self, i: int) -> str:
        return f"user-{i:06d}"


@dataclass
class PlannedSession:
    record: SessionRecord
    episodes: list[PlannedEpisode]
    writes: list[PlannedWrite]


def centres(shape: Shape) -> np.ndarray:
    return np.random.default_rng([shape.seed, 0xC0]).normal(size=(CENTRES, shape.dim))


def unit_rows(rng: np.random.Generator, near: np.ndarray, n: int) -> np.ndarray:
    """n random unit vectors, each near one of the topic centres."""
    dim = near.shape[1]
    rows = near[rng.integers(len(near), size=n)] + 0.5 * rng.normal(size=(n, dim))
    rows = rows.astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def plan_session(shape: Shape, near: np.ndarray, i: int, j: int) -> PlannedSession:
    """User i's session j: its turns (with vectors) and the facts applying it adds.
    Seeded by (seed, i, j) alone, so any order of building gives the same memory."""
    rng = np.random.default_rng([shape.seed, i, j])
    first_turn, last_turn = (
        (shape.turns * j) // shape.sessions,
        (shape.turns * (j + 1)) // shape.sessions,
    )
    first_fact, last_fact = (
        (shape.facts * j) // shape.sessions,
        (shape.facts * (j + 1)) // shape.sessions,
    )
    texts = [turn(rng, t) for t in range(first_turn, last_turn)]
    roles = ["user" if t % 2 == 0 else "assistant" for t in range(len(texts))]
    messages = [Message(role=r, content=c) for r, c in zip(roles, texts, strict=True)]  # type: ignore[arg-type]
    ts = START + timedelta(days=j, seconds=i)
    rec = SessionRecord(
        user_id=shape.user(i),
        session_id=f"session-{j:03d}",
        timestamp=ts,
        messages=messages,
        content_hash=session_hash(messages, ts),
    )
    facts = [sentence(rng, n) for n in range(first_fact, last_fact)]
    vecs = unit_rows(rng, near, len(texts) + len(facts))
    episodes = [
        PlannedEpisode(e, v) for e, v in zip(session_episodes(rec), vecs[: len(texts)], strict=True)
    ]
    writes = [
        PlannedWrite("add", text, vec, keywords=keywords(text))
        for text, vec in zip(facts, vecs[len(texts) :], strict=True)
    ]
    return PlannedSession(rec, episodes, writes)


class Progress:
    """A line on stderr every few seconds: a long load must not be silent."""

    def __init__(self, total_facts: int, every: float = 10.0) -> None:
        self.total, self.every = total_facts, every
        self.facts = self.turns = 0
        self.t0 = self.last = time.monotonic()

    def add(self, facts: int, turns: int) -> None:
        self.facts += facts
        self.turns += turns
        now = time.monotonic()
        if now - self.last >= self.every or self.facts >= self.total:
            self.last = now
            rate = self.facts / max(now - self.t0, 1e-9)
            eta = (self.total - self.facts) / rate if rate else float("inf")
            print(
                f"  loaded {self.facts:,} of {self.total:,} facts"
                f" ({100 * self.facts / max(self.total, 1):.0f}%)"
                f" and {self.turns:,} turns, {now - self.t0:.0f} s, {rate:,.0f} facts/s,"
                f" about {eta / 60:.1f} min left",
                file=sys.stderr,
                flush=True,
            )


def load_with_store(store: Store, shape: Shape) -> None:
    """Every session through the store's own write path: logged with its turns, then
    applied (a transaction each)."""
    near = centres(shape)
    progress = Progress(shape.users * shape.facts)
    for j in range(shape.sessions):
        for i in range(shape.users):
            s = plan_session(shape, near, i, j)
            stored, _ = store.log_session(s.record, s.episodes)
            store.apply_session(stored, s.writes, [])
            progress.add(len(s.writes), len(s.episodes))


# --- COPY into the PostgreSQL store's tables --------------------------------------------
_COPY = {
    "sessions": (
        "user_id, agent_id, session_id, ts, timestamp, messages, content_hash, status, "
        "attempts, operations, created_at, applied_at, indexed, deferred",
        "text text text float8 text text text text int4 jsonb timestamptz timestamptz bool bool",
    ),
    "memories": (
        "id, user_id, agent_id, content, ts, timestamp, memory_type, keywords, session_id, "
        "turns, created_at, updated_at, embedding, fts_text, expires_at",
        "text text text text float8 text text jsonb text jsonb timestamptz timestamptz vector "
        "text timestamptz",
    ),
    "history": (
        "memory_id, user_id, op, old_content, new_content, session_id, actor, at",
        "text text text text text text text timestamptz",
    ),
    "episodes": (
        "id, user_id, agent_id, session_id, turn, role, name, content, ts, timestamp, "
        "embedding, fts_text",
        "text text text text int4 text text text float8 text vector text",
    ),
    "search_versions": ("user_id, tier, version", "text text int8"),
}


def session_rows(s: PlannedSession, dim: int) -> dict[str, list[tuple[Any, ...]]]:
    """The rows `log_session(rec, episodes)` then `apply_session(rec, writes, [])` leave
    in each table (but search_versions), computed as they compute them."""
    # the store's own helpers, so that the values cannot drift from what it writes
    from deltamem.store.common import check_embedding
    from deltamem.store.pg_sql import fold
    from deltamem.store.postgres_memories import _fts_text

    rec, logged = s.record, utcnow()
    applied = utcnow()
    rows: dict[str, list[tuple[Any, ...]]] = {"memories": [], "history": [], "episodes": []}
    ops = []
    for w in s.writes:
        check_embedding(w.embedding, dim, finite=True)
        mid = uuid.uuid4().hex
        values = written_values(rec, w, list)
        rows["memories"].append(
            (
                mid,
                rec.user_id,
                stored_agent(rec.agent_id),
                *values,
                applied,
                applied,
                w.embedding,
                _fts_text(w),
                w.expires_at,
            )
        )
        op = added(mid, w)
        rows["history"].append(history_row(op, rec, applied))
        ops.append(op.model_dump(mode="json"))
    messages = json.dumps([m.model_dump(mode="json") for m in rec.messages])
    rows["sessions"] = [
        (
            rec.user_id,
            stored_agent(rec.agent_id),
            rec.session_id,
            rec.timestamp.timestamp(),
            rec.timestamp.isoformat(),
            messages,
            rec.content_hash,
            "applied",
            1,
            ops,
            logged,
            applied,
            True,
            False,
        )
    ]
    for pe in s.episodes:
        ep = pe.episode
        check_embedding(pe.embedding, dim, finite=True)
        rows["episodes"].append((*episode_values(ep), pe.embedding, fold(ep.content)))
    return rows


def _vector_dumper(oid: int) -> type:
    """A binary psycopg dumper of a float32 array to pgvector's `vector` (vector_recv:
    int16 dimension, int16 unused, then big-endian float4s)."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class VectorBinaryDumper(Dumper):
        format = Format.BINARY

        def dump(self, obj: Any) -> bytes:
            a = np.asarray(obj, dtype=">f4")
            return struct.pack(">HH", a.shape[0], 0) + a.tobytes()

    VectorBinaryDumper.oid = oid
    return VectorBinaryDumper


def load_with_copy(dsn: str, shape: Shape, batch_users: int = 500) -> None:
    """The same rows as `load_with_store`, written with binary COPY, a round's batch of
    users a transaction; the search versions last (each user's tier at the version
    the store's bumps would leave: a clock value, plus one per later session)."""
    import psycopg
    from psycopg.types import TypeInfo

    near = centres(shape)
    progress = Progress(shape.users * shape.facts)
    bumps = {"memories": [0] * shape.users, "episodes": [0] * shape.users}
    with psycopg.connect(dsn) as conn:
        info = TypeInfo.fetch(conn, "vector")
        assert info is not None, "pgvector's `vector` type is not on the search path"
        info.register(conn)
        conn.adapters.register_dumper(np.ndarray, _vector_dumper(info.oid))
        for j in range(shape.sessions):
            for lo in range(0, shape.users, batch_users):
                batch: dict[str, list[tuple[Any, ...]]] = {t: [] for t in TABLES[:4]}
                facts = turns = 0
                for i in range(lo, min(shape.users, lo + batch_users)):
                    s = plan_session(shape, near, i, j)
                    for table, rows in session_rows(s, shape.dim).items():
                        batch[table].extend(rows)
                    bumps["memories"][i] += bool(s.writes)
                    bumps["episodes"][i] += bool(s.episodes)
                    facts, turns = facts + len(s.writes), turns + len(s.episodes)
                with conn.transaction():
                    for table, rows in batch.items():
                        copy_rows(conn, table, rows)
                progress.add(facts, turns)
        first = int(time.time() * 1_000_000)  # FIRST_VERSION: the clock in microseconds
        versions = [
            (shape.user(i), tier, first + n - 1)
            for tier, counts in bumps.items()
            for i, n in enumerate(counts)
            if n
        ]
        with conn.transaction():
            copy_rows(conn, "search_versions", versions)


def copy_rows(conn: Any, table: str, rows: list[tuple[Any, ...]]) -> None:
    if not rows:
        return
    columns, types = _COPY[table]
    sql = f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"
    with conn.cursor() as cur, cur.copy(sql) as copy:
        copy.set_types(types.split())
        for row in rows:
            copy.write_row(row)


# --- the store to time ------------------------------------------------------------------
@dataclass
class Target:
    """The store under test: `open(**kw)` gives a new store object on it (empty caches;
    PostgreSQL takes `cached_search`); `dsn` is its PostgreSQL DSN (None: SQLite);
    `built` whether it holds the memory already (a kept schema)."""

    open: Any
    dsn: str | None
    built: bool


@contextmanager
def open_target(
    backend: str, dsn: str | None, dim: int, keep: str | None, settings: Sequence[str] = ()
) -> Iterator[Target]:
    """SQLite: a temp file. PostgreSQL: schema `keep` (kept, reused where a run built it
    to the end, else built again) or a new schema, dropped after; `settings`
    (NAME=VALUE) are set on each of the store's connections."""
    if backend == "sqlite":
        from deltamem.store.sqlite import SQLiteStore

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.db"
            yield Target(lambda **kw: SQLiteStore(path, dim=dim), None, False)
        return
    from deltamem.store.postgres import PostgresStore

    if dsn is None:
        raise SystemExit("--backend postgres needs --dsn")
    with bench_schema(dsn, keep, "bench_users", tuple(settings)) as (pg_dsn, built):
        yield Target(lambda **kw: PostgresStore(pg_dsn, dim, **kw), pg_dsn, built)


def build(target: Target, shape: Shape, load: str) -> dict[str, float]:
    """Write the memory (unless built), then VACUUM ANALYZE it (PostgreSQL)."""
    out = {"build_s": 0.0, "vacuum_analyze_s": 0.0}
    if target.built:
        return out
    t0 = time.perf_counter()
    store = target.open()  # creates the schema: the store's migrations
    try:
        if load == "copy":
            assert target.dsn is not None, "--load copy is for PostgreSQL"
            load_with_copy(target.dsn, shape)
        else:
            load_with_store(store, shape)
    finally:
        store.close()
    out["build_s"] = round(time.perf_counter() - t0, 1)
    if target.dsn is not None:
        import psycopg

        t0 = time.perf_counter()
        print("  VACUUM ANALYZE ...", file=sys.stderr, flush=True)
        with psycopg.connect(target.dsn, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(f"VACUUM ANALYZE {table}")
        out["vacuum_analyze_s"] = round(time.perf_counter() - t0, 1)
    return out


def summary(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "p50_ms": round(statistics.median(s), 3),
        "p99_ms": round(s[int(0.99 * (len(s) - 1))], 3),
        "mean_ms": round(statistics.fmean(s), 3),
        "max_ms": round(s[-1], 3),
    }


def measure(
    target: Target,
    shape: Shape,
    embedder: Embedder,
    n: int,
    warm_users: int,
    asked: Sequence[str] = tuple(QUERIES),
) -> dict[str, dict[str, dict[str, float]]]:
    """p50/p99/mean of `n` searches in each condition (cold, warm, sql), both tiers and
    facts alone, each on a new store object. User 0 takes the process's first searches
    (what any first search loads) and is searched no more."""
    rng = np.random.default_rng([shape.seed, 0x5EA])
    others = np.arange(1, shape.users) if shape.users > 1 else np.arange(1)
    result: dict[str, dict[str, dict[str, float]]] = {}
    for cond in ["cold", "warm"] + (["sql"] if target.dsn is not None else []):
        result[cond] = {}
        for tiers in ("all", "facts"):
            store = target.open(cached_search=False) if cond == "sql" else target.open()
            try:
                searcher = HybridSearcher(store, embedder)
                for q in QUERIES:
                    searcher.search(q, shape.user(0), tiers=tiers)  # type: ignore[arg-type]
                if cond == "warm":
                    pool = rng.choice(others, size=min(warm_users, len(others)), replace=False)
                    for i in pool:  # the user's banks loaded and name read
                        searcher.search(QUERIES[0], shape.user(int(i)), tiers=tiers)  # type: ignore[arg-type]
                    picks = rng.choice(pool, size=n)
                else:  # each user once, where there are enough
                    picks = rng.choice(others, size=n, replace=n > len(others))
                queries = [asked[int(q)] for q in rng.integers(len(asked), size=n)]
                ms = []
                for i, q in zip(picks, queries, strict=True):
                    t = time.perf_counter()
                    searcher.search(q, shape.user(int(i)), limit=20, tiers=tiers)  # type: ignore[arg-type]
                    ms.append((time.perf_counter() - t) * 1000)
                result[cond][tiers] = summary(ms)
            finally:
                store.close()
    return result


def server_facts(dsn: str, explain_user: str | None, vector: np.ndarray) -> dict[str, Any]:
    """The server's version and settings, the store's size and each table's and index's
    (MB) and, for `explain_user`, EXPLAIN (ANALYZE, BUFFERS) of the fact tier's exact
    KNN and keyword ranking (what `cached_search=False` runs) and of the read of the
    user's bank (what a cold cached search runs), each run once on a user not searched
    before."""
    import psycopg

    from deltamem.store.pg_sql import fold, tsquery_sql, vector_literal
    from deltamem.text import terms

    words = [fold(t) for t in terms(QUERIES[0])]

    mb = lambda b: round(int(b) / 2**20, 1)  # noqa: E731
    with psycopg.connect(dsn, autocommit=True) as conn:
        out: dict[str, Any] = {
            "server": conn.execute("SELECT version()").fetchone()[0],  # type: ignore[index]
            "pgvector": conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname='vector'"
            ).fetchone()[0],  # type: ignore[index]
            "settings": {s: conn.execute(f"SHOW {s}").fetchone()[0] for s in SETTINGS},  # type: ignore[index]
            "schema_mb": mb(  # every table of the store, with its indexes and TOAST
                conn.execute(
                    """SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                       JOIN pg_namespace n ON n.oid = c.relnamespace
                       WHERE n.nspname = current_schema() AND c.relkind = 'r'"""
                ).fetchone()[0]  # type: ignore[index]
            ),
        }
        out["tables_mb"] = {
            r[0]: {"total": mb(r[1]), "heap": mb(r[2]), "indexes": mb(r[3]), "rows": r[4]}
            for r in conn.execute(
                """SELECT c.relname, pg_total_relation_size(c.oid), pg_relation_size(c.oid),
                          pg_indexes_size(c.oid), c.reltuples::bigint
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                   WHERE n.nspname = current_schema() AND c.relname = ANY(%s)
                   ORDER BY pg_total_relation_size(c.oid) DESC""",
                (list(TABLES),),
            ).fetchall()
        }
        out["indexes_mb"] = {
            f"{r[0]}.{r[1]}": mb(r[2])
            for r in conn.execute(
                """SELECT relname, indexrelname, pg_relation_size(indexrelid)
                   FROM pg_stat_user_indexes WHERE schemaname = current_schema()
                   AND relname IN ('memories', 'episodes') ORDER BY relname, indexrelname"""
            ).fetchall()
        }
        if explain_user is not None:
            cur = psycopg.ClientCursor(conn)
            plans = {
                "knn": (
                    "SELECT id, embedding <=> %s::vector AS distance FROM memories "
                    "WHERE user_id=%s ORDER BY distance, seq LIMIT 40",
                    (vector_literal(vector), explain_user),
                ),
                "bank": (
                    "SELECT seq, xmin::text::bigint AS xmin, id, agent_id, memory_type, "
                    "session_id, ts, vector_send(embedding) AS embedding, tsv::text AS tsv "
                    "FROM memories WHERE user_id=%s ORDER BY seq",
                    (explain_user,),
                ),
                "keywords": (
                    f"""SELECT id, ts_rank_cd(tsv, q.query, 1) AS rank
                        FROM memories, (SELECT {tsquery_sql(len(words))} AS query) q
                        WHERE tsv @@ q.query AND user_id=%s ORDER BY rank DESC, seq LIMIT 40""",
                    (*words, explain_user),
                ),
            }
            out["explain_user"] = explain_user
            for name, (sql, params) in plans.items():
                rows = cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params).fetchall()
                vec = r"'\[[^\]]*\]'::vector"  # 384 numbers: shown as <query vector>
                out[f"explain_{name}"] = [re.sub(vec, "<query vector>", r[0]) for r in rows]
    return out


def main(argv: list[str] | None = None, embedder: Embedder | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--facts-per-user", type=int, default=100)
    ap.add_argument("--episodes-per-user", type=int, default=20, help="turns per user")
    ap.add_argument("--sessions-per-user", type=int, default=5)
    ap.add_argument("--queries", type=int, default=500, help="timed searches per condition")
    ap.add_argument("--warm-users", type=int, default=32)
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument("--dsn", help="PostgreSQL server (a schema is made on it)")
    ap.add_argument("--schema", help="PostgreSQL: build into schema NAME and keep it, or reuse it")
    ap.add_argument("--load", choices=["copy", "store"], help="default: copy on PostgreSQL")
    ap.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE for one user")
    ap.add_argument(
        "--query", action="append", help="time this query instead of the eight (repeatable)"
    )
    ap.add_argument(
        "--pg-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for the store's connections, e.g. plan_cache_mode=force_custom_plan",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    load = args.load or ("copy" if args.backend == "postgres" else "store")
    if load == "copy" and args.backend != "postgres":
        ap.error("--load copy is for --backend postgres")
    sessions = max(1, min(args.sessions_per_user, args.episodes_per_user))
    if args.users < 1 or args.facts_per_user < 0 or args.episodes_per_user < 1:
        ap.error("need at least one user and one turn a user")
    real = None
    if embedder is None:
        real = make_embedder("local")
        embedder = Precomputed(real, sorted(set(QUERIES + (args.query or []))))
    shape = Shape(
        args.users, args.facts_per_user, args.episodes_per_user, sessions, embedder.dim, args.seed
    )
    result: dict[str, Any] = {
        "users": shape.users,
        "facts_per_user": shape.facts,
        "episodes_per_user": shape.turns,
        "sessions_per_user": shape.sessions,
        "facts": shape.users * shape.facts,
        "episodes": shape.users * shape.turns,
        "backend": args.backend,
        "load": load,
        "queries": args.queries,
    }
    if args.pg_option:
        result["pg_options"] = args.pg_option
    if args.query:
        result["asked"] = args.query
    with open_target(args.backend, args.dsn, shape.dim, args.schema, args.pg_option) as target:
        result.update(build(target, shape, load))
        if result["build_s"]:
            result["facts_per_s"] = round(result["facts"] / result["build_s"])
        result["search"] = measure(
            target, shape, embedder, args.queries, args.warm_users, args.query or QUERIES
        )
        if target.dsn is not None:
            explain = shape.user(shape.users - 1) if args.explain else None
            vector = embedder.embed([QUERIES[0]])[0]
            result.update(server_facts(target.dsn, explain, vector))
    if real is not None:
        result["embed_ms"] = embed_ms(real)
    print(json.dumps(result, indent=None if args.json else 2))
    return result


if __name__ == "__main__":
    main()
