"""PostgreSQL-only behaviour of PostgresStore, on a real server (tests/pg.py).

The shared semantics are in tests/test_store.py, which runs on every backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from fakes import T0, session
from pg import PgServer, fresh_schema, pg_server_fixture

from deltamem.llm.base import CallRecord
from deltamem.store.base import PlannedWrite, SessionConflict, Store, StoreError
from deltamem.store.sqlite import SQLiteStore

pytest.importorskip("psycopg")
from deltamem.store.postgres import PostgresStore

# the scripts shipped in deltamem/store/migrations_pg
MIGRATIONS = sum(
    1 for p in resources.files("deltamem.store.migrations_pg").iterdir() if p.name.endswith(".sql")
)
DIM = 16
_pg_server = pg_server_fixture()  # the session's server, shared with conftest's


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    with fresh_schema(pg_server) as dsn:
        yield dsn


@pytest.fixture
def open_store(pg_dsn: str) -> Iterator[Callable[..., PostgresStore]]:
    """Open PostgresStores on the test's fresh schema; all are closed afterwards."""
    opened: list[PostgresStore] = []

    def open_(dim: int = DIM) -> PostgresStore:
        s = PostgresStore(pg_dsn, dim=dim, embedder_name="test")
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


def vec(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def add(content: str, v: np.ndarray) -> PlannedWrite:
    return PlannedWrite("add", content, v)


def test_migrations_run_once_and_survive_reconnect(
    open_store: Callable[..., PostgresStore], pg_dsn: str, pg_server: PgServer
) -> None:
    rng = np.random.default_rng(0)
    a = open_store()
    rec, _ = a.log_session(session("s1"))
    [op] = a.apply_session(rec, [add("Alice likes tea.", vec(rng))], [])
    a.close()
    b = open_store()  # reconnect: nothing re-applied, nothing lost
    assert b.get(op.memory_id or "") is not None
    assert b.list_sessions("u1")[0].status == "applied"
    with pg_server.connect(pg_dsn) as conn:
        versions = conn.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
        assert versions == [(n,) for n in range(1, MIGRATIONS + 1)]  # each applied once
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        assert meta == {"dim": str(DIM), "embedder": "test"}
        indexes = dict(
            conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'memories'"
            ).fetchall()
        )
    assert "(user_id, agent_id, ts)" in indexes["memories_scope"]
    assert "gin (tsv)" in indexes["memories_tsv"]
    # exact per-user KNN: no approximate index that would filter after the search
    assert not any("hnsw" in d or "ivfflat" in d for d in indexes.values())


def test_call_log_keeps_the_raw_reply(
    open_store: Callable[..., PostgresStore], pg_dsn: str, pg_server: PgServer
) -> None:
    store = open_store()
    store.log_call(CallRecord("manager", "m", 10, 5, 0, 0.1, True, reply='{"operations": []}'))
    store.log_call(CallRecord("manager", "m", 0, 0, 0, 0.2, False, "timed out"))
    with pg_server.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT ok, error, reply FROM llm_calls ORDER BY id").fetchall()
    assert rows == [(True, None, '{"operations": []}'), (False, "timed out", None)]


def test_dimension_mismatch_raises(open_store: Callable[..., PostgresStore]) -> None:
    open_store(dim=DIM).close()
    with pytest.raises(StoreError, match=f"{DIM}-d"):
        open_store(dim=DIM + 1)
    open_store(dim=DIM)  # the right dimension still opens


def test_concurrent_first_connects_migrate_once(pg_dsn: str, pg_server: PgServer) -> None:
    stores: list[PostgresStore] = []
    errors: list[BaseException] = []

    def connect() -> None:
        try:
            stores.append(PostgresStore(pg_dsn, dim=DIM))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=connect) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == [] and len(stores) == 4
    with pg_server.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM schema_version").fetchone() == (MIGRATIONS,)


def test_two_instances_share_one_database(open_store: Callable[..., PostgresStore]) -> None:
    rng = np.random.default_rng(1)
    a, b = open_store(), open_store()
    rec, created = a.log_session(session("s1"))
    assert created
    again, created = b.log_session(session("s1"))  # b sees a's log
    assert not created and again.seq == rec.seq
    with pytest.raises(SessionConflict):
        b.log_session(session("s1", text="other content"))
    v = vec(rng)
    [op] = a.apply_session(rec, [add("Alice adopted a beagle.", v)], [])
    mid = op.memory_id or ""
    assert b.get(mid) is not None
    assert [i for i, _ in b.dense_search("u1", v, 3)] == [mid]
    assert [i for i, _ in b.keyword_search("u1", ["beagle"], 3)] == [mid]
    assert [m.id for m in b.session_memories("s1")] == [mid]
    with pytest.raises(StoreError):  # already applied, by the other instance
        b.apply_session(again, [add("Alice adopted a cat.", vec(rng))], [])
    assert b.delete(mid)
    assert a.get(mid) is None
    assert [h.op for h in a.history(mid)] == ["add", "delete"]


def test_concurrent_apply_of_one_session_applies_once(
    open_store: Callable[..., PostgresStore],
) -> None:
    rng = np.random.default_rng(2)
    stores = [open_store() for _ in range(3)]
    rec, _ = stores[0].log_session(session("s1"))
    results: list[str] = []

    def apply(s: PostgresStore) -> None:
        try:
            s.apply_session(rec, [add("Alice likes jazz.", vec(rng))], [])
            results.append("applied")
        except StoreError:
            results.append("refused")

    threads = [threading.Thread(target=apply, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["applied", "refused", "refused"]
    assert stores[0].count("u1") == 1


def test_dense_search_is_exact_and_isolated_per_user(
    open_store: Callable[..., PostgresStore],
) -> None:
    rng = np.random.default_rng(3)
    s = open_store()
    n = 300
    banks: dict[str, dict[str, np.ndarray]] = {}
    for day, user in enumerate(("u1", "u2")):
        rec, _ = s.log_session(session("s1", user_id=user, timestamp=T0 + timedelta(days=day)))
        vecs = [vec(rng) for _ in range(n)]
        ops = s.apply_session(rec, [add(f"{user} fact {i}", v) for i, v in enumerate(vecs)], [])
        banks[user] = {o.memory_id or "": v for o, v in zip(ops, vecs, strict=True)}
    for user, bank in banks.items():
        ids = list(bank)
        mat = np.stack([bank[i] for i in ids])
        for _ in range(5):
            q = vec(rng)
            hits = s.dense_search(user, q, 10)
            sims = mat @ q
            expected = [ids[i] for i in np.argsort(-sims)[:10]]
            assert [i for i, _ in hits] == expected  # exact top 10 of this user only
            assert [x for _, x in hits] == pytest.approx(sorted(sims)[::-1][:10], abs=1e-5)
        # the other user's best match never leaks in, however close it is
        other = next(u for u in banks if u != user)
        twin = next(iter(banks[other].values()))
        assert all(i in bank for i, _ in s.dense_search(user, twin, 50))
    assert s.count("u1") == s.count("u2") == n


def test_keyword_query_is_built_from_bound_parameters(
    open_store: Callable[..., PostgresStore],
) -> None:
    rng = np.random.default_rng(4)
    s = open_store()
    rec, _ = s.log_session(session("s1"))
    [op] = s.apply_session(rec, [add("Alice hikes in the Alps with her sister.", vec(rng))], [])
    hostile = ["a & !b | (c:*)", "'':*", "\\", "<->", "x' OR 1=1 --", "hiking"]
    assert [i for i, _ in s.keyword_search("u1", hostile, 5)] == [op.memory_id]
    # stop words are indexed, as in the SQLite store (FTS5 keeps them too)
    assert [i for i, _ in s.keyword_search("u1", ["with"], 5)] == [op.memory_id]
    # a multi-word term is a phrase
    assert [i for i, _ in s.keyword_search("u1", ["her sister"], 5)] == [op.memory_id]
    assert s.keyword_search("u1", ["sister her"], 5) == []
    # diacritics are folded on both sides, as FTS5's unicode61 does
    rec, _ = s.log_session(session("s2"))
    [cafe] = s.apply_session(rec, [add("Alice met Zoë at the café.", vec(rng))], [])
    for term in ("cafe", "café", "zoe", "ZOË"):
        assert [i for i, _ in s.keyword_search("u1", [term], 5)] == [cafe.memory_id]


def test_reconnects_after_the_connection_drops(
    open_store: Callable[..., PostgresStore], pg_server: PgServer
) -> None:
    s = open_store()
    s.log_session(session("s1"))
    with pg_server.connect() as conn:  # as a server restart or an idle timeout would
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
    assert [r.session_id for r in s.list_sessions("u1")] == ["s1"]  # a read is retried
    s.mark_failed("u1", "s1", None, "boom")  # and writes go on the new connection
    rec = s.get_session("u1", "s1")
    assert rec is not None and rec.status == "failed"


def test_closed_store_refuses_work(open_store: Callable[..., PostgresStore]) -> None:
    s = open_store()
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.count("u1")


def test_same_answers_as_the_sqlite_store(
    open_store: Callable[..., PostgresStore], tmp_path: Path
) -> None:
    """One random history of adds, updates and deletes, replayed on both backends:
    every read answers the same (keyword ranks differ: ts_rank_cd is not BM25)."""
    rng = np.random.default_rng(5)
    pg = open_store()
    lite = SQLiteStore(tmp_path / "s.db", dim=DIM)
    words = "tea coffee beagle oslo rome jazz hiking sister brother guitar paris job".split()
    live: dict[str, list[str]] = {"u1": [], "u2": []}  # contents, to aim updates at
    try:
        for n in range(24):
            user = ("u1", "u2")[n % 2]
            agent = "bot" if n % 3 == 0 else None
            rec = session(f"s{n}", user, agent_id=agent, timestamp=T0 + timedelta(days=n % 7))
            planned = []
            for j in range(int(rng.integers(1, 4))):
                text = f"{user} {' '.join(rng.choice(words, 3))} number {n}-{j}."
                kind = ("event", "persona", None)[j % 3]
                planned.append((text, vec(rng), kind, j == 0 and live[user] and rng.random() < 0.4))
            for store in (pg, lite):
                by_content = {m.content: m.id for m in store.list_memories(user)}
                writes = [
                    PlannedWrite(
                        "update", t, v, memory_id=by_content[live[user][-1]], memory_type=k
                    )
                    if upd
                    else PlannedWrite("add", t, v, memory_type=k, keywords=[t.split()[1]])
                    for t, v, k, upd in planned
                ]
                stored, _ = store.log_session(rec)
                store.apply_session(stored, writes, [])
            for t, _, _, upd in planned:
                if upd:
                    live[user].pop()
                live[user].append(t)
            if n % 5 == 4:  # an application delete
                victim = live[user].pop(0)
                for store in (pg, lite):
                    [mid] = [m.id for m in store.list_memories(user) if m.content == victim]
                    assert store.delete(mid)

        scores: dict[tuple[str, int], list[float]] = {}

        def view(store: Store) -> dict[object, object]:
            out: dict[object, object] = {}
            content = {m.id: m.content for u in live for m in store.list_memories(u)}
            for u in live:
                mems = store.list_memories(u)
                out[u] = [m.model_dump(exclude={"id", "created_at", "updated_at"}) for m in mems]
                out[u, "hist"] = [
                    [
                        (h.op, h.old_content, h.new_content, h.session_id)
                        for h in store.history(m.id)
                    ]
                    for m in mems
                ]
                out[u, "bot"] = [m.content for m in store.list_memories(u, "bot", limit=3)]
                out[u, "count"] = (store.count(u), store.count(u, "bot"))
                for i in range(4):  # unit queries: SQLite scores by dot product on unit rows
                    hits = store.dense_search(u, vec(np.random.default_rng(i)), 5)
                    out[u, "dense", i] = [content[h] for h, _ in hits]
                    scores[u, i] = [s for _, s in hits]
                for w in words[:6]:
                    out[u, "kw", w] = sorted(
                        content[h] for h, _ in store.keyword_search(u, [w], 50)
                    )
            for sid in ("s3", "s8", "s13"):
                out[sid] = sorted(m.content for m in store.session_memories(sid))
            out["ops"] = [o.op for o in store.session_operations("u2", "s9")]
            return out

        before = view(pg)
        pg_scores = dict(scores)
        assert before == view(lite)
        assert all(pg_scores[key] == pytest.approx(s, abs=1e-5) for key, s in scores.items())
        hist = [h for u in live for hs in before[u, "hist"] for h in hs]  # type: ignore[attr-defined]
        assert {"add", "update"} <= {h[0] for h in hist}
        assert pg.reset("u1", agent_id="bot") == lite.reset("u1", agent_id="bot")
        assert pg.reset("u2", keep_log=True) == lite.reset("u2", keep_log=True)
        assert view(pg) == view(lite)
    finally:
        lite.close()
