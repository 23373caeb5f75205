"""The PostgreSQL store ranks search over banks cached in the process (store/pg_bank.py,
store/postgres_search.py): its results must be the SQL's (pgvector's exact KNN,
ts_rank_cd), ids, scores and order. Each test opens the same schema twice, once
searching the cached banks and once ranking in SQL (`cached_search=False`), and
compares; a second cached store stands for another process, which must see a
write made through the first on its next search."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from fakes import DIM
from pg import PgServer, fresh_schema, pg_server_fixture
from test_search_ranking import QUERIES, SCOPES, HashEmbedder, fill, record

from deltamem.episodes import plan_episodes
from deltamem.retrieval.hybrid import HybridSearcher
from deltamem.store import vectors
from deltamem.store.base import PlannedWrite
from deltamem.store.pg_bank import margin, parse_tsvector, query_lexeme
from deltamem.text import terms

pytest.importorskip("psycopg")
from deltamem.store.postgres import PostgresStore

_pg_server = pg_server_fixture()
Stores = tuple[PostgresStore, PostgresStore, PostgresStore]


@pytest.fixture
def stores(pg_server: PgServer) -> Iterator[Stores]:
    """(cached, SQL-ranked, another cached one) on one fresh schema."""
    with fresh_schema(pg_server) as dsn:
        opened = (
            PostgresStore(dsn, dim=DIM),
            PostgresStore(dsn, dim=DIM, cached_search=False),
            PostgresStore(dsn, dim=DIM),
        )
        try:
            yield opened
        finally:
            for s in opened:
                s.close()


def queries_vectors(emb: HashEmbedder) -> list[np.ndarray]:
    vecs = list(emb.embed(QUERIES))
    bank = emb.embed(["Martin likes jazz concerts"])[0]
    vecs.append(bank)  # a stored vector itself: cosine 1, tied with its duplicates
    vecs.append(3.0 * bank)  # not unit length
    return vecs


def assert_same_rankings(fast: PostgresStore, slow: PostgresStore, user: str = "u-main") -> int:
    """Compare both tiers' dense and keyword search for every query and scope; return
    how many comparisons had results."""
    emb = HashEmbedder()
    compared = 0
    for q, v in zip([*QUERIES, "Martin", "film films"], queries_vectors(emb), strict=True):
        for agent, filters in SCOPES:
            for k in (1, 3, 40, 1000):
                for search, arg in (
                    ("keyword_search", terms(q)),
                    ("episode_keyword_search", terms(q)),
                    ("dense_search", v),
                    ("episode_dense_search", v),
                ):
                    mine = getattr(fast, search)(user, arg, k, agent, filters)
                    sql = getattr(slow, search)(user, arg, k, agent, filters)
                    assert mine == sql, (q, agent, filters, k, search)
                    compared += bool(sql)
                # the four together, as one search asks them (one statement)
                for facts, episodes in ((True, True), (True, False), (False, True)):
                    both = (user, v, terms(q), k, agent, filters)
                    tiers = {"facts": facts, "episodes": episodes}
                    assert fast.tier_rankings(*both, **tiers) == slow.tier_rankings(*both, **tiers)
    return compared


def test_helpers() -> None:
    assert parse_tsvector("'cafe':3 'it''s':1,5 'x'") == ({"cafe": 1, "it''s": 2, "x": 0}, 4)
    assert parse_tsvector("'a':1A") is None  # weight A: ranked otherwise
    assert query_lexeme("'film'") == "film"
    assert query_lexeme("") is None
    assert query_lexeme("'sci-fi' <-> 'sci' <-> 'fi'") is False
    assert 4e-5 < margin(384) < 1e-4


def test_cached_search_equals_sql(stores: Stores) -> None:
    fast, slow, _ = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=1)  # type: ignore[arg-type]
    dup = emb.embed(["Martin likes jazz concerts"])[0]
    rec = record("u-main", "dups", ["Martin likes jazz concerts"] * 3, day=3)
    stored, _ = fast.log_session(rec, plan_episodes(rec, emb))
    fast.apply_session(stored, [PlannedWrite("add", f"dup {i}", dup) for i in range(3)], [])
    assert assert_same_rankings(fast, slow) > 500
    # a phrase term (several lexemes) is ranked in SQL, the same
    for t in (["sci-fi", "martin"], ["o'brien"], ["..."]):
        assert fast.keyword_search("u-main", t, 40) == slow.keyword_search("u-main", t, 40)


def test_cached_search_does_not_rank_in_sql(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deltamem.store import postgres_search

    fast, _, _ = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=5, sessions=8)  # type: ignore[arg-type]

    def refuse(*args: object) -> None:
        raise AssertionError("ranked in SQL")

    monkeypatch.setattr(postgres_search, "knn", refuse)
    monkeypatch.setattr(postgres_search, "text_rank", refuse)
    for q, v in zip(QUERIES, emb.embed(QUERIES), strict=True):
        if "'" in q:  # "o'brien" is a phrase of two lexemes: ranked in SQL
            continue
        for agent, filters in SCOPES:
            fast.dense_search("u-main", v, 10, agent, filters)
            fast.episode_dense_search("u-main", v, 10, agent, filters)
            fast.keyword_search("u-main", terms(q), 10, agent, filters)
            fast.episode_keyword_search("u-main", terms(q), 10, agent, filters)
            fast.tier_rankings("u-main", v, terms(q), 10, agent, filters)


def test_a_search_sends_one_ranking_statement(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both tiers' versions, candidates and terms in one statement; then one fetch per
    tier: three statements a search once the banks are loaded."""
    fast, slow, _ = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=7, sessions=6)  # type: ignore[arg-type]
    searcher = HybridSearcher(fast, emb)  # type: ignore[arg-type]
    searcher.search("jazz concerts", "u-main")  # loads the banks and the name
    sent: list[str] = []
    read = fast._read
    monkeypatch.setattr(fast, "_read", lambda sql, *a: sent.append(sql) or read(sql, *a))
    hits = searcher.search("jazz concerts in Lisbon", "u-main")
    assert {h.kind for h in hits} == {"fact", "episode"}
    assert len(sent) == 3, sent
    expected = HybridSearcher(slow, emb).search("jazz concerts in Lisbon", "u-main")  # type: ignore[arg-type]
    assert [h.model_dump() for h in hits] == [h.model_dump() for h in expected]


def test_rankings_stay_equal_after_updates_deletes_and_resets(stores: Stores) -> None:
    fast, slow, other = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=1, sessions=12)  # type: ignore[arg-type]
    assert_same_rankings(fast, slow)  # banks loaded, then changed:
    assert_same_rankings(other, slow)
    live = fast.list_memories("u-main")
    rec = record("u-main", "edit", ["Martin now hates jazz"], day=40)
    stored, _ = fast.log_session(rec, plan_episodes(rec, emb))
    fast.apply_session(
        stored,
        [PlannedWrite("update", "Martin hates jazz concerts now", emb.embed(["x"])[0], live[0].id)],
        [],
    )
    fast.delete(live[1].id)
    fast.edit(live[2].id, "Sarah edited this", emb.embed(["y"])[0], ["edited"])
    for store in (fast, other):
        assert_same_rankings(store, slow)
    fast.reset("u-main", agent_id="bot")
    fill(fast, emb, seed=2, sessions=8)  # type: ignore[arg-type]
    assert_same_rankings(other, slow)
    fast.reset("u-main")
    assert fast.keyword_search("u-main", ["martin"], 10) == []
    assert other.dense_search("u-main", emb.embed(["x"])[0], 10) == []
    fill(fast, emb, seed=3, sessions=8)  # type: ignore[arg-type]
    for store in (fast, other):
        assert_same_rankings(store, slow)


def test_another_process_sees_a_write_on_its_next_search(stores: Stores) -> None:
    writer, _, reader = stores
    emb = HashEmbedder()
    v = emb.embed(["zebra"])[0]
    assert reader.dense_search("u-main", v, 5) == []
    assert reader.keyword_search("u-main", ["zebra"], 5) == []
    assert reader.episode_keyword_search("u-main", ["zebra"], 5) == []
    rec = record("u-main", "z", ["a zebra crossed"], day=1)
    stored, _ = writer.log_session(rec, plan_episodes(rec, emb))
    assert [e for e, _ in reader.episode_keyword_search("u-main", ["zebra"], 5)] == [
        e.episode.id for e in plan_episodes(rec, emb)
    ]
    (op,) = writer.apply_session(stored, [PlannedWrite("add", "likes zebras", v)], [])
    assert [m for m, _ in reader.dense_search("u-main", v, 5)] == [op.memory_id]
    assert [m for m, _ in reader.keyword_search("u-main", ["zebra"], 5)] == [op.memory_id]
    writer.edit(op.memory_id, "likes horses", emb.embed(["horse"])[0], [])
    assert reader.keyword_search("u-main", ["zebra"], 5) == []
    assert [m for m, _ in reader.keyword_search("u-main", ["horses"], 5)] == [op.memory_id]
    fact, episode = reader.tier_rankings("u-main", v, ["horses"], 5)
    assert [m for m, _ in fact.dense] == [m for m, _ in fact.keywords] == [op.memory_id]
    writer.delete(op.memory_id)
    fact, episode = reader.tier_rankings("u-main", v, ["horses"], 5)
    assert fact.dense == fact.keywords == [] and episode.dense
    assert reader.dense_search("u-main", v, 5) == []
    writer.reset("u-main")
    assert reader.episode_dense_search("u-main", v, 5) == []


@pytest.mark.parametrize("side_by_side", [False, True])
def test_search_hits_equal_to_sql_ranking(
    stores: Stores, side_by_side: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the two tiers on two threads (as for large banks) or one after the other
    monkeypatch.setattr(vectors, "PARALLEL_ROWS", 0 if side_by_side else 10**9)
    fast, slow, _ = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=4)  # type: ignore[arg-type]
    for q in QUERIES:
        for tiers in ("all", "facts", "episodes"):
            mine = HybridSearcher(fast, emb).search(q, "u-main", tiers=tiers)  # type: ignore[arg-type]
            sql = HybridSearcher(slow, emb).search(q, "u-main", tiers=tiers)  # type: ignore[arg-type]
            assert [h.model_dump() for h in mine] == [h.model_dump() for h in sql]


def test_a_reload_reads_only_the_rows_changed(
    stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow, _ = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=6, sessions=8)  # type: ignore[arg-type]
    v = emb.embed(["Martin"])[0]
    fast.dense_search("u-main", v, 5)  # the bank is loaded
    read: list[int] = []
    rows_bank = fast._rows_bank
    monkeypatch.setattr(
        fast, "_rows_bank", lambda rows, version: read.append(len(rows)) or rows_bank(rows, version)
    )
    live = fast.list_memories("u-main")
    rec = record("u-main", "edit", ["Martin now hates jazz"], day=40)
    stored, _ = fast.log_session(rec)
    fast.apply_session(
        stored,
        [
            PlannedWrite("update", "Martin hates jazz now", emb.embed(["x"])[0], live[0].id),
            PlannedWrite("add", "Martin has a new cat", emb.embed(["y"])[0]),
        ],
        [],
    )
    fast.delete(live[1].id)
    assert fast.dense_search("u-main", v, 1000) == slow.dense_search("u-main", v, 1000)
    assert fast.keyword_search("u-main", ["martin"], 1000) == slow.keyword_search(
        "u-main", ["martin"], 1000
    )
    assert read == [2]  # the updated row and the new one
