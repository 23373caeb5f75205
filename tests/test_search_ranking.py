"""The SQLite store's keyword search computes FTS5's bm25() in memory (store/keywords.py):
its results must be SQL's to the bit, in the same order, and so must every search
built on it. Each test opens the same file twice, once ranking in memory and once
ranking in SQL as before (`memory_keywords=False`), and compares."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from fakes import DIM, T0

from deltamem.embed import Embedder
from deltamem.episodes import plan_episodes
from deltamem.retrieval.hybrid import HybridSearcher
from deltamem.store import vectors
from deltamem.store.base import PlannedEpisode, PlannedWrite
from deltamem.store.keywords import averages, formula_matches, query_token, tokenize
from deltamem.store.sqlite import SQLiteStore
from deltamem.text import keywords, terms
from deltamem.types import Message, SearchFilters, SessionRecord

DATA = Path(__file__).parent.parent.parent / "shared" / "data"
LOCOMO_DEV = DATA / "locomo" / "locomo10-dev.json"

NAMES = ["Martin", "Sarah", "Zoë", "Priya", "O'Brien", "José", "Mei", "Jonas"]
VERBS = ["likes", "liked", "visited", "runs", "running", "bought", "studies", "met", "hates"]
THINGS = [
    "jazz concerts",
    "the Lisbon office",
    "a café in Zürich",
    "marine biology",
    "spicy food, very spicy food",
    "naïve art",
    "the 2029 marathon",
    "sci-fi films",
    "herbal tea",
    "Kyoto",
    "a rescue cat called Zorro",
]
QUERIES = [
    "What films does Martin like?",
    "Where did Sarah travel in 2029?",
    "Zoë café Zürich",
    "Who is O'Brien?",
    "running marathon runs",
    "José naive art",
    "tea tea tea",
    "spicy",
    "Martin Martin's cat Zorro",
    "nothing matches quux",
]


class HashEmbedder(Embedder):
    """A fixed unit vector per text (no model needed: the dense side is not under test)."""

    name = "hash"
    dim = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
            v = np.random.default_rng(seed).normal(size=DIM)
            out[i] = v / np.linalg.norm(v)
        return out


def record(user: str, sid: str, texts: list[str], day: int, agent: str | None = None):
    return SessionRecord(
        user_id=user,
        agent_id=agent,
        session_id=sid,
        timestamp=T0 + timedelta(days=day),
        messages=[
            Message(role="user" if i % 2 == 0 else "assistant", content=t)
            for i, t in enumerate(texts)
        ],
        content_hash=f"{user}-{agent}-{sid}-{len(texts)}",
    )


def fill(store: SQLiteStore, emb: Embedder, seed: int, sessions: int = 30) -> None:
    rng = np.random.default_rng(seed)
    types = [None, "persona", "event", "relationship"]
    for s in range(sessions):
        user = "u-main" if s % 4 else "u-other"
        agent = "bot" if s % 3 == 0 else None
        texts = [
            f"{NAMES[rng.integers(8)]} {VERBS[rng.integers(9)]} {THINGS[rng.integers(11)]}"
            + " again" * int(rng.integers(3))
            for _ in range(int(rng.integers(4, 12)))
        ]
        rec = record(user, f"s{seed}-{s}", texts, day=s, agent=agent)
        stored, _ = store.log_session(rec, plan_episodes(rec, emb))
        writes = [
            PlannedWrite(
                "add",
                t,
                emb.embed([t])[0],
                memory_type=types[int(rng.integers(4))],  # type: ignore[arg-type]
                keywords=keywords(t),
            )
            for t in texts[: len(texts) // 2 + 1]
        ]
        store.apply_session(stored, writes, [])


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SQLiteStore, SQLiteStore]]:
    fast = SQLiteStore(tmp_path / "s.db", dim=DIM)
    slow = SQLiteStore(tmp_path / "s.db", dim=DIM, memory_keywords=False)
    try:
        yield fast, slow
    finally:
        fast.close()
        slow.close()


SCOPES: list[tuple[str | None, SearchFilters | None]] = [
    (None, None),
    ("bot", None),
    ("", None),
    (None, SearchFilters(since=T0 + timedelta(days=10))),
    (None, SearchFilters(until=T0 + timedelta(days=20), memory_type="event")),
    (None, SearchFilters(session_id="s1-5")),
]


def assert_same_keyword_rankings(fast: SQLiteStore, slow: SQLiteStore, queries: list[str]) -> int:
    """Compare both tiers' keyword search for every query and scope; return how many
    comparisons had results (so a test can tell it compared something)."""
    compared = 0
    for q in queries:
        for agent, filters in SCOPES:
            for k in (3, 40, 1000):
                for search in ("keyword_search", "episode_keyword_search"):
                    mine = getattr(fast, search)("u-main", terms(q), k, agent, filters)
                    sql = getattr(slow, search)("u-main", terms(q), k, agent, filters)
                    assert mine == sql, (q, agent, filters, k, search)
                    compared += bool(sql)
    return compared


def test_in_memory_bm25_is_used_with_this_sqlite() -> None:
    # if SQLite's bm25() ever changes, the store falls back to SQL: this says so
    assert formula_matches()


def test_fts5_helpers() -> None:
    counts = tokenize(["Running runners ran, running!", ""])
    assert counts == [{"run": 2, "runner": 1, "ran": 1}, {}]
    assert query_token("Zürich") == "zurich"
    assert query_token("o'brien") is None  # two tokens: FTS5 would match a phrase
    assert averages(bytes([0x81, 0x00, 0x05, 0x07])) == (128, 12)
    assert averages(b"") == (0, 0)


def test_keyword_search_in_memory_equals_sql(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    fast, slow = stores
    fill(fast, HashEmbedder(), seed=1)
    assert assert_same_keyword_rankings(fast, slow, QUERIES) > 50


def test_rankings_stay_equal_after_updates_deletes_and_resets(
    stores: tuple[SQLiteStore, SQLiteStore],
) -> None:
    fast, slow = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=1, sessions=12)
    assert_same_keyword_rankings(fast, slow, QUERIES[:4])  # banks loaded, then changed:
    live = fast.list_memories("u-main")
    rec = record("u-main", "edit", ["Martin now hates jazz"], day=40)
    stored, _ = fast.log_session(rec, plan_episodes(rec, emb))
    fast.apply_session(
        stored,
        [PlannedWrite("update", "Martin hates jazz concerts now", emb.embed(["x"])[0], live[0].id)],
        [],
    )
    fast.delete(live[1].id)
    assert_same_keyword_rankings(fast, slow, QUERIES)
    fast.reset("u-main", agent_id="bot")
    fill(fast, emb, seed=2, sessions=8)
    assert_same_keyword_rankings(fast, slow, QUERIES)
    fast.reset("u-main")
    assert fast.keyword_search("u-main", ["martin"], 10) == []
    fill(fast, emb, seed=3, sessions=8)  # rowids of the removed rows are given out again
    assert_same_keyword_rankings(fast, slow, QUERIES)


@pytest.mark.parametrize("side_by_side", [False, True])
def test_search_hits_equal_to_sql_ranking(
    stores: tuple[SQLiteStore, SQLiteStore], side_by_side: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the two tiers on two threads (as for large banks) or one after the other
    monkeypatch.setattr(vectors, "PARALLEL_ROWS", 0 if side_by_side else 10**9)
    fast, slow = stores
    emb = HashEmbedder()
    fill(fast, emb, seed=4)
    for q in QUERIES:
        for tiers in ("all", "facts", "episodes"):
            mine = HybridSearcher(fast, emb).search(q, "u-main", tiers=tiers)  # type: ignore[arg-type]
            sql = HybridSearcher(slow, emb).search(q, "u-main", tiers=tiers)  # type: ignore[arg-type]
            assert [h.model_dump() for h in mine] == [h.model_dump() for h in sql]


@pytest.mark.skipif(not LOCOMO_DEV.exists(), reason="no dev data (../shared/data)")
def test_rankings_equal_on_locomo_dev_data(stores: tuple[SQLiteStore, SQLiteStore]) -> None:
    from deltamem.bench.datasets import locomo

    fast, slow = stores
    emb = HashEmbedder()
    questions: list[str] = []
    for conv in locomo.load(LOCOMO_DEV):
        for s in conv.sessions:
            bench = locomo.to_bench_session(conv, s)
            rec = SessionRecord(
                user_id="u-main",
                session_id=f"{conv.sample_id}-{bench.session_id}",
                timestamp=bench.timestamp,
                messages=[Message.model_validate(m) for m in bench.messages],
                content_hash=f"{conv.sample_id}-{bench.session_id}",
            )
            planned: list[PlannedEpisode] = plan_episodes(rec, emb)
            stored, _ = fast.log_session(rec, planned)
            writes = [  # every third turn as a fact too
                PlannedWrite("add", text[:500], p.embedding, keywords=keywords(text))
                for p in planned[::3]
                if (text := p.episode.content)
            ]
            fast.apply_session(stored, writes, [])
        questions += [qa.question for qa in conv.qa]
    assert len(questions) > 100
    assert_same_keyword_rankings(fast, slow, questions[::4])
    for q in questions[::10]:
        mine = HybridSearcher(fast, emb).search(q, "u-main")
        sql = HybridSearcher(slow, emb).search(q, "u-main")
        assert [h.model_dump() for h in mine] == [h.model_dump() for h in sql]


def test_dense_search_gives_blas_its_threads_back() -> None:
    from threadpoolctl import threadpool_info

    from deltamem.store.vectors import ONE_BLAS_THREAD

    before = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    with ONE_BLAS_THREAD, ONE_BLAS_THREAD:  # nested, as concurrent searches are
        inside = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    after = [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert inside == [1] * len(before)
    assert after == before
